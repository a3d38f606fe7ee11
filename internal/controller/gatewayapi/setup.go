package gatewayapi

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
)

// Config is how attached policies reach the gateways' data planes.
type Config struct {
	// Implementations says which GatewayClasses are Envoy Gateway and which Istio.
	Implementations attachment.Implementations
	// Service and Port are the shared ext_authz service of each namespace (config/service).
	Service string
	// Port is the service's ext_authz gRPC port.
	Port int32
	// IstioProvider is the mesh config ext_authz provider; "{namespace}" is the policy's.
	IstioProvider string
}

// New returns the Gateway API reader and the data plane writer, nil when the API server
// does not serve Gateway API (the reader then finds no target).
func New(mgr ctrl.Manager, cfg Config) (*Reader, *DataPlane) {
	gw := NewReader(mgr.GetClient(), mgr.GetRESTMapper())
	log := mgr.GetLogger().WithName("gateway-api")
	if !gw.Enabled {
		log.Info("Gateway API is not served: policies with targetRefs report their targets not found")
		return gw, nil
	}
	m := mgr.GetRESTMapper()
	dp := &DataPlane{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Implementations: cfg.Implementations,
		Service: cfg.Service, Port: cfg.Port, IstioProvider: cfg.IstioProvider,
		SecurityPolicies:      scheme.Served(m, SecurityPolicyGVK),
		AuthorizationPolicies: scheme.Served(m, AuthorizationPolicyGVK)}
	log.Info("Gateway API policy attachment", "grpcRoutes", gw.GRPCRoutes,
		"securityPolicies", dp.SecurityPolicies, "authorizationPolicies", dp.AuthorizationPolicies)
	return gw, dp
}
