package limiter

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
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
	// Calendar, for FixedWindow only, makes the windows calendar days, weeks or months in a
	// time zone instead of multiples of Period from the Unix epoch; Period is then ignored
	// (NewPolicy sets it to the unit's nominal length).
	Calendar *calendar.Calendar
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

// Spec describes a policy in the limiter's terms (the controller compiles a
// RateLimitPolicy into this shape).
type Spec struct {
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
	// IdempotencyMaxReplays is how many times a request id may replay its first decision
	// within IdempotencyTTL; beyond it the id counts as a new request. 0 means
	// DefaultMaxReplays.
	IdempotencyMaxReplays int
	// FailureMode applies while Redis cannot be asked.
	FailureMode FailureMode
	// LocalCap is required when FailureMode is LocalCap.
	LocalCap *LocalCapConfig
	// Leases lets a Limiter serve this policy's hot identities from leases of units
	// debited ahead (the local tier, see LeaseOptions).
	Leases bool
	// Shards spreads every identity's budget over this many shards on different hash tags
	// (the global tier, for Fixed identities); 0 or 1: one.
	Shards int
	// KeepUsage: state records the rate it was written at, so a change of rate (a tier change
	// or a per-caller override) keeps the caller's usage in tokens. For TokenBucket and GCRA
	// the state is a time, which under another rate would mean another number of tokens used
	// (900 used at 86.4 s per token read at 0.864 s are 90,000): with KeepUsage it is written
	// with its µs per token, and a read at another rate rescales the debt (rounded up, capped
	// at the limit's burst), for checks and leases alike. The windows count requests, which
	// carry over as they are: for them KeepUsage changes nothing. Off, nothing changes either
	// (same ARGV, same stored integers); either way a script reads both formats, so turning
	// it on or off keeps usage too. Scripts from before KeepUsage read its values as a full
	// bucket: turn it on only once no sidecar on the Redis runs them. A debt that does not fit
	// the capacity of the rate it is read at (burst tokens or more) is an empty bucket there,
	// and the denied call writes nothing: the state keeps the whole debt at the rate it was
	// written at, so a caller switched below what it used stays denied until the debt,
	// refilling at that rate, fits, and a switch down and back (one request that selects a
	// smaller tier) forgives nothing. A debt that fits is written back at the new rate even
	// by a denied call.
	KeepUsage bool
	// Functions calls the policy's scripts as the Redis functions the manager loads
	// (FCALL of Script.Function), never with EVALSHA or EVAL: per-namespace Redis users
	// may run no code of their choosing, so they are granted FCALL only.
	Functions bool
	// Concurrency, when set, also limits the requests of one identity in flight at once.
	Concurrency *Concurrency
	// Settle, when not 0, is how long after its admission a request's cost may be settled
	// from its response: Reserve records each admission's reservation for that long, and
	// Settle consumes it (MinSettle to MaxSettle, whole ms). A policy spread over shards
	// cannot settle.
	Settle time.Duration
}

// Policy is a Spec checked and prepared for the hot path. Immutable; safe for
// concurrent use.
type Policy struct {
	Spec
	script *Script
	// leaseScript takes and returns leases (the local tier).
	leaseScript *Script
	// peekScript decides without writing (Limiter.Peek).
	peekScript *Script
	// adjustScript resets, refunds and grants (Limiter.Adjust).
	adjustScript *Script
	// acquireScript checks the rate limits and takes a slot (Concurrency set).
	acquireScript *Script
	// shards are the parts of a sharded policy; nil when not sharded.
	shards *shardSet
	// serial tells policies apart in the hot filter; a new one per NewPolicy, so an edited
	// policy starts with fresh leases.
	serial   uint64
	state    *keylayout.Template
	idem     *keylayout.Template
	ttlMS    string
	idemMS   string
	replays  string // IdempotencyMaxReplays as ARGV
	limitArg []any
	// commonArgs is ARGV for the common check (cost 1, no request id), built once and shared
	// read-only by every such call: go-redis copies args into each command.
	commonArgs []any
	local      *localCap
	// horizon is how far a reply of the policy's scripts can reach: its Horizon, or the
	// longest of its calendar windows.
	horizon time.Duration
	// calendars are the policy's calendar limits, whose windows each call computes; nil
	// when it has none.
	calendars *calendarLimits
}

