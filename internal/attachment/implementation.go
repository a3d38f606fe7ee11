package attachment

import (
	"fmt"
	"strings"
)

// Implementation is a Gateway API implementation whose data plane the controller programs.
type Implementation string

const (
	// EnvoyGateway gets an Envoy Gateway SecurityPolicy (extAuth) on the policy's targets.
	EnvoyGateway Implementation = "EnvoyGateway"
	// Istio gets an Istio AuthorizationPolicy (action CUSTOM) on the Gateways.
	Istio Implementation = "Istio"
)

// DefaultImplementations is the default of the manager's --gateway-implementations: the
// controllerName each project's GatewayClasses carry.
const DefaultImplementations = "gateway.envoyproxy.io/gatewayclass-controller=EnvoyGateway,istio.io/gateway-controller=Istio"

// Implementations maps a GatewayClass name or a GatewayClass controllerName to the
// implementation of its Gateways; a class name wins over its controllerName.
type Implementations map[string]Implementation

// ParseImplementations parses "key=Implementation,..." where key is a GatewayClass name or
// controllerName; an empty string maps nothing (no data plane objects are written).
func ParseImplementations(s string) (Implementations, error) {
	out := Implementations{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, impl, ok := strings.Cut(item, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("%q: want <gatewayClass name or controllerName>=<%s|%s>", item, EnvoyGateway, Istio)
		}
		switch Implementation(impl) {
		case EnvoyGateway, Istio:
			out[key] = Implementation(impl)
		default:
			return nil, fmt.Errorf("%q: unknown implementation %q, want %s or %s", item, impl, EnvoyGateway, Istio)
		}
	}
	return out, nil
}

// Of is the implementation of a GatewayClass, "" when neither its name nor its
// controllerName is mapped.
func (m Implementations) Of(class, controllerName string) Implementation {
	if impl, ok := m[class]; ok {
		return impl
	}
	return m[controllerName]
}
