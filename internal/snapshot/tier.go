package snapshot

// Tier is a named plan of a policy as the snapshot carries it: its condition as written
// (each sidecar compiles it with internal/condition) and its limits, in place of the
// entry's own for the requests the condition selects. A snapshot with tiers is refused by
// sidecars built before tiers existed (its content hash differs), which keep their last
// good snapshot: roll the sidecars first.
type Tier struct {
	// Name of the tier.
	Name string `json:"name"`
	// When is the tier's CEL condition.
	When string `json:"when"`
	// Limits are the tier's limits.
	Limits []Limit `json:"limits"`
}

// DefaultTier is the name of the tier of an entry's own limits.
const DefaultTier = "default"