// policySerial numbers policies as they are built.
var policySerial atomic.Uint64

// MaxLimits is the most limits one policy may have.
const MaxLimits = 8

// NewPolicy checks c (Validate) and prepares it for the hot path. Its error is FieldErrors,
// naming every bad field.
func NewPolicy(c Spec) (*Policy, error) {
	if errs := Validate(c); len(errs) > 0 {
		return nil, errs
	}
	c.Limits = withCalendarPeriods(c.Limits)
	if c.IdempotencyKey != "" && c.IdempotencyMaxReplays == 0 {
		c.IdempotencyMaxReplays = DefaultMaxReplays
	}
	p := &Policy{Spec: c, script: scriptOf(scripts.Check, c.Algorithm), leaseScript: scriptOf(scripts.Lease, c.Algorithm),
		peekScript: scriptOf(scripts.Peek, c.Algorithm), adjustScript: scriptOf(scripts.Adjust, c.Algorithm),
		acquireScript: scriptOf(scripts.Acquire, c.Algorithm), serial: policySerial.Add(1)}
	if c.Functions {
		p.script, p.leaseScript, p.peekScript = p.script.asFunction(), p.leaseScript.asFunction(), p.peekScript.asFunction()
		p.adjustScript, p.acquireScript = p.adjustScript.asFunction(), p.acquireScript.asFunction()
	}
	p.state, p.idem, _ = parseTemplates(c)
	var err error
	if p.local, err = newLocalCap(c); err != nil {
		return nil, FieldErrors{{Field: "localCap", Detail: err.Error()}}
	}
	if errs := p.buildShards(c); len(errs) > 0 {
		return nil, errs
	}
	p.ttlMS = strconv.FormatInt(c.TTL.Milliseconds(), 10)
	p.idemMS = strconv.FormatInt(c.IdempotencyTTL.Milliseconds(), 10)
	p.replays = strconv.Itoa(p.IdempotencyMaxReplays)
	p.limitArg = limitArgs(c.Algorithm, c.Limits, c.KeepUsage)
	p.commonArgs = p.buildArgs(1, "")
	p.horizon = max(Horizon(c.Algorithm, c.Limits), longestWindow(c.Limits))
	p.calendars = newCalendarLimits(c.Limits)
	return p, nil
}

// Validate says what is wrong with c, naming every bad field, and builds nothing a policy
// holds at run time (no local cap's cache, no shards' policies, no scripts): what the webhook
// and the controller's compiler call. NewPolicy calls it first.
func Validate(c Spec) FieldErrors {
	if _, ok := algorithmTable[c.Algorithm]; !ok {
		return FieldErrors{{Field: "algorithm", Detail: fmt.Sprintf("unknown algorithm %q", c.Algorithm)}}
	}
	c.Limits = withCalendarPeriods(c.Limits)
	errs := checkLimits(c.Algorithm, c.Limits)
	errs = append(errs, checkConcurrency(c)...)
	errs = append(errs, checkSettle(c)...)
	errs = append(errs, checkCalendars(c)...)
	if h := Horizon(c.Algorithm, c.Limits); c.TTL < h {
		errs.add("keyLayout.ttl", "%s is shorter than the %s horizon %s: keys would expire while they still count; use at least %s",
			c.TTL, c.Algorithm, h, h)
	}
	state, idem, parseErrs := parseTemplates(c)
	errs = append(errs, parseErrs...)
	if len(parseErrs) == 0 {
		errs = append(errs, checkLayout(c, state, idem)...)
	}
	if err := checkLocalCap(c); err != nil {
		errs.add("localCap", "%v", err)
	}
	if len(errs) == 0 {
		errs = checkShards(c)
	}
	return errs
}

