// Package usageapi is the manager's usage API: what a caller of a policy has used and has
// left, read from Redis without writing (a peek), for the people who answer "why am I getting
// 429s?". Every request is authenticated with the Kubernetes API (TokenReview of its bearer
// token) and authorized with a SubjectAccessReview on the policy's usage subresource in its
// namespace, as controller-runtime's metrics filter and kube-rbac-proxy do, so the cluster's
// own RBAC decides who may read whose counters: a namespace's developers read their own
// callers and no one else's.
//
//	GET /v1/namespaces/{namespace}/ratelimitpolicies/{policy}/usage?identity=ID&part=V&tier=T&cost=N
//
// needs get on ratelimitpolicies/usage (API group policy.ratelimit.dev) for that policy in that
// namespace. It answers as the sidecar's check API answers a peek, from the snapshot the
// namespace's sidecars enforce: 200 when a request of the cost would be admitted now, 429
// when it would be denied, with every limit's quota, used, remaining and time to full.
//
//	GET /v1/namespaces/{namespace}/ratelimitpolicies/{policy}/usage/top?n=&max=&tier=&continue=
//
// (the same verb) ranks the policy's callers. It finds them with SCAN, which examines every
// tenant's keys, so each request does a bounded amount of Redis work (budget.go) and answers
// for the part of the keyspace it covered, with a continuation for the rest
// (continuation.go); overviews are bounded per reader and in all (gate.go). Resets, refunds
// and grants (adjust.go) need update. The kubectl plugin (cmd/kubectl-ratelimit) is the way
// users reach it.
//
// Every route is also mounted under /apis/usage.ratelimit.dev/v1alpha1 (routes.go), with the
// discovery documents the aggregation layer probes (discovery.go), so that the API server
// serves it as the APIService v1alpha1.usage.ratelimit.dev: there the user is the one the
// API server names in X-Remote-User/-Group/-Extra-*, believed only from a request carrying its
// front-proxy client certificate (frontproxy.go), and the API server has already checked its
// own RBAC in the group usage.ratelimit.dev.
package usageapi
