// Package ratelimitoverride is the RateLimitOverride reconciler: it writes each override's
// Ready condition from the verdict the snapshot publisher recorded for its current
// generation (applied, or why not, naming the field at fault).
//
// It decides nothing: whether an override applies is decided where overrides are
// published, in package publishing (AttachOverrides).
package ratelimitoverride
