// Package attachment resolves Gateway API policy attachment (GEP-713) for RateLimitPolicies:
// which routes each policy's targetRefs lead to, how a Gateway's defaults and overrides
// combine with route policies, which policy wins a conflict, what hostnames, paths and
// methods each policy ends up governing, and its status per ancestor Gateway. It is pure:
// the controller reads the objects, this package decides, so the policy controller (status)
// and the snapshot controller (what the sidecars enforce) decide the same way.
package attachment