// parseTemplates parses c's key templates, naming what is wrong with them and with the
// idempotency settings that go with the idempotency template.
func parseTemplates(c Spec) (state, idem *keylayout.Template, errs FieldErrors) {
	var err error
	if c.StateKey == "" {
		errs.add("keyLayout.state", "a state key template is required")
	} else if state, err = keylayout.Parse(c.StateKey, stateVars...); err != nil {
		errs.add("keyLayout.state", "%v", err)
	}
	if c.IdempotencyKey == "" {
		return state, nil, errs
	}
	if idem, err = keylayout.Parse(c.IdempotencyKey, idemVars...); err != nil {
		errs.add("keyLayout.idempotency", "%v", err)
	}
	if c.IdempotencyTTL < time.Millisecond {
		errs.add("idempotency.ttl", "must be at least 1ms")
	}
	if r := c.IdempotencyMaxReplays; r != 0 && (r < 1 || r > MaxReplays) {
		errs.add("idempotency.maxReplays", "must be between 1 and %d, got %d", MaxReplays, r)
	}
	return state, idem, errs
}

// Replays of one request id a policy allows: at most MaxReplays, DefaultMaxReplays unless
// it says otherwise.
const (
	MaxReplays        = 1000
	DefaultMaxReplays = 3
)

var (
	stateVars = []string{keylayout.VarNamespace, keylayout.VarPolicy, keylayout.VarIdentity,
		keylayout.VarLimit, keylayout.VarSlot}
	idemVars = []string{keylayout.VarNamespace, keylayout.VarPolicy, keylayout.VarIdentity,
		keylayout.VarRequestID}
)

func checkLimits(a Algorithm, ls []Limit) FieldErrors {
	var errs FieldErrors
	if len(ls) == 0 || len(ls) > MaxLimits {
		errs.add("limits", "a policy needs 1 to %d limits, got %d", MaxLimits, len(ls))
	}
	seen := make(map[string]int, len(ls))
	for i, l := range ls {
		if j, dup := seen[l.Name]; dup {
			errs.add(fmt.Sprintf("limits[%d].name", i), "%q is also the name of limits[%d]: each limit needs its own name (it names the limit's key and its reports)", l.Name, j)
		}
		seen[l.Name] = i
		if fe := checkLimit(a, l); fe != nil {
			fe.Field = fmt.Sprintf("limits[%d].%s", i, fe.Field)
			errs = append(errs, fe)
		}
	}
	return errs
}

// maxVirtualTime bounds burst * T for TokenBucket and GCRA, so now + burst*T stays an exact
// integer in Lua's doubles (2^53 µs from the epoch); 2^52 µs is about 142 years.
const maxVirtualTime = 1 << 52

func checkLimit(a Algorithm, l Limit) *FieldError {
	switch {
	case l.Requests < 1:
		return &FieldError{"requests", "must be at least 1"}
	case l.Period < time.Millisecond:
		return &FieldError{"period", "must be at least 1ms"}
	case l.Burst < 0:
		return &FieldError{"burst", "must not be negative"}
	}
	if !a.desc().bucket {
		return nil
	}
	if l.Requests > l.Period.Microseconds() {
		return &FieldError{"requests", fmt.Sprintf("%d per %s is more than one request per microsecond, the finest %s step", l.Requests, l.Period, a)}
	}
	if fe := checkRepresentable(a, l); fe != nil {
		return fe
	}
	if float64(burstOf(a, l))*float64(interval(l)) > maxVirtualTime {
		return &FieldError{"burst", "burst * period / requests exceeds 142 years"}
	}
	return nil
}

// maxRoundingLoss is how much fewer requests per period rounding T up to whole µs may admit
// than asked (1%): more, and the rate is refused as not representable.
const maxRoundingLoss = 0.01

