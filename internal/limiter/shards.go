package limiter

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// MaxShards is the most shards a global limit may be spread over.
const MaxShards = 16

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// shardSet is a sharded policy's parts: one sub-policy per shard, each holding its share of
// every limit, and the shard identities of the identities seen (a few: sharding is for
// Fixed identities).
type shardSet struct {
	parts []*Policy
	mu    sync.Mutex
	ids   map[string][]string
}

// maxShardIdentities bounds the identities whose shard identities are remembered.
const maxShardIdentities = 64

// buildShards splits p's limits over c.Shards sub-policies (the global tier), as shardSpecs
// says; c is valid (checkShards).
func (p *Policy) buildShards(c Spec) FieldErrors {
	parts := shardSpecs(c)
	if parts == nil {
		return nil
	}
	set := &shardSet{ids: map[string][]string{}}
	for i, part := range parts {
		sp, err := NewPolicy(part)
		if err != nil {
			return FieldErrors{{Field: "hotKeys.shards", Detail: fmt.Sprintf("shard %d of %d: %v", i, len(parts), err)}}
		}
		set.parts = append(set.parts, sp)
	}
	p.shards = set
	return nil
}

// checkShards says what is wrong with spreading c over c.Shards shards: too many, too few
// requests per limit for each to hold a share, or a share that is not a valid policy.
func checkShards(c Spec) FieldErrors {
	n := c.Shards
	if n <= 1 {
		return nil
	}
	if n > MaxShards {
		return FieldErrors{{Field: "hotKeys.shards", Detail: fmt.Sprintf("at most %d, got %d", MaxShards, n)}}
	}
	for j, l := range c.Limits {
		if l.Requests < int64(n) || burstOf(c.Algorithm, l) < int64(n) {
			return FieldErrors{{Field: fmt.Sprintf("limits[%d].requests", j), Detail: fmt.Sprintf("%d shards need at least %d requests (and burst) per limit: each shard holds a share", n, n)}}
		}
	}
	for i, part := range shardSpecs(c) {
		if errs := Validate(part); len(errs) > 0 {
			return FieldErrors{{Field: "hotKeys.shards", Detail: fmt.Sprintf("shard %d of %d: %v", i, n, errs)}}
		}
	}
	return nil
}

// shardSpecs are c's shards (nil when it has one): shard i gets requests/N (and burst/N) plus
// one of the remainder for i < remainder, so the shares add up to the limit exactly. Each
// shard keeps c's templates; its keys differ by the identity.
func shardSpecs(c Spec) []Spec {
	n := c.Shards
	if n <= 1 {
		return nil
	}
	out := make([]Spec, n)
	for i := range n {
		part := c
		part.Shards = 0
		part.Limits = make([]Limit, len(c.Limits))
		for j, l := range c.Limits {
			part.Limits[j] = shareOf(c.Algorithm, l, n, i)
		}
		// A share's T rounds up to whole µs, so its refill horizon may pass the policy's by
		// a few µs per request: its keys live that much longer.
		part.TTL = max(c.TTL, Horizon(c.Algorithm, part.Limits))
		out[i] = part
	}
	return out
}

// shareOf is shard i's share of l over n shards.
func shareOf(a Algorithm, l Limit, n, i int) Limit {
	split := func(v int64) int64 {
		s := v / int64(n)
		if int64(i) < v%int64(n) {
			s++
		}
		return s
	}
	out := l
	out.Requests = split(l.Requests)
	if l.Burst != 0 && a.desc().bucket {
		out.Burst = split(l.Burst)
	}
	return out
}

// identities are the shard identities of identity: for shard i, identity + "~" + the first
// number whose hash tag's slot lies in the i-th of N equal slot ranges, so that on a Cluster
// whose primaries own equal contiguous ranges (as redis-cli --cluster create makes them)
// each shard lands on its own primary. Deterministic: every sidecar finds the same keys.
func (s *shardSet) identities(identity string) []string {
	s.mu.Lock()
	ids, ok := s.ids[identity]
	s.mu.Unlock()
	if ok {
		return ids
	}
	ids = make([]string, len(s.parts))
	n := len(s.parts)
	p := s.parts[0]
	for i := range ids {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n
		for j := 0; ; j++ {
			cand := identity + "~" + strconv.Itoa(j)
			key := p.state.Expand(&keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Identity: cand, Limit: p.Limits[0].Name})
			if slot := int(keylayout.Slot(key)); (slot >= lo && slot < hi) || j >= 64*n {
				ids[i] = cand
				break
			}
		}
	}
	s.mu.Lock()
	if len(s.ids) < maxShardIdentities {
		s.ids[identity] = ids
	}
	s.mu.Unlock()
	return ids
}

// firstShard is an idempotent request's first shard, from its id (FNV-1a, the same in every
// sidecar), so a retry asks the shard that recorded its first decision.
func firstShard(requestID string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(requestID))
	return int(h.Sum64() % uint64(max(n, 1))) //nolint:gosec // n is a shard count, 2 to MaxShards
}

// checkSharded decides r against a sharded policy: one shard at random (an idempotent
// request: the one its id picks), and when that shard denies, the others in turn; a denial
// only when every shard denied. Each call touches one shard's keys, one hash tag.
func (l *Limiter) checkSharded(ctx context.Context, p *Policy, r Request) Decision {
	ids := p.shards.identities(r.Identity)
	n := len(ids)
	start := rand.IntN(n) //nolint:gosec // load spreading, not security
	if p.idempotent(r) {
		start = firstShard(r.RequestID, n)
	}
	var denied Decision
	for k := range n {
		i := (start + k) % n
		sr := r
		sr.Identity = ids[i]
		d := p.wholeLimit(l.checkOne(ctx, p.shards.parts[i], sr))
		if d.Allowed || d.WithoutRedis() {
			return d
		}
		if k == 0 || d.RetryAfter >= 0 && (denied.RetryAfter < 0 || d.RetryAfter < denied.RetryAfter) {
			denied = d
		}
	}
	return denied
}

// wholeLimit reports a shard's decision against the policy's whole limit: Limit is the
// limit's size, not the shard's share (Remaining stays the shard's).
func (p *Policy) wholeLimit(d Decision) Decision {
	for i, lim := range p.Limits {
		if lim.Name == d.LimitName {
			d.Limit = p.size(i)
		}
	}
	return d
}
