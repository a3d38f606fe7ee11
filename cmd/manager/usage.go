package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usageapi"
)

// usageOptions are the flags of the usage API (internal/usageapi).
type usageOptions struct {
	addr    string
	certDir string
	timeout time.Duration
	// frontProxy is --usage-front-proxy: accept requests the aggregation layer proxies.
	frontProxy bool
}

func (u *usageOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&u.addr, "usage-bind-address", "0",
		"Address the usage API (HTTPS; TokenReview and SubjectAccessReview on ratelimitpolicies/usage) binds to, e.g. :8445; 0 disables it.")
	fs.StringVar(&u.certDir, "usage-cert-dir", "",
		"Directory of the usage API's tls.crt and tls.key, reloaded on change; absent files are made self-signed there (default: a self-signed pair in memory).")
	fs.BoolVar(&u.frontProxy, "usage-front-proxy", false,
		"Also serve the usage API through the Kubernetes API server's aggregation layer (APIService "+usageapi.APIServiceName+
			"): accept its front-proxy client certificate, verified against the requestheader CA of ConfigMap "+
			usageapi.AuthenticationConfigMapNamespace+"/"+usageapi.AuthenticationConfigMapName+", and the user it names in its headers.")
	fs.DurationVar(&u.timeout, "usage-redis-timeout", time.Second, "How long a usage read or change waits for Redis (each call; an overview of a policy's callers has 10 s in all).")
}

// setup adds the usage API to mgr, reading each namespace's counters on the Redis serving
// it; nothing when it is off. The returned function releases the limiters it made.
func (u *usageOptions) setup(mgr ctrl.Manager, redises usageapi.Redises) (func(), error) {
	if u.addr == "0" || u.addr == "" {
		return func() {}, nil
	}
	log := ctrl.Log.WithName("usage-api")
	proxy, err := u.frontProxySource(mgr, log)
	if err != nil {
		return nil, err
	}
	lim := usageapi.NewLimiters(redises, limiter.Options{Timeout: u.timeout})
	guard, err := usageapi.NewGuard(mgr.GetConfig(), mgr.GetHTTPClient(), proxy)
	if err != nil {
		lim.Close()
		return nil, fmt.Errorf("usage api: %w", err)
	}
	srv := usageapi.NewServer(guard, mgr.GetClient(), lim, mgr.GetEventRecorder("ratelimit-usage-api"), log)
	if err := mgr.Add(&usageapi.Serving{Addr: u.addr, CertDir: u.certDir, Handler: srv, Log: log}); err != nil {
		lim.Close()
		return nil, fmt.Errorf("usage api: %w", err)
	}
	return lim.Close, nil
}

// frontProxySource is the aggregation layer's front-proxy settings, watched by mgr, with
// --usage-front-proxy; nil without.
func (u *usageOptions) frontProxySource(mgr ctrl.Manager, log logr.Logger) (*usageapi.FrontProxy, error) {
	if !u.frontProxy {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("usage api: clientset: %w", err)
	}
	proxy, err := usageapi.NewFrontProxy(cs, log.WithName("front-proxy"))
	if err != nil {
		return nil, fmt.Errorf("usage api: %w", err)
	}
	if err := mgr.Add(proxy); err != nil {
		return nil, fmt.Errorf("usage api: %w", err)
	}
	return proxy, nil
}
