// Package inject decides whether a Pod gets the ratelimit sidecar and builds the Pod that
// carries it. It is pure: no API server, no clock, no globals. The admission webhook
// (internal/webhook/podinject) reads the Pod's namespace labels and hands them over with the
// Pod and the installation's Config; Inject answers with the mutated Pod, a reason to leave
// the Pod alone, or an *AnnotationError naming the annotation the Pod's owner must fix.
//
// What a Pod opts into:
//
//   - Opt-in: the namespace label ratelimit.dev/inject=enabled, or the Pod label (or
//     annotation) ratelimit.dev/inject: "enabled". The value "disabled" on the Pod, as a
//     label or an annotation, wins over the namespace.
//   - A native sidecar: an init container named ratelimit-sidecar with restartPolicy
//     Always, so it is ready before the app's containers start and outlives them on
//     shutdown. A Pod that already has a container of that name is left as it is.
//   - A mode (ratelimit.dev/mode): proxy (a reverse proxy in front of the app's
//     ratelimit.dev/upstream-port), envoy (Envoy RLS and ext_authz gRPC on loopback) or
//     check (the JSON check API on loopback).
//   - Bounded overrides of the sidecar's CPU and memory requests.
//
// The app's containers and everything else in the Pod are never changed: the only
// additions are the sidecar, its ratelimit- volumes (the namespace's snapshot ConfigMap and
// Redis credentials Secret, both optional) and the labels and annotations recording the
// injection.
package inject
