package inject

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Config is what the installation (the chart's sidecarInjection values, as manager flags)
// fixes for every injected sidecar. Pods may override only the requests, within the bounds,
// and the ports.
type Config struct {
	// Image is the sidecar's image (the operator's image holds the sidecar binary).
	Image string
	// PullPolicy is the sidecar's imagePullPolicy.
	PullPolicy corev1.PullPolicy
	// Requests are the default CPU and memory requests.
	Requests Resources
	// Limits are the CPU and memory limits; GOMEMLIMIT is derived from the memory limit.
	Limits Resources
	// Max bounds the requests a Pod may ask for by annotation.
	Max Resources
	// Ports are the sidecar's default ports.
	Ports Ports
	// Version is the injecting manager's version, recorded on the Pod as a label.
	Version string
	// RedisCredentials passes --redis-credentials-path: Redis needs AUTH, and every opted-in
	// namespace has the Secret ratelimit-redis-credentials (per-namespace users write it).
	RedisCredentials bool
}

// Resources is a CPU and a memory quantity.
type Resources struct {
	// CPU is in cores (e.g. 50m).
	CPU resource.Quantity
	// Memory is in bytes (e.g. 32Mi).
	Memory resource.Quantity
}

// Ports are the sidecar's ports.
type Ports struct {
	// Proxy is the reverse proxy's port (every interface), in proxy mode.
	Proxy int32
	// Metrics serves /metrics, /healthz and /readyz (every interface: the kubelet probes it).
	Metrics int32
	// GRPC serves Envoy RLS and ext_authz on 127.0.0.1, in envoy mode.
	GRPC int32
	// Check serves the JSON check API on 127.0.0.1, in check mode.
	Check int32
}

// DefaultConfig is config/samples/example-app-sidecar's sidecar: image is the operator's image and
// version the manager's.
func DefaultConfig(image, version string) Config {
	return Config{
		Image:      image,
		PullPolicy: corev1.PullIfNotPresent,
		Requests:   Resources{CPU: resource.MustParse("50m"), Memory: resource.MustParse("32Mi")},
		Limits:     Resources{CPU: resource.MustParse("500m"), Memory: resource.MustParse("128Mi")},
		Max:        Resources{CPU: resource.MustParse("500m"), Memory: resource.MustParse("128Mi")},
		Ports:      Ports{Proxy: 8000, Metrics: 9090, GRPC: 8081, Check: 8080},
		Version:    version,
	}
}

// Validate reports the first setting that would make injected Pods invalid.
func (c Config) Validate() error {
	if c.Image == "" {
		return errors.New("image: required")
	}
	switch c.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("pull policy: %q is not Always, IfNotPresent or Never", c.PullPolicy)
	}
	for _, b := range []struct {
		what            string
		req, max, limit resource.Quantity
	}{{"cpu", c.Requests.CPU, c.Max.CPU, c.Limits.CPU}, {"memory", c.Requests.Memory, c.Max.Memory, c.Limits.Memory}} {
		if b.req.Sign() <= 0 || b.req.Cmp(b.max) > 0 || b.max.Cmp(b.limit) > 0 {
			return fmt.Errorf("%s: want 0 < request (%s) <= max (%s) <= limit (%s)", b.what, b.req.String(), b.max.String(), b.limit.String())
		}
	}
	for name, p := range map[string]int32{"proxy": c.Ports.Proxy, "metrics": c.Ports.Metrics, "grpc": c.Ports.GRPC, "check": c.Ports.Check} {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%s port: %d is not in 1-65535", name, p)
		}
	}
	return nil
}
