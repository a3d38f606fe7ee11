package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usageapi"
)

// The usage API as a cluster serves it: through kube-apiserver's aggregation layer, as the
// APIService v1alpha1.usage.ratelimit.dev, so `kubectl ratelimit` needs no --server.

// usageService names the Service the demo's APIService points at (an ExternalName Service
// naming localhost: no kube-proxy runs here), as the chart names it.
const usageNamespace, usageService = "ratelimit-system", "ratelimit-operator-usage"

// withAggregation makes the front-proxy CA and client certificate and returns the control
// plane option giving kube-apiserver the aggregation layer's flags.
func (d *demo) withAggregation() (*controlplane.Aggregation, error) {
	agg, err := controlplane.NewAggregation()
	if err != nil {
		return nil, fmt.Errorf("aggregation layer: %w", err)
	}
	d.agg = agg
	return agg, nil
}

// usageServing writes the usage API's serving certificate, for the name the API server
// verifies (the Service's), signed by a CA the APIService names; it returns the APIService
// to register once the manager serves.
func (d *demo) usageServing() (*controlplane.APIService, string, error) {
	dir := filepath.Join(d.dir, "usage-tls")
	api, err := controlplane.NewAPIService(usageapi.Group, usageapi.Version, usageNamespace, usageService, dir)
	return api, dir, err
}

// registerUsage registers the manager's usage API as an APIService and waits until the
// API server says it is Available.
func (d *demo) registerUsage(ctx context.Context, api *controlplane.APIService) error {
	api.Addr = d.addrs.usage
	if err := api.Register(ctx, d.env.Client); err != nil {
		return fmt.Errorf("register the usage APIService: %w", err)
	}
	if err := api.Available(ctx, d.env.Client, time.Minute); err != nil {
		return fmt.Errorf("usage APIService: %w", err)
	}
	d.say("usage API served through the API server: APIService %s Available", api.Name())
	return nil
}
