package main

import (
	"flag"
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
)

// gatewayOptions are the flags of Gateway API policy attachment.
type gatewayOptions struct {
	implementations string
	service         string
	port            int
	istioProvider   string
}

func (g *gatewayOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.implementations, "gateway-implementations", attachment.DefaultImplementations,
		"Which GatewayClasses get which data plane objects for policies with targetRefs: comma-separated <gatewayClass name or controllerName>=<EnvoyGateway|Istio>; empty writes none.")
	fs.StringVar(&g.service, "gateway-extauthz-service", "ratelimit-service",
		"Name of the shared ext_authz Service (config/service) in each namespace, which generated SecurityPolicies call.")
	fs.IntVar(&g.port, "gateway-extauthz-port", 8081, "gRPC ext_authz port of --gateway-extauthz-service.")
	fs.StringVar(&g.istioProvider, "istio-extauthz-provider", "ratelimit-ext-authz-{namespace}",
		"Istio mesh config extension provider that generated AuthorizationPolicies name; {namespace} is the policy's namespace.")
}

// config validates the flags and returns the controllers' settings.
func (g *gatewayOptions) config() (gatewayapi.Config, error) {
	impls, err := attachment.ParseImplementations(g.implementations)
	if err != nil {
		return gatewayapi.Config{}, fmt.Errorf("--gateway-implementations: %w", err)
	}
	if g.port < 1 || g.port > 65535 {
		return gatewayapi.Config{}, fmt.Errorf("--gateway-extauthz-port: %d is not a port", g.port)
	}
	if g.service == "" {
		return gatewayapi.Config{}, fmt.Errorf("--gateway-extauthz-service: empty")
	}
	return gatewayapi.Config{Implementations: impls, Service: g.service, Port: int32(g.port),
		IstioProvider: g.istioProvider}, nil
}
