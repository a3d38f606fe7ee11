package main

import (
	"errors"
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
	"github.com/ratelimit-dev/ratelimit-operator/internal/webhook/podinject"
)

// injectionOptions are the flags of sidecar injection (the chart's sidecarInjection values):
// everything about the injected sidecar that Pods may not choose themselves.
type injectionOptions struct {
	enabled                                     bool
	image                                       string
	pullPolicy                                  string
	cpuRequest, memoryRequest                   resource.QuantityValue
	cpuLimit, memoryLimit                       resource.QuantityValue
	maxCPU, maxMemory                           resource.QuantityValue
	proxyPort, metricsPort, grpcPort, checkPort int
	redisCredentials                            bool
}

func (i *injectionOptions) bind(fs *flag.FlagSet) {
	d := inject.DefaultConfig("", "")
	i.cpuRequest.Quantity, i.memoryRequest.Quantity = d.Requests.CPU, d.Requests.Memory
	i.cpuLimit.Quantity, i.memoryLimit.Quantity = d.Limits.CPU, d.Limits.Memory
	i.maxCPU.Quantity, i.maxMemory.Quantity = d.Max.CPU, d.Max.Memory
	fs.BoolVar(&i.enabled, "sidecar-injection", false,
		"Serve the sidecar injection webhook ("+podinject.Path+"): Pods that opt in (label ratelimit.dev/inject=enabled on them or their namespace) get the sidecar. Needs --webhooks.")
	fs.StringVar(&i.image, "sidecar-image", "", "Image of the injected sidecar (the operator's image); required with --sidecar-injection.")
	fs.StringVar(&i.pullPolicy, "sidecar-image-pull-policy", string(d.PullPolicy), "imagePullPolicy of the injected sidecar.")
	fs.Var(&i.cpuRequest, "sidecar-cpu-request", "Default CPU request of the injected sidecar (a Pod may ask for up to --sidecar-max-cpu).")
	fs.Var(&i.memoryRequest, "sidecar-memory-request", "Default memory request of the injected sidecar (a Pod may ask for up to --sidecar-max-memory).")
	fs.Var(&i.cpuLimit, "sidecar-cpu-limit", "CPU limit of the injected sidecar.")
	fs.Var(&i.memoryLimit, "sidecar-memory-limit", "Memory limit of the injected sidecar; its GOMEMLIMIT is 25/32 of it.")
	fs.Var(&i.maxCPU, "sidecar-max-cpu", "Largest CPU request a Pod may ask for (annotation ratelimit.dev/sidecar-cpu); at most --sidecar-cpu-limit.")
	fs.Var(&i.maxMemory, "sidecar-max-memory", "Largest memory request a Pod may ask for (annotation ratelimit.dev/sidecar-memory); at most --sidecar-memory-limit.")
	fs.IntVar(&i.proxyPort, "sidecar-proxy-port", int(d.Ports.Proxy), "Default port of the injected reverse proxy (proxy mode; annotation ratelimit.dev/proxy-port).")
	fs.IntVar(&i.metricsPort, "sidecar-metrics-port", int(d.Ports.Metrics), "Default port of the injected sidecar's /metrics, /healthz, /readyz (annotation ratelimit.dev/metrics-port).")
	fs.IntVar(&i.grpcPort, "sidecar-grpc-port", int(d.Ports.GRPC), "Port of the injected sidecar's Envoy RLS and ext_authz gRPC on 127.0.0.1 (envoy mode).")
	fs.IntVar(&i.checkPort, "sidecar-check-port", int(d.Ports.Check), "Port of the injected sidecar's JSON check API on 127.0.0.1 (check mode).")
	fs.BoolVar(&i.redisCredentials, "sidecar-redis-credentials", false,
		"Run injected sidecars with --redis-credentials-path on the namespace's ratelimit-redis-credentials Secret (Redis needs AUTH).")
}

// config is the injection's inject.Config, stamped with the manager's version.
func (i *injectionOptions) config() inject.Config {
	return inject.Config{
		Image:            i.image,
		PullPolicy:       corev1.PullPolicy(i.pullPolicy),
		Requests:         inject.Resources{CPU: i.cpuRequest.Quantity, Memory: i.memoryRequest.Quantity},
		Limits:           inject.Resources{CPU: i.cpuLimit.Quantity, Memory: i.memoryLimit.Quantity},
		Max:              inject.Resources{CPU: i.maxCPU.Quantity, Memory: i.maxMemory.Quantity},
		Ports:            inject.Ports{Proxy: port(i.proxyPort), Metrics: port(i.metricsPort), GRPC: port(i.grpcPort), Check: port(i.checkPort)},
		Version:          version(),
		RedisCredentials: i.redisCredentials,
	}
}

// port is p as a port number; out of range it becomes 0, which Validate refuses.
func port(p int) int32 {
	if p < 1 || p > 65535 {
		return 0
	}
	return int32(p)
}

// validate reports the first bad flag, by name.
func (i *injectionOptions) validate(webhooks bool) error {
	if !i.enabled {
		return nil
	}
	if !webhooks {
		return errors.New("--sidecar-injection: needs --webhooks")
	}
	if err := i.config().Validate(); err != nil {
		return fmt.Errorf("--sidecar-*: %w", err)
	}
	return nil
}

// setup registers the injection webhook when enabled.
func (i *injectionOptions) setup(mgr ctrl.Manager) error {
	if !i.enabled {
		return nil
	}
	if err := podinject.Setup(mgr, i.config()); err != nil {
		return fmt.Errorf("set up sidecar injection: %w", err)
	}
	return nil
}
