package limiter

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Op is an administrative change to one identity's counters of a policy.
type Op string

const (
	// OpReset counts nothing for the identity: every limit as fresh, grants included.
	OpReset Op = "reset"
	// OpRefund undoes charges: each limit frees up to Amount units of what it counts, never
	// more than the limit holds when full, and never touches a grant.
	OpRefund Op = "refund"
	// OpGrant gives Amount units beyond each limit until its current window ends (FixedWindow,
	// SlidingWindow: the count goes below 0), or for TokenBucket and GCRA a credit of Amount
	// beyond the burst, spent before the bucket's own, for the bucket's refill time.
	OpGrant Op = "grant"
)

// MaxAdjustAmount is the largest Amount of a refund or grant.
const MaxAdjustAmount = 1_000_000_000

// MaxRequestIDBytes is the longest request id of an adjustment.
const MaxRequestIDBytes = 256

// AdjustRecordTTL is how long an adjustment's request id is remembered: a retry within it
// gets the first reply back and changes nothing.
const AdjustRecordTTL = 24 * time.Hour

// Adjustment is one reset, refund or grant of an identity's counters.
type Adjustment struct {
	// Op is what to do.
	Op Op
	// Identity is the caller whose counters change, as checks name it.
	Identity string
	// Amount is the units to refund or grant (1 to MaxAdjustAmount); 0 for a reset.
	Amount int64
	// RequestID makes the adjustment idempotent: retried under the same id it applies once
	// (for AdjustRecordTTL). Required: 1 to MaxRequestIDBytes of printable ASCII without
	// spaces (0x21 to 0x7E), since it is quoted in the Event and the log line that record the
	// change, and a newline in it would write a line of its own there.
	RequestID string
}

// LimitChange is what an adjustment did to one limit.
type LimitChange struct {
	// Name is the limit's name.
	Name string
	// Limit is its size (for a sharded policy, the whole limit).
	Limit int64
	// Remaining is what it holds after the change (summed over shards).
	Remaining int64
	// Applied is the units the change freed: remaining after minus before (negative when a
	// reset took back a grant; summed over shards).
	Applied int64
	// ResetAfter is how long until it is full again after the change (the latest shard's).
	ResetAfter time.Duration
}

// Adjusted is the answer to an adjustment.
type Adjusted struct {
	// Replayed is true when this was a retry of a recorded adjustment: nothing changed now,
	// and Limits are the figures of the first call.
	Replayed bool
	// Limits is every limit of the policy, in the policy's order.
	Limits []LimitChange
}

// ErrAdjustReused is the error of a request id already used for another adjustment.
var ErrAdjustReused = errors.New("this request id was used for another adjustment")

// Validate says what is wrong with a, naming the field.
func (a Adjustment) Validate() error {
	switch {
	case a.Op != OpReset && a.Op != OpRefund && a.Op != OpGrant:
		return fmt.Errorf("op: %q is not reset, refund or grant", a.Op)
	case a.Op == OpReset && a.Amount != 0:
		return fmt.Errorf("amount: a reset takes none, got %d", a.Amount)
	case a.Op != OpReset && (a.Amount < 1 || a.Amount > MaxAdjustAmount):
		return fmt.Errorf("amount: a %s takes 1 to %d units, got %d", a.Op, MaxAdjustAmount, a.Amount)
	case a.RequestID == "":
		return errors.New("requestId: required, so that a retry applies once")
	case len(a.RequestID) > MaxRequestIDBytes:
		return fmt.Errorf("requestId: at most %d bytes, got %d", MaxRequestIDBytes, len(a.RequestID))
	}
	if i := strings.IndexFunc(a.RequestID, func(r rune) bool { return r < 0x21 || r > 0x7e }); i >= 0 {
		return fmt.Errorf("requestId: byte %d is not printable ASCII (0x21 to 0x7E: no spaces, control or non-ASCII characters)", i)
	}
	return nil
}

