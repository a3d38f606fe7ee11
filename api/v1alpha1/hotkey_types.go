package v1alpha1

// LeaseMode says whether sidecars may serve a policy's hot identities from leases.
// +kubebuilder:validation:Enum=Off;On
type LeaseMode string

const (
	// LeaseModeOff sends every check to Redis (the default): decisions report exactly what
	// is left, and no unit is ever held by a sidecar.
	LeaseModeOff LeaseMode = "Off"
	// LeaseModeOn lets each sidecar serve an identity it sees often from a lease: units
	// debited in Redis ahead by one script call and spent locally.
	LeaseModeOn LeaseMode = "On"
)

// HotKeys says how sidecars treat identities hot enough to load one Redis node.
type HotKeys struct {
	// leases, when On, lets each sidecar serve an identity it checks at 50 per second or more
	// from a lease: a few units debited in Redis ahead from every limit, in one script call,
	// then admitted locally until spent or expired; unspent units are returned with the
	// next lease. Nothing is ever admitted beyond the limits (a leased unit is debited
	// before it is spent, and a lease ends with the window, or for TokenBucket and GCRA
	// each unit with the time slot it stands for), but units a sidecar holds unspent are
	// not available to other sidecars meanwhile: under-admission of at most the units held.
	// Leased admissions report the lease's own remaining units, not the identity's.
	// Idempotent requests always go to Redis. Off by default.
	// +optional
	// +kubebuilder:default=Off
	Leases LeaseMode `json:"leases,omitempty"`

	// shards spreads a global limit (every identity source Fixed, Method or PathPrefix, in
	// sources or in every part: one budget for every caller, or per method or route) over
	// this many shards, each on its own hash tag and so, on a Redis Cluster
	// whose primaries own equal slot ranges, on its own primary. Each shard holds its share
	// of every limit (the shares add up to the limit exactly, so nothing more is ever
	// admitted); a check asks one shard at random and, when that one is spent, the others
	// in turn, so a request is denied only when every shard denied it. Requests (and burst)
	// of every limit must be at least shards. The key template's hash tag must contain
	// ${identity}. 1 (the default) is one key.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Shards *int32 `json:"shards,omitempty"`
}
