package limiter

import (
	"fmt"
	"time"
)

// Source says who made a decision.
type Source string

const (
	// SourceRedis is a decision of the Lua script in Redis.
	SourceRedis Source = "Redis"
	// SourceDenyCache is a denial answered locally: Redis said no until a known time.
	SourceDenyCache Source = "DenyCache"
	// SourceLease is an admission answered locally from a lease: units debited in Redis
	// ahead, by one script call, for a hot identity (the local tier).
	SourceLease Source = "Lease"
	// SourceFailOpen admitted without Redis (FailOpen).
	SourceFailOpen Source = "FailOpen"
	// SourceFailClosed denied without Redis (FailClosed).
	SourceFailClosed Source = "FailClosed"
	// SourceLocalCap decided without Redis by the in-process cap (LocalCap).
	SourceLocalCap Source = "LocalCap"
)

// Decision is the answer to one check.
type Decision struct {
	// Allowed is true when the request may proceed.
	Allowed bool
	// Remaining is what is left of the tightest limit after this request (when allowed), or
	// of the denying limit (when denied).
	Remaining int64
	// Limit is that limit's size: burst for TokenBucket and GCRA, requests for the windows.
	Limit int64
	// RetryAfter is how long a denied caller should wait; negative means never (the cost
	// exceeds what the limit can ever hold). Zero when allowed.
	RetryAfter time.Duration
	// ResetAfter is when the reported limit is back to full.
	ResetAfter time.Duration
	// LimitName names the limit that Remaining, Limit and ResetAfter describe: the tightest
	// when allowed, the denying one when denied; empty when Redis was not asked.
	LimitName string
	// DeniedBy is the name of the limit that denied, empty when allowed.
	DeniedBy string
	// Replayed is true when an idempotency key had been seen: the first decision, no debit.
	Replayed bool
	// Source says who decided; anything but SourceRedis, SourceDenyCache and SourceLease
	// means Redis could not be asked.
	Source Source
	// Err is the Redis error behind a decision made without Redis.
	Err error
}

// WithoutRedis reports whether Redis could not be asked and a failure mode decided.
func (d Decision) WithoutRedis() bool {
	return d.Source != SourceRedis && d.Source != SourceDenyCache && d.Source != SourceLease
}

// Integer replies: a fresh admission whose figures fit answers with one integer,
// code + 2^26 * reset_after_ms, sparing Redis a reply table (see the scripts' headers).
const (
	intReplyShift = 26
	intReplyCode  = 1<<intReplyShift - 1
)

// decodeReply turns the script's reply into a Decision: either {code, retry_after_ms,
// reset_after_ms} or, for a fresh admission, the integer code + 2^26 * reset_after_ms;
// code = allowed + 2*replayed + 4*limit index + 64*remaining.
func decodeReply(p *Policy, v any) (Decision, error) {
	var n [3]int64
	switch r := v.(type) {
	case int64:
		n[0], n[2] = r&intReplyCode, r>>intReplyShift
		if r < 0 || n[0]&3 != 1 {
			return Decision{}, fmt.Errorf("script %s: integer reply %d is not a fresh admission", p.script.Name, r)
		}
	case []any:
		if len(r) != 3 {
			return Decision{}, fmt.Errorf("script %s: unexpected reply %v", p.script.Name, v)
		}
		if err := replyInts(p.script, r, n[:]); err != nil {
			return Decision{}, err
		}
	default:
		return Decision{}, fmt.Errorf("script %s: unexpected reply %v", p.script.Name, v)
	}
	code := n[0]
	idx := int(code>>2&15) - 1
	if idx < 0 || idx >= len(p.Limits) {
		return Decision{}, fmt.Errorf("script %s: reply names limit %d of %d", p.script.Name, idx+1, len(p.Limits))
	}
	d := Decision{
		Allowed:    code&1 == 1,
		Replayed:   code&2 == 2,
		Remaining:  code >> 6,
		Limit:      p.size(idx),
		RetryAfter: time.Duration(n[1]) * time.Millisecond,
		ResetAfter: time.Duration(n[2]) * time.Millisecond,
		LimitName:  p.Limits[idx].Name,
		Source:     SourceRedis,
	}
	if n[1] < 0 {
		d.RetryAfter = -1
	}
	if !d.Allowed {
		d.DeniedBy = p.Limits[idx].Name
	}
	return d, nil
}

// replyInts copies a reply table of integers into n (len(n) == len(r)), or says which
// element is not one.
func replyInts(s *Script, r []any, n []int64) error {
	for i, x := range r {
		var ok bool
		if n[i], ok = x.(int64); !ok {
			return fmt.Errorf("script %s: reply element %d is %T, want integer", s.Name, i, x)
		}
	}
	return nil
}