// Adjust resets, refunds or grants a.Identity's counters of p, atomically in one script call
// per hash tag (one for a policy that is not sharded), idempotent by a.RequestID. A sharded
// policy is adjusted on every shard: a reset on each, a refund or grant spread over them as
// the limit is (shard i takes Amount/N, one more for i < Amount mod N). The deny cache and
// leases are not touched: sidecars that cached a denial answer it until it expires (at most
// the deny cache's hold), and units already leased stay with the sidecars holding them.
func (l *Limiter) Adjust(ctx context.Context, p *Policy, a Adjustment) (Adjusted, error) {
	if err := a.Validate(); err != nil {
		return Adjusted{}, err
	}
	if p.shards == nil {
		return l.adjustOne(ctx, p, a)
	}
	ids := p.shards.identities(a.Identity)
	out := Adjusted{Replayed: true, Limits: make([]LimitChange, len(p.Limits))}
	for i, lim := range p.Limits {
		out.Limits[i] = LimitChange{Name: lim.Name, Limit: p.size(i)}
	}
	for i, id := range ids {
		sa := a
		sa.Identity = id
		if a.Op != OpReset {
			if sa.Amount = shareOf(p.Algorithm, Limit{Requests: a.Amount}, len(ids), i).Requests; sa.Amount == 0 {
				continue
			}
		}
		part, err := l.adjustOne(ctx, p.shards.parts[i], sa)
		if err != nil {
			return Adjusted{}, fmt.Errorf("shard %d of %d: %w", i, len(ids), err)
		}
		out.Replayed = out.Replayed && part.Replayed
		for j, ch := range part.Limits {
			s := &out.Limits[j]
			s.Remaining += ch.Remaining
			s.Applied += ch.Applied
			s.ResetAfter = max(s.ResetAfter, ch.ResetAfter)
		}
	}
	return out, nil
}

// adjustOne is Adjust of a policy that is not sharded (or one shard of one).
func (l *Limiter) adjustOne(ctx context.Context, p *Policy, a Adjustment) (Adjusted, error) {
	keys := p.Keys(a.Identity, "")
	keys = append(keys, adjustRecordKey(keys[0], a.RequestID))
	v, err := l.runAdjust(ctx, p, keys, a, AdjustRecordTTL)
	if err != nil {
		return Adjusted{}, err
	}
	out, _, err := decodeAdjusted(p, v)
	return out, err
}

// runAdjust calls p's adjustment script on keys (the state keys, then the record) for a,
// whose record, once done, lives recordTTL.
func (l *Limiter) runAdjust(ctx context.Context, p *Policy, keys []string, a Adjustment, recordTTL time.Duration) (any, error) {
	call := func(at time.Time) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
		return evalOne(ctx, l.rdb, p.adjustScript, keys, p.adjustArgs(a, recordTTL, at))
	}
	v, err := l.atServerTime(p, call)
	if err != nil {
		if strings.Contains(err.Error(), "made by another change") {
			return nil, fmt.Errorf("requestId: %w", ErrAdjustReused)
		}
		return nil, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return v, nil
}

// adjustRecordKey is the key recording an adjustment's request id: the first state key (so
// the same hash tag, within the policy's key scope) followed by a hash of the id.
func adjustRecordKey(first, requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return first + ":adjust:" + hex.EncodeToString(sum[:16])
}

// adjustArgs is ARGV of a at server time at: amount, the state TTL, the record TTL, the
// fingerprint, the op, then the limits as a check's.
func (p *Policy) adjustArgs(a Adjustment, recordTTL time.Duration, at time.Time) []any {
	args := p.buildArgs(max(a.Amount, 1), "")
	limits := args[3:]
	if p.calendars != nil {
		p.calendars.fill(limits[:len(p.limitArg)], at)
	}
	out := make([]any, 0, 5+len(limits))
	out = append(out, strconv.FormatInt(a.Amount, 10), p.ttlMS, strconv.FormatInt(recordTTL.Milliseconds(), 10),
		p.adjustFingerprint(a), string(a.Op))
	return append(out, limits...)
}

// adjustFingerprint binds a request id to one adjustment: the first 16 bytes of SHA-256 over
// the policy, the identity, the op and the amount, each length-prefixed.
func (p *Policy) adjustFingerprint(a Adjustment) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{p.Namespace, p.Name, a.Identity, string(a.Op), strconv.FormatInt(a.Amount, 10)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return string(h.Sum(nil)[:fingerprintBytes])
}

// decodeAdjusted turns the adjustment script's reply into Adjusted: {replayed, then
// remaining, applied, reset_after_ms per limit, then the cost a settled reservation held}.
func decodeAdjusted(p *Policy, v any) (Adjusted, int64, error) {
	r, ok := v.([]any)
	if !ok || len(r) != 2+3*len(p.Limits) {
		return Adjusted{}, 0, fmt.Errorf("script %s: unexpected reply %v", p.adjustScript.Name, v)
	}
	n := make([]int64, len(r))
	if err := replyInts(p.adjustScript, r, n); err != nil {
		return Adjusted{}, 0, err
	}
	out := Adjusted{Replayed: n[0] == 1, Limits: make([]LimitChange, len(p.Limits))}
	for i, lim := range p.Limits {
		f := n[1+3*i:]
		out.Limits[i] = LimitChange{Name: lim.Name, Limit: p.size(i), Remaining: f[0], Applied: f[1],
			ResetAfter: time.Duration(f[2]) * time.Millisecond}
	}
	return out, n[len(n)-1], nil
}
