// Package gatewayapi is policy attachment to Gateway API objects, as the controllers share
// it: the Reader lists a namespace's Gateways and routes and resolves which traffic each
// policy with targetRefs governs (internal/attachment decides, from what it reads; the
// resolution is memoized per state of the namespace), SetAncestors writes that resolution
// as status.ancestors, and the DataPlane keeps the gateways' own objects (Envoy Gateway
// SecurityPolicies, Istio AuthorizationPolicies) pointing at the shared ext_authz service.
//
// It holds no reconciler: the RateLimitPolicy reconciler (package ratelimitpolicy) reports
// a policy's attachment and programs the data plane, and the snapshot publisher (package
// publishing) publishes the matches the targets give. Which routes a policy governs is
// decided in internal/attachment, not here.
package gatewayapi