// checkRepresentable refuses a TokenBucket or GCRA rate that whole-µs steps cannot run
// within maxRoundingLoss of what was asked. T is rounded up, so a represented rate never
// admits more than asked; this keeps it from silently admitting much less.
func checkRepresentable(a Algorithm, l Limit) *FieldError {
	us := l.Period.Microseconds()
	rate := float64(us) / float64(interval(l))
	if rate >= (1-maxRoundingLoss)*float64(l.Requests) {
		return nil
	}
	effective := int64(rate)
	exact := float64(us) / float64(l.Requests)
	return &FieldError{"requests", fmt.Sprintf("%d per %s needs %.4gµs per request; %s counts whole microseconds per request, so it would admit at most %d per %s (%.0f%% fewer): choose requests and period so that period / requests is a whole number of microseconds or at least 100µs",
		l.Requests, l.Period, exact, a, effective, l.Period, 100*(1-float64(effective)/float64(l.Requests)))}
}

// interval is T, the µs one request occupies for TokenBucket and GCRA: period / requests
// rounded up, so that rounding can only ever admit fewer requests than asked.
func interval(l Limit) int64 {
	if l.Requests < 1 {
		return 0
	}
	us := l.Period.Microseconds()
	return (us + l.Requests - 1) / l.Requests
}

func burstOf(a Algorithm, l Limit) int64 {
	if l.Burst == 0 || !a.desc().bucket {
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
		if l.Calendar != nil {
			continue // its keys' PX reaches past its window's end
		}
		if f := a.desc().horizon; f != nil {
			h = max(h, f(l, burstOf(a, l)))
		}
	}
	return max(h, time.Millisecond)
}

// limitArgs is the per-limit part of ARGV, the tail of a check's and of a lease's: T (µs per
// request) and burst for TokenBucket and GCRA, requests and period in µs for the windows.
// Precomputing T here spares the script a number to parse on every call. With keep for
// TokenBucket and GCRA it ends with "keep", the keep-usage shape (see Spec.KeepUsage).
func limitArgs(a Algorithm, ls []Limit, keep bool) []any {
	out := make([]any, 0, 2*len(ls)+1)
	str := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, l := range ls {
		if a.desc().bucket {
			out = append(out, str(interval(l)), str(burstOf(a, l)))
		} else {
			out = append(out, str(l.Requests), str(l.Period.Microseconds()))
		}
	}
	if keep && a.desc().bucket {
		out = append(out, keepArg)
	}
	return out
}

// keepArg ends the ARGV of a keep-usage call.
const keepArg = "keep"

// size is the limit's capacity as the script reports it: burst for TokenBucket and GCRA,
// requests for the windows.
func (p *Policy) size(i int) int64 {
	return burstOf(p.Algorithm, p.Limits[i])
}

// Script is the Lua script the policy's checks run.
func (p *Policy) Script() *Script { return p.script }

// LeaseScript is the Lua script the policy's leases run (the local tier).
func (p *Policy) LeaseScript() *Script { return p.leaseScript }

// Keys returns the Redis keys a check for identity touches, in KEYS order, with the
// idempotency key last when requestID is set and the policy has idempotency.
func (p *Policy) Keys(identity, requestID string) []string {
	// One state key per limit (SlidingWindow keeps both of its windows in it; a template
	// that still names ${slot} expands it empty).
	v := keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Identity: identity}
	keys := make([]string, 0, len(p.Limits)+1)
	for _, l := range p.Limits {
		v.Limit = l.Name
		keys = append(keys, p.state.Expand(&v))
	}
	if p.idem != nil && requestID != "" {
		v.Limit, v.RequestID = "", requestID
		keys = append(keys, p.idem.Expand(&v))
	}
	return keys
}

// Args is ArgsAt(r, time.Now()); the clock is read only for a policy with calendar limits.
func (p *Policy) Args(r Request) []any {
	var at time.Time
	if p.calendars != nil {
		at = time.Now()
	}
	return p.ArgsAt(r, at)
}

