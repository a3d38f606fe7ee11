package snapshot

import (
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// Entry is one RateLimitPolicy as the snapshot carries it: what the sidecar needs to match a request, find the
// caller and run the script, with durations in milliseconds.
type Entry struct {
	// Name of the RateLimitPolicy.
	Name string `json:"name"`
	// Match selects requests.
	Match Match `json:"match"`
	// Identity says who the caller is.
	Identity Identity `json:"identity"`
	// Algorithm names the algorithm; Script and SHA the script it runs.
	Algorithm string `json:"algorithm"`
	// Script is the script's name.
	Script string `json:"script"`
	// SHA is the script's SHA1.
	SHA string `json:"sha"`
	// Limits are checked together: the limits of the default tier.
	Limits []Limit `json:"limits"`
	// Tiers are the policy's named tiers, in the order their conditions are tried.
	Tiers []Tier `json:"tiers,omitempty"`
	// Overrides give some callers another tier or limits of their own, sorted by name.
	Overrides []Override `json:"overrides,omitempty"`
	// Cost is the request weight.
	Cost Cost `json:"cost"`
	// StateKey is the state key template.
	StateKey string `json:"stateKey"`
	// IdempotencyKey is the request-id key template; empty without idempotency.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// TTLMs is the TTL of state keys.
	TTLMs int64 `json:"ttlMs"`
	// Idempotency says where request ids come from; nil without idempotency.
	Idempotency *Idempotency `json:"idempotency,omitempty"`
	// FailureMode applies while Redis is away.
	FailureMode string `json:"failureMode"`
	// LocalCap is the in-process cap of LocalCap.
	LocalCap *LocalCap `json:"localCap,omitempty"`
	// Shadow admits everything and only reports.
	Shadow bool `json:"shadow,omitempty"`
	// Leases lets the sidecars serve hot identities from leases (hotKeys.leases On).
	Leases bool `json:"leases,omitempty"`
	// Shards spreads a global limit over this many shards (hotKeys.shards); 0 or 1: one.
	Shards int32 `json:"shards,omitempty"`
	// Concurrency, when set, limits one identity's requests in flight at once.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// Limit is one rate.
type Limit struct {
	// Name of the limit.
	Name string `json:"name"`
	// Requests per PeriodMs.
	Requests int64 `json:"requests"`
	// PeriodMs is the period in milliseconds; for a calendar limit, the nominal length of
	// its unit (24h, 168h or 744h), a bound for readers that do not know Calendar.
	PeriodMs int64 `json:"periodMs"`
	// Burst for TokenBucket and GCRA; 0 means Requests.
	Burst int64 `json:"burst,omitempty"`
	// Calendar, when set, makes the windows calendar days, weeks or months in a time zone
	// (FixedWindow only); PeriodMs is then only a bound, never a boundary.
	Calendar *Calendar `json:"calendar,omitempty"`
}

// Calendar is the calendar window of a limit.
type Calendar struct {
	// Unit is the window: "Day", "Week" (ISO, Monday to Monday) or "Month".
	Unit string `json:"unit"`
	// TimeZone is the IANA time zone whose midnights bound the windows, always stated
	// ("UTC" when the policy left it out).
	TimeZone string `json:"timeZone"`
}

// String is c for people: "Month in Europe/Berlin".
func (c Calendar) String() string { return c.Unit + " in " + c.TimeZone }

// Window is the length of l's window holding now: its period, or for a calendar limit the
// local day, week or month holding now (23 hours on the day DST starts). A zone this
// binary does not know gives the nominal length, PeriodMs.
func (l Limit) Window(now time.Time) time.Duration {
	period := time.Duration(l.PeriodMs) * time.Millisecond
	if l.Calendar == nil {
		return period
	}
	c, err := calendar.New(calendar.Unit(l.Calendar.Unit), l.Calendar.TimeZone)
	if err != nil {
		return period
	}
	start, end := c.Window(now)
	return end.Sub(start)
}

// Per is what l counts its requests per, for people: its period ("1m0s"), or its calendar
// window ("calendar Month in Europe/Berlin").
func (l Limit) Per() string {
	if l.Calendar != nil {
		return "calendar " + l.Calendar.String()
	}
	return (time.Duration(l.PeriodMs) * time.Millisecond).String()
}

// Cost is the request weight.
type Cost struct {
	// Default weight.
	Default int64 `json:"default"`
	// Header a request may state its cost in.
	Header string `json:"header,omitempty"`
	// Max is the largest cost a request may state (required with Header); 0 means no bound
	// on costs stated by the trusted fronts (the check API and Envoy's hits_addend).
	Max int64 `json:"max,omitempty"`
	// Settle, when set, settles the cost from the response: Default or the header's cost is
	// the reservation.
	Settle *CostSettle `json:"settle,omitempty"`
}

// Concurrency limits one identity's requests in flight at once.
type Concurrency struct {
	// Max is the most in flight.
	Max int64 `json:"max"`
	// SlotTTLMs is how long a slot lives unreleased.
	SlotTTLMs int64 `json:"slotTTLMs"`
}

// CostSettle says where a response states its request's cost.
type CostSettle struct {
	// Header is a response header or trailer holding the cost.
	Header string `json:"header,omitempty"`
	// Field is a dot path to the cost in the JSON body (or an event-stream event's data).
	Field string `json:"field,omitempty"`
	// TimeoutMs is how long after its admission a request may settle (each reservation's
	// record lives that long); 0: limiter.DefaultSettle.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// Idempotency says where request ids come from.
type Idempotency struct {
	// Header carrying the id on HTTP.
	Header string `json:"header,omitempty"`
	// DescriptorKey carrying the id on Envoy RLS.
	DescriptorKey string `json:"descriptorKey,omitempty"`
	// TTLMs is how long an id is remembered.
	TTLMs int64 `json:"ttlMs"`
	// MaxReplays is how many times an id may replay its first decision; 0 (a snapshot
	// written before the field) means the limiter's default.
	MaxReplays int32 `json:"maxReplays,omitempty"`
}

// LocalCap is the per-sidecar cap while Redis is away.
type LocalCap struct {
	// Requests per PeriodMs per identity.
	Requests int64 `json:"requests"`
	// PeriodMs is the window.
	PeriodMs int64 `json:"periodMs"`
	// MaxIdentities bounds memory.
	MaxIdentities int32 `json:"maxIdentities"`
}

// InScope reports, as an error naming the template, whether every key template of p lies in
// its namespace's scope under prefix (keylayout.InScope): a reader refuses a policy whose
// keys could reach another namespace's or lie outside the prefix.
func (p Entry) InScope(prefix string) error {
	for _, src := range []string{p.StateKey, p.IdempotencyKey} {
		if src == "" {
			continue
		}
		t, err := keylayout.Parse(src)
		if err != nil {
			return fmt.Errorf("key template %q: %w", src, err)
		}
		if err := keylayout.InScope(t, prefix); err != nil {
			return fmt.Errorf("key scope: %w", err)
		}
	}
	return nil
}

// GetUnit is c's unit, "" for a nil c (a limit with a period).
func (c *Calendar) GetUnit() string {
	if c == nil {
		return ""
	}
	return c.Unit
}
