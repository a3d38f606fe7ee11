package limiter

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// FailureMode is what Check answers while Redis cannot be asked.
type FailureMode string

const (
	// FailOpen admits.
	FailOpen FailureMode = "FailOpen"
	// FailClosed denies.
	FailClosed FailureMode = "FailClosed"
	// LocalCap admits up to a per-identity cap held in this process.
	LocalCap FailureMode = "LocalCap"
)

// Limit is one rate: Requests per Period, with Burst for TokenBucket and GCRA.
type Limit struct {
	// Name identifies the limit in decisions.
	Name string
	// Requests per Period.
	Requests int64
	// Period is the window or refill time; at least 1 ms.
	Period time.Duration
	// Burst is the capacity (TokenBucket) or burst tolerance (GCRA); 0 means Requests.
	Burst int64
}

// LocalCapConfig is the in-process fallback limit per identity.
type LocalCapConfig struct {
	// Requests per Period per identity, in this process.
	Requests int64
	// Period of the local fixed window.
	Period time.Duration
	// MaxIdentities bounds the identities tracked; the least recently used are forgotten.
	MaxIdentities int
}

// PolicyConfig describes a policy in the limiter's terms (the controller compiles a
// RateLimitPolicy into this shape).
type PolicyConfig struct {
	// Namespace and Name identify the policy and fill ${namespace} and ${policy}.
	Namespace, Name string
	// Algorithm selects the script.
	Algorithm Algorithm
	// Limits are checked and debited together; 1 to 8.
	Limits []Limit
	// StateKey is the template of the state keys (uses ${identity}, ${limit}, ${slot}).
	StateKey string
	// IdempotencyKey is the template of request-id keys (uses ${requestId}); empty disables.
	IdempotencyKey string
	// TTL is set on every state key written.
	TTL time.Duration
	// IdempotencyTTL is how long a request id is remembered.
	IdempotencyTTL time.Duration
	// FailureMode applies while Redis cannot be asked.
	FailureMode FailureMode
	// LocalCap is required when FailureMode is LocalCap.
	LocalCap *LocalCapConfig
}

// Policy is a PolicyConfig checked and prepared for the hot path. Immutable; safe for
// concurrent use.
type Policy struct {
	PolicyConfig
	script   *Script
	state    *keylayout.Template
	idem     *keylayout.Template
	ttlMS    string
	idemMS   string
	limitArg []any
	slots    []string
	local    *localCap
}

// MaxLimits is the most limits one policy may have.
const MaxLimits = 8

// NewPolicy checks c and prepares it.
func NewPolicy(c PolicyConfig) (*Policy, error) {
	s, err := ScriptFor(c.Algorithm)
	if err != nil {
		return nil, err
	}
	if err := checkLimits(c.Algorithm, c.Limits); err != nil {
		return nil, err
	}
	if h := Horizon(c.Algorithm, c.Limits); c.TTL < h {
		return nil, fmt.Errorf("ttl %s is shorter than the %s horizon %s: keys would expire while they still count", c.TTL, c.Algorithm, h)
	}
	if c.StateKey == "" {
		return nil, errNoLayout
	}
	p := &Policy{PolicyConfig: c, script: s, ttlMS: strconv.FormatInt(c.TTL.Milliseconds(), 10)}
	if p.state, err = keylayout.Parse(c.StateKey, stateVars...); err != nil {
		return nil, fmt.Errorf("state key: %w", err)
	}
	if c.IdempotencyKey != "" {
		if p.idem, err = keylayout.Parse(c.IdempotencyKey, idemVars...); err != nil {
			return nil, fmt.Errorf("idempotency key: %w", err)
		}
		if c.IdempotencyTTL < time.Millisecond {
			return nil, errors.New("idempotency ttl must be at least 1ms")
		}
		p.idemMS = strconv.FormatInt(c.IdempotencyTTL.Milliseconds(), 10)
	}
	if err := checkLayout(c, p.state, p.idem); err != nil {
		return nil, err
	}
	if p.local, err = newLocalCap(c); err != nil {
		return nil, err
	}
	p.limitArg, p.slots = limitArgs(c.Algorithm, c.Limits), slotValues(s.KeysPerLimit)
	return p, nil
}

