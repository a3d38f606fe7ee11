// Package lint checks resource files offline as the cluster would admit them: the API
// server's own checks of the CustomResourceDefinitions this repository ships (unknown fields,
// the OpenAPI schema and its defaults, list types, the CEL rules), then, for a
// RateLimitPolicy, the admission webhook's defaulting, validation and warnings (package
// policy, the very functions the webhook calls), and, for a RateLimitOverride whose policy is
// among the files, the controller's fit check. Messages name the same fields as the cluster.
//
// `kubectl ratelimit lint` is its front: an exit status for CI and GitOps pre-commit hooks.
// What it cannot know offline: the live object an update replaces (the webhook's warnings
// about orphaned counters), and a namespace's RedisBackend.
package lint
