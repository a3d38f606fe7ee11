package usage

// AdjustRequest is the body of POST .../usage/{reset,refund,grant}: an administrative change
// to one caller's counters of a policy.
type AdjustRequest struct {
	// Identity is the caller, as checks name it (empty with Parts).
	Identity string `json:"identity,omitempty"`
	// Parts are a composite identity's parts, in the policy's order (instead of Identity).
	Parts []string `json:"parts,omitempty"`
	// Tier is the tier whose counters change (default: the one the policy chooses).
	Tier string `json:"tier,omitempty"`
	// Amount is the units to refund or grant (1 to 1,000,000,000); none for a reset.
	Amount int64 `json:"amount,omitempty"`
	// RequestID makes the change idempotent: retried under the same id it applies once (for
	// 24 hours). Required: 1 to 256 bytes of printable ASCII without spaces (it is quoted in
	// the Event recording the change); any other is refused with 400.
	RequestID string `json:"requestId"`
}

// Adjusted is the answer to an adjustment (status 200).
type Adjusted struct {
	// Policy is the policy adjusted.
	Policy string `json:"policy"`
	// Op is reset, refund or grant.
	Op string `json:"op"`
	// Tier is the tier whose counters changed ("" for a policy without tiers).
	Tier string `json:"tier,omitempty"`
	// IdentityHash names the caller as events and metrics do (never the identity itself).
	IdentityHash string `json:"identityHash"`
	// Replayed is true for a retry of a recorded change: nothing changed now, and Limits are
	// the first call's figures.
	Replayed bool `json:"replayed"`
	// Limits is what the change did to each limit.
	Limits []LimitChange `json:"limits"`
}

// LimitChange is what an adjustment did to one limit.
type LimitChange struct {
	// Name is the limit's name.
	Name string `json:"name"`
	// Quota is its size.
	Quota int64 `json:"quota"`
	// Remaining is what it holds after the change (more than Quota after a grant).
	Remaining int64 `json:"remaining"`
	// Applied is the units the change freed: remaining after minus before (0 when nothing
	// changed; negative when a reset took back a grant).
	Applied int64 `json:"applied"`
	// ResetAfterMs is how long until it is full again.
	ResetAfterMs int64 `json:"resetAfterMs"`
}
