package limiter

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// lease is units of one (policy, identity) debited in Redis ahead of use, spent locally. Unit
// j may be spent until deadline(j): for windows the end of the window the lease was taken in
// (step 0); for TokenBucket and GCRA the start of its cell in every limit (base + j*step,
// with base the earliest first cell and step the smallest T of the limits, so never later
// than any limit's cell). Units are spent in order; a unit whose deadline has passed is
// skipped and never spent.
type lease struct {
	// id names the lease's record in Redis (the key suffix).
	id string
	// state is the state keys the lease was taken from, to return it by.
	state []string
	// units is how many were granted; next is the first not spent nor skipped.
	units, next int64
	base        time.Time
	step        time.Duration
	// held marks units not every replica acknowledged (leaseack.go): never spent, only
	// returned.
	held bool
}

// deadline is the last moment unit j may be spent.
func (l *lease) deadline(j int64) time.Time {
	return l.base.Add(time.Duration(j) * l.step)
}

// take spends cost units at now, skipping past ones; false when the lease cannot cover it
// (then nothing is spent, and it should be returned and replaced).
func (l *lease) take(cost int64, now time.Time) bool {
	if l.held {
		return false
	}
	if l.step > 0 && now.After(l.base) {
		past := int64((now.Sub(l.base) + l.step - 1) / l.step)
		l.next = max(l.next, past)
	}
	if l.next+cost > l.units || now.After(l.deadline(l.next)) {
		return false
	}
	l.next += cost
	return true
}

// left is what remains unspent and spendable at now (for reports).
func (l *lease) left(now time.Time) int64 {
	if now.After(l.deadline(l.next)) {
		return 0
	}
	return l.units - l.next
}

// leaseArgs is ARGV of a lease call: k units wanted, at least minLeaseUnits and at most
// 1/share of what is left, returning prev's unspent units (prev nil: none), with the
// calendar windows (if any) that hold server time at.
func (p *Policy) leaseArgs(k, share int64, prev *lease, at time.Time) []any {
	next := "-1"
	if prev != nil {
		next = strconv.FormatInt(prev.next, 10)
	}
	out := make([]any, 0, 5+len(p.limitArg))
	out = append(out, strconv.FormatInt(k, 10), p.ttlMS, strconv.Itoa(minLeaseUnits), next, strconv.FormatInt(share, 10))
	out = append(out, p.limitArg...)
	if p.calendars != nil {
		p.calendars.fill(out[len(out)-len(p.limitArg):], at)
	}
	return out
}

// leaseKeys is KEYS of a lease call: the state keys, the new lease's record and, when prev
// is set, the previous lease's record. Records sit beside the first state key, under its
// hash tag ("~" appears in no limit name, so no record is another limit's state key).
func leaseKeys(state []string, id string, prev *lease) []string {
	keys := make([]string, len(state), len(state)+2)
	copy(keys, state)
	rec := state[0] + "~lease:"
	keys = append(keys, rec+id)
	if prev != nil {
		keys = append(keys, rec+prev.id)
	}
	return keys
}

// minLeaseUnits is the smallest lease worth taking: fewer available, and checks go to Redis
// one by one.
const minLeaseUnits = 2

// leaseReply is a lease script's answer.
type leaseReply struct {
	// lease is the lease granted, nil when none.
	lease *lease
	// returned is how many units of the previous lease went back.
	returned int64
}

// decodeLease turns a lease reply into a lease whose deadlines are on the local clock, from
// sent, the moment the call was sent (no later than the script's TIME, so every deadline
// is early rather than late).
func decodeLease(p *Policy, v any, id string, sent time.Time) (leaseReply, error) {
	r, ok := v.([]any)
	if !ok || len(r) != 3+len(p.Limits) && len(r) != 3 {
		return leaseReply{}, fmt.Errorf("lease script %s: unexpected reply %v", p.leaseScript.Name, v)
	}
	n := make([]int64, len(r))
	for i, x := range r {
		if n[i], ok = x.(int64); !ok {
			return leaseReply{}, fmt.Errorf("lease script %s: reply element %d is %T, want integer", p.leaseScript.Name, i, x)
		}
	}
	out := leaseReply{returned: n[1]}
	if n[0] < 1 || len(r) == 3 {
		return out, nil
	}
	l := &lease{id: id, units: n[0]}
	first := time.Duration(math.MaxInt64)
	for i, off := range n[3:] {
		first = min(first, time.Duration(off)*time.Microsecond)
		if p.Algorithm.desc().bucket {
			step := time.Duration(interval(p.Limits[i])) * time.Microsecond
			if l.step == 0 || step < l.step {
				l.step = step
			}
		}
	}
	l.base = sent.Add(first)
	out.lease = l
	return out, nil
}

// leaseEntry is the local tier's state of one (policy, identity) at this process.
type leaseEntry struct {
	mu sync.Mutex
	// cur is the lease in force; nil when none.
	cur *lease
	// fetching is true while one caller takes a new lease; ready is closed when it is
	// settled, so the others wait for it rather than all asking Redis at once.
	fetching bool
	ready    chan struct{}
	// quiet is until when no lease is tried after one was refused (too little left).
	quiet time.Time
	// rate and seen are the identity's last estimated checks/s here and when (for
	// HotIdentities).
	rate float64
	seen time.Time
}
