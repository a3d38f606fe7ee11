// Package condition compiles and evaluates the CEL conditions that choose a policy's tier
// for a request. The admission webhook and the controller compile every condition with it
// (type-checked, a bool, cost-bounded), and every sidecar compiles the published text with
// it again, once per snapshot, so what was admitted is what runs. Evaluation reads the
// request lazily: a condition that never mentions claims decodes no token.
package condition
