package usage

// Top is the answer to GET .../usage/top: the callers of a policy under the most pressure
// now, and how many are denied, read from Redis without writing.
type Top struct {
	// Policy is the policy read.
	Policy string `json:"policy"`
	// Tier is the tier every caller was read against; empty: each caller's own (its
	// override's, else the policy's limits).
	Tier string `json:"tier,omitempty"`
	// Callers is how many callers hold counters of the policy now (read).
	Callers int `json:"callers"`
	// Denied is how many of them a request of cost 1 would be denied for now.
	Denied int `json:"denied"`
	// DeniedShare is Denied / Callers (0 without callers).
	DeniedShare float64 `json:"deniedShare"`
	// Truncated is true when more callers hold counters than were read (the bound).
	Truncated bool `json:"truncated"`
	// Unreadable counts callers whose identity Redis keys keep only as a digest (over 128
	// bytes of key text): not read.
	Unreadable int `json:"unreadable,omitempty"`
	// Top are the callers with the highest share of a limit used, highest first.
	Top []TopCaller `json:"top"`
}

// TopCaller is one caller in a Top.
type TopCaller struct {
	// IdentityHash names the caller as events, metrics and overrides do (never the identity).
	IdentityHash string `json:"identityHash"`
	// Tier is the tier the caller was read against ("" for the policy's own limits).
	Tier string `json:"tier,omitempty"`
	// Allowed is whether a request of cost 1 would be admitted now.
	Allowed bool `json:"allowed"`
	// Limits are its limits, in the policy's order.
	Limits []Limit `json:"limits"`
}
