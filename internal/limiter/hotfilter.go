package limiter

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// meterBucket is the length of one bucket of the hot filter's rate estimate.
const meterBucket = 100 * time.Millisecond

// hotSlots is the number of counters of the hot filter (128 KiB).
const hotSlots = 1 << 14

// hotFilter estimates each (policy, identity)'s checks per second at this process in fixed
// memory, so a cold identity costs one hash and one atomic update, never a table entry or a
// lock: counters indexed by hash, each packing the 100ms bucket number (32 bits) with the
// counts of that bucket and the one before (16 bits each, saturating). Identities sharing a
// counter add up: a cold one may look hot (then it is leased like a hot one, still exactly),
// a hot one never looks cold.
type hotFilter struct {
	seed  maphash.Seed
	slots [hotSlots]atomic.Uint64
}

func newHotFilter() *hotFilter { return &hotFilter{seed: maphash.MakeSeed()} }

// observe counts one check of identity under p at now and returns its estimated rate:
// the checks of this bucket and the one before over the time they span.
func (f *hotFilter) observe(p *Policy, identity string, now time.Time) float64 {
	h := maphash.String(f.seed, identity) ^ p.serial*0x9e3779b97f4a7c15
	slot := &f.slots[h%hotSlots]
	ns := now.UnixNano()
	epoch := uint64(ns/int64(meterBucket)) & 0xffffffff
	for {
		old := slot.Load()
		prev, cur := old>>16&0xffff, old&0xffff
		switch old >> 32 {
		case epoch:
		case (epoch - 1) & 0xffffffff:
			prev, cur = cur, 0
		default:
			prev, cur = 0, 0
		}
		cur = min(cur+1, 0xffff)
		if slot.CompareAndSwap(old, epoch<<32|prev<<16|cur) {
			span := meterBucket + time.Duration(ns%int64(meterBucket))
			return float64(prev+cur) / span.Seconds()
		}
	}
}
