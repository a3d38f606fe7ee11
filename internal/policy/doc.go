// Package policy turns a RateLimitPolicy into the limiter's compiled form. It holds the rules
// that the admission webhook (defaulting, validation, warnings) and the controller (which
// re-checks stored objects) share: one implementation, called from both.
package policy
