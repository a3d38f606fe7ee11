// Package usage is the wire form of what a peek reads of one identity's limits: each
// limit's quota, what is used and remaining, and when it is full again. The check API's
// peeks answer with it and the kubectl plugin reads it, so every reader of usage sees one
// shape. It imports nothing, so the plugin links no server code.
package usage

// Limit is one limit of a policy's tier for one identity, as Redis holds it now.
type Limit struct {
	// Name is the limit's name.
	Name string `json:"name"`
	// Quota is its size: burst for TokenBucket and GCRA, requests for the windows.
	Quota int64 `json:"quota"`
	// Used is what the identity has used of it (units leased to sidecars and not yet spent
	// count as used).
	Used int64 `json:"used"`
	// Remaining is what it holds now: Quota - Used.
	Remaining int64 `json:"remaining"`
	// ResetAfterMs is how long until it is full again; for the windows, until the window
	// holding the usage ends.
	ResetAfterMs int64 `json:"resetAfterMs"`
	// RetryAfterMs is how long a request of the peeked cost would wait on this limit: 0
	// when it would pass now, -1 when never.
	RetryAfterMs int64 `json:"retryAfterMs"`
}