var (
	stateVars = []string{keylayout.VarNamespace, keylayout.VarPolicy, keylayout.VarIdentity,
		keylayout.VarLimit, keylayout.VarSlot}
	idemVars = []string{keylayout.VarNamespace, keylayout.VarPolicy, keylayout.VarIdentity,
		keylayout.VarRequestID}
)

func checkLimits(a Algorithm, ls []Limit) error {
	if len(ls) == 0 || len(ls) > MaxLimits {
		return fmt.Errorf("a policy needs 1 to %d limits, got %d", MaxLimits, len(ls))
	}
	for i, l := range ls {
		if err := checkLimit(a, l); err != nil {
			return fmt.Errorf("limit %d (%s): %w", i, l.Name, err)
		}
	}
	return nil
}

// maxVirtualTime bounds burst * T for TokenBucket and GCRA, so now + burst*T stays an exact
// integer in Lua's doubles (2^53 µs from the epoch); 2^52 µs is about 142 years.
const maxVirtualTime = 1 << 52

func checkLimit(a Algorithm, l Limit) error {
	switch {
	case l.Requests < 1:
		return errors.New("requests must be at least 1")
	case l.Period < time.Millisecond:
		return errors.New("period must be at least 1ms")
	case l.Burst < 0:
		return errors.New("burst must not be negative")
	}
	if a != TokenBucket && a != GCRA {
		return nil
	}
	if l.Requests > l.Period.Microseconds() {
		return fmt.Errorf("%d per %s is more than one request per microsecond, the finest %s step", l.Requests, l.Period, a)
	}
	if float64(burstOf(a, l))*float64(interval(l)) > maxVirtualTime {
		return errors.New("burst * period / requests exceeds 142 years")
	}
	return nil
}

// interval is T, the µs one request occupies for TokenBucket and GCRA (rounded as in Lua).
func interval(l Limit) int64 {
	return (2*l.Period.Microseconds() + l.Requests) / (2 * l.Requests)
}

func burstOf(a Algorithm, l Limit) int64 {
	if l.Burst == 0 || (a != TokenBucket && a != GCRA) {
		return l.Requests
	}
	return l.Burst
}

// Horizon is the shortest TTL that keeps an algorithm exact: how long state can still matter
// after the last write. FixedWindow: the longest period; SlidingWindow: twice it (a window is
// read as the previous one during the next); TokenBucket and GCRA: the longest time to
// refill from empty (burst * period / requests).
func Horizon(a Algorithm, ls []Limit) time.Duration {
	var h time.Duration
	for _, l := range ls {
		var need time.Duration
		switch a {
		case SlidingWindow:
			need = 2 * l.Period
		case TokenBucket, GCRA:
			need = time.Duration(burstOf(a, l)*interval(l)) * time.Microsecond
		default:
			need = l.Period
		}
		h = max(h, need)
	}
	return max(h, time.Millisecond)
}

// limitArgs is the per-limit part of ARGV: requests, period in µs, burst.
func limitArgs(a Algorithm, ls []Limit) []any {
	out := make([]any, 0, 3*len(ls))
	for _, l := range ls {
		out = append(out, l.Requests, l.Period.Microseconds(), burstOf(a, l))
	}
	return out
}

func slotValues(perLimit int) []string {
	if perLimit == 1 {
		return []string{""}
	}
	return []string{"0", "1"}
}

// Script is the Lua script the policy runs.
func (p *Policy) Script() *Script { return p.script }

// Keys returns the Redis keys a check for identity touches, in KEYS order, with the
// idempotency key last when requestID is set and the policy has idempotency.
func (p *Policy) Keys(identity, requestID string) []string {
	v := keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Identity: identity}
	n := len(p.Limits) * len(p.slots)
	keys := make([]string, 0, n+1)
	for _, l := range p.Limits {
		v.Limit = l.Name
		for _, s := range p.slots {
			v.Slot = s
			keys = append(keys, p.state.Expand(&v))
		}
	}
	if p.idem != nil && requestID != "" {
		v.Limit, v.Slot, v.RequestID = "", "", requestID
		keys = append(keys, p.idem.Expand(&v))
	}
	return keys
}

// args returns ARGV for one check.
func (p *Policy) args(cost int64, idempotent bool) []any {
	idem := "0"
	if idempotent {
		idem = p.idemMS
	}
	out := make([]any, 0, 3+len(p.limitArg))
	out = append(out, cost, p.ttlMS, idem)
	return append(out, p.limitArg...)
}
