package usage

// Top is the answer to GET .../usage/top: the callers of a policy under the most pressure
// now, and how many are denied, read from Redis without writing.
//
// One answer does a bounded amount of Redis work, whatever the server holds: it scans a
// part of the keyspace (every tenant's keys count, not only the policy's) and reads the
// callers it finds there. When the budget ends before the keyspace does, the answer is
// partial: Complete is false, and Continue is the position to pass back (as the continue
// parameter) for the next part. Callers, Denied, Unreadable and Top are of this part; a
// client following Continue to the end adds them up and ranks the parts' Top together.
type Top struct {
	// Policy is the policy read.
	Policy string `json:"policy"`
	// Tier is the tier every caller was read against; empty: each caller's own (its
	// override's, else the policy's limits).
	Tier string `json:"tier,omitempty"`
	// Callers is how many callers holding counters of the policy this answer read.
	Callers int `json:"callers"`
	// Denied is how many of them a request of cost 1 would be denied for now.
	Denied int `json:"denied"`
	// DeniedShare is Denied / Callers (0 without callers).
	DeniedShare float64 `json:"deniedShare"`
	// Complete is true when the scan reached the end of the keyspace (every primary's), so
	// that this answer and those before it on the same continuation read every caller.
	Complete bool `json:"complete"`
	// Truncated is true when Complete is false: callers may hold counters that this answer
	// did not read. (It predates Complete, and is kept for the clients that read it.)
	Truncated bool `json:"truncated"`
	// Continue is where the next part starts, when Complete is false: an opaque position to
	// pass back unchanged as the continue parameter. Empty when Complete.
	Continue string `json:"continue,omitempty"`
	// Examined is about how many keys of the server this answer's scan examined (its SCAN
	// calls' COUNT summed: Redis examines about that many, whichever tenant holds them).
	Examined int64 `json:"examined"`
	// Keys is how many keys the server holds now (its database's, summed over the
	// primaries): with Examined, how much of the keyspace an answer covered.
	Keys int64 `json:"keys"`
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

// Pressure is the highest share of a limit the caller has used (0 without a quota).
func (c *TopCaller) Pressure() float64 {
	p := 0.0
	for _, l := range c.Limits {
		if l.Quota > 0 {
			p = max(p, float64(l.Used)/float64(l.Quota))
		}
	}
	return p
}
