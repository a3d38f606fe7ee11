package usageapi

// The usage API's routes are mounted twice, one handler set under two prefixes: its own
// (LegacyPrefix, reached directly with a bearer token) and the one the Kubernetes API server's
// aggregation layer proxies (AggregatedPrefix, APIService v1alpha1.usage.ratelimit.dev), so
// that kubectl reaches it through the API server with any credential the kubeconfig holds.
const (
	// LegacyPrefix is the prefix of the routes reached directly (--server).
	LegacyPrefix = "/v1"
	// AggregatedPrefix is the prefix of the routes the aggregation layer proxies.
	AggregatedPrefix = "/apis/" + Group + "/" + Version
)

// Group and Version are the API group and version the usage API is registered under with
// the aggregation layer. The group is not the policies' own (policy.ratelimit.dev): that one
// is served by the API server from the CRD, and an APIService may not take it over.
const (
	// Group is the aggregated API group.
	Group = "usage.ratelimit.dev"
	// Version is its only version.
	Version = "v1alpha1"
	// APIServiceName is the name of the APIService registering Group/Version.
	APIServiceName = Version + "." + Group
)

// Routes below a prefix, in the API server's shape: the usage subresource of a policy, an
// overview of its callers, and a change ({op}: reset, refund or grant).
const (
	// UsageRoute reads one caller's usage (GET).
	UsageRoute = "/namespaces/{namespace}/ratelimitpolicies/{policy}/usage"
	// TopRoute ranks the policy's callers (GET).
	TopRoute = UsageRoute + "/top"
	// AdjustRoute resets, refunds or grants (POST).
	AdjustRoute = UsageRoute + "/{op}"
)