// ArgsAt returns ARGV for one check of r at server time at (which picks the windows of
// calendar limits; unused without them), in the order the script reads it: cost, TTL, the
// idempotency TTL ("0" unless r is idempotent: it has a request id and the policy has
// idempotency), for an idempotent check the request's fingerprint and the replay bound, then
// the limits. The slice is shared for the common case (cost 1, not idempotent): do not
// modify it.
func (p *Policy) ArgsAt(r Request, at time.Time) []any {
	cost := max(r.Cost, 1)
	if p.calendars != nil {
		return p.calendarArgs(r, cost, at)
	}
	if !p.idempotent(r) {
		if cost == 1 {
			return p.commonArgs
		}
		return p.buildArgs(cost, "")
	}
	return p.buildArgs(cost, p.fingerprint(r, cost))
}

// calendarArgs is ArgsAt for a policy with calendar limits: the windows holding at fill
// the limits' places. The common check's ARGV is shared while the windows last.
func (p *Policy) calendarArgs(r Request, cost int64, at time.Time) []any {
	build := func(fp string) (args []any, from, until time.Time) {
		args = p.buildArgs(cost, fp)
		from, until = p.calendars.fill(args[len(args)-len(p.limitArg):], at)
		return args, from, until
	}
	if cost == 1 && !p.idempotent(r) {
		return p.calendars.commonArgs(at, func() ([]any, time.Time, time.Time) { return build("") })
	}
	fp := ""
	if p.idempotent(r) {
		fp = p.fingerprint(r, cost)
	}
	args, _, _ := build(fp)
	return args
}

// idempotent reports whether a check of r uses the policy's idempotency key.
func (p *Policy) idempotent(r Request) bool { return r.RequestID != "" && p.idem != nil }

// buildArgs is ARGV; fp is the request's fingerprint, empty for a check that is not
// idempotent.
func (p *Policy) buildArgs(cost int64, fp string) []any {
	idem := "0"
	n := 3 + len(p.limitArg)
	if fp != "" {
		idem = p.idemMS
		n += 2
	}
	out := make([]any, 0, n)
	out = append(out, strconv.FormatInt(cost, 10), p.ttlMS, idem)
	if fp != "" {
		out = append(out, fp, p.replays)
	}
	return append(out, p.limitArg...)
}

// fingerprint is what a request id is bound to: the first 16 bytes of SHA-256 over the
// policy, the identity, the cost and the front's description of the request
// (Request.Fingerprint), each length-prefixed so that no two different tuples share one. The
// policy is part of it because policies of a namespace may share an idempotency key
// template: a decision of one must never stand in for another's.
func (p *Policy) fingerprint(r Request, cost int64) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{p.Namespace, p.Name, r.Identity, strconv.FormatInt(cost, 10), r.Fingerprint} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return string(h.Sum(nil)[:fingerprintBytes])
}

// fingerprintBytes is the size of a fingerprint as stored in the idempotency key.
const fingerprintBytes = 16

// WithoutRedis decides r by the policy's failure mode, as a Limiter does while Redis cannot
// be asked, for a caller that has no Limiter yet (a sidecar waiting to learn where Redis is).
// A FailClosed denial says to retry in a second.
func (p *Policy) WithoutRedis(r Request, cause error) Decision {
	r.Cost = max(r.Cost, 1)
	return p.withoutRedis(r, cause, time.Now, time.Second)
}

// withoutRedis is the failure mode's decision; FailClosed denials wait retry. LocalCap reads
// clock once it holds the identity's window.
func (p *Policy) withoutRedis(r Request, cause error, clock func() time.Time, retry time.Duration) Decision {
	switch p.FailureMode {
	case FailClosed:
		return Decision{Allowed: false, RetryAfter: retry, Source: SourceFailClosed, Err: cause}
	case LocalCap:
		ok, rem, wait := p.local.take(r.Identity, r.Cost, clock)
		return Decision{Allowed: ok, Remaining: rem, Limit: p.local.requests, RetryAfter: wait,
			Source: SourceLocalCap, Err: cause}
	default:
		return Decision{Allowed: true, Source: SourceFailOpen, Err: cause}
	}
}
