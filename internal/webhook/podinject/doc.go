// Package podinject is the mutating admission webhook that injects the ratelimit sidecar
// into Pods on CREATE. It reads the Pod's namespace labels through the manager's cache and
// leaves every decision to internal/inject; it answers with a JSON patch holding only the
// additions, an allowed response for a Pod left alone, or a denial naming the annotation to
// fix.
//
// Its MutatingWebhookConfiguration is written in the Helm chart (templates/injection-webhook.yaml),
// not generated from markers: its namespace and object selectors, which keep every Pod that
// did not opt in away from the webhook, cannot be expressed as kubebuilder markers.
package podinject
