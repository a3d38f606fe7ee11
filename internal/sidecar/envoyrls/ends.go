package envoyrls

import (
	"context"
	"strconv"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// Descriptor keys that tie a request's admission to the call Envoy makes when its stream
// ends (a rate limit with apply_on_stream_done), so that a cost settled from the response
// (cost.settle) is settled and a concurrency slot is given back.
const (
	// RequestIDKey names the request in both calls: Envoy's request_headers action on
	// x-request-id with this descriptor_key.
	RequestIDKey = "ratelimit.dev/request-id"
	// StreamDoneKey marks the call made when the stream ended (a generic_key action with
	// this descriptor_key, any value): its hits_addend is the cost the response stated (say
	// from %RESP(x-usage-tokens)% or the AI gateway's dynamic metadata); none set means
	// none stated, and the reservation stands.
	StreamDoneKey = "ratelimit.dev/stream-done"
)

// Bounds of the admissions remembered for their stream's end.
const (
	// MaxPending is how many admissions are remembered at once; beyond it the oldest is
	// forgotten (its reservation stands, its slot expires).
	MaxPending = 100_000
	// pendingLife is how long an admission is remembered: a stream that ends later keeps its
	// reservation, and its slot expires.
	pendingLife = time.Hour
)

// pendingEnds are the admissions waiting for their stream's end, by request id, policy and
// caller: several under one key when one caller's requests share an id (x-request-id may
// come from the client), ended first in, first out, so each stream's end still settles one
// of them. The caller is part of the key: a stream's end settles and releases only an
// admission of the caller its own descriptor names, never another's that shares its id.
type pendingEnds struct {
	mu    sync.Mutex
	m     map[string][]pendingEnd
	n     int      // entries held
	order []string // one key per put, oldest first; entries taken since stay until dropped
}

// pendingEnd is one admission and when it is forgotten.
type pendingEnd struct {
	out   engine.Outcome
	until time.Time
}

// maxPerKey bounds the admissions waiting under one key: a client reusing one request id
// for more streams at once loses the oldest's end (its reservation stands, its slot expires).
const maxPerKey = 64

// put remembers o under key, forgetting the oldest beyond MaxPending (or maxPerKey).
func (p *pendingEnds) put(key string, o engine.Outcome, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string][]pendingEnd)
	}
	for p.n >= MaxPending && len(p.order) > 0 {
		p.drop(p.order[0])
		p.order = p.order[1:]
	}
	if len(p.m[key]) >= maxPerKey {
		p.drop(key)
	}
	if len(p.order) > 2*MaxPending { // many taken since: start the order again from what is held
		p.order = p.order[len(p.order)-p.n:]
	}
	p.m[key] = append(p.m[key], pendingEnd{out: o, until: now.Add(pendingLife)})
	p.n++
	p.order = append(p.order, key)
}

// drop forgets the oldest admission under key, if any.
func (p *pendingEnds) drop(key string) {
	l := p.m[key]
	if len(l) == 0 {
		return
	}
	if len(l) == 1 {
		delete(p.m, key)
	} else {
		p.m[key] = l[1:]
	}
	p.n--
}

// take forgets and returns the oldest admission under key, if one is remembered and not
// expired.
func (p *pendingEnds) take(key string, now time.Time) (engine.Outcome, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.m[key]
	if len(l) == 0 {
		return engine.Outcome{}, false
	}
	e := l[0]
	p.drop(key)
	return e.out, now.Before(e.until)
}

// pendingKey is the key of policy rule's admission of request id for caller (its identity,
// as the admission counted it). Each part is length-prefixed, so no two triples share a key.
func pendingKey(id string, rule *engine.Rule, caller string) string {
	return strconv.Itoa(len(id)) + ":" + id + strconv.Itoa(len(rule.Name())) + ":" + rule.Name() + caller
}

// entryValue is the value of d's entry key, "" when it has none.
func entryValue(entries []requestread.DescriptorEntry, key string) string {
	for _, e := range entries {
		if e.Key == key {
			return e.Value
		}
	}
	return ""
}

// streamDone reports whether req is the call Envoy made when a stream ended.
func streamDone(req *rlsv3.RateLimitRequest) bool {
	for _, d := range req.GetDescriptors() {
		for _, e := range d.GetEntries() {
			if e.GetKey() == StreamDoneKey {
				return true
			}
		}
	}
	return false
}

// remember keeps, for their stream's end, the admissions among plans' outcomes that settle
// or hold a slot and whose descriptor names its request; when denied is true (another
// descriptor is over its limit, so Envoy answers 429 and the request goes nowhere) it ends
// them now instead: no cost, no slot.
func (s *Service) remember(ctx context.Context, plans []descriptorPlan, denied bool) {
	for i := range plans {
		for _, o := range plans[i].outs {
			switch {
			case !o.Settles() && !o.HoldsSlot():
			case denied:
				s.end(ctx, &o, 0, true)
			default:
				if id := entryValue(plans[i].entries, RequestIDKey); id != "" {
					s.pending.put(pendingKey(id, o.Rule, o.Caller()), o, time.Now())
				}
			}
		}
	}
}

// ended answers the call Envoy made when a stream ended: each admission remembered under a
// descriptor's request id and a policy it matches is settled at the call's hits_addend (none
// set: none stated) and its slot given back. Nothing is debited; every descriptor is OK.
func (s *Service) ended(ctx context.Context, span trace.Span, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	f := s.front()
	if err := validate(req); err != nil {
		return nil, grpcError(f.Refuse(span, err))
	}
	set, err := s.Engine.Snapshot()
	if err != nil {
		return nil, grpcError(f.Refuse(span, err))
	}
	f.Decided(span, nil) // nothing decided: every descriptor is OK
	now := time.Now()
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for range req.GetDescriptors() {
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
	}
	// Descriptors stating a cost first: a descriptor without one (Envoy's fallback when the
	// response stated none) ends what is left.
	for _, withCost := range []bool{true, false} {
		for _, d := range req.GetDescriptors() {
			if cost, stated := statedCost(req, d); stated == withCost {
				s.endAll(ctx, set.MatchDescriptor(req.GetDomain(), descriptorEntries(d)), descriptorEntries(d), cost, stated, now)
			}
		}
	}
	return resp, nil
}

// endAll ends the admissions remembered under the descriptor entries' request id for each
// of rules and the caller the entries name under it, at cost.
func (s *Service) endAll(ctx context.Context, rules []*engine.Rule, entries []requestread.DescriptorEntry, cost int64, stated bool, now time.Time) {
	id := entryValue(entries, RequestIDKey)
	if id == "" {
		return
	}
	for _, r := range rules {
		caller, ok := r.DescriptorCaller(entries)
		if !ok {
			continue
		}
		if o, ok := s.pending.take(pendingKey(id, r, caller), now); ok {
			s.end(ctx, &o, cost, stated)
		}
	}
}

// statedCost is the cost a stream-end call states for d (hitsAddend), and whether it
// states one: neither the descriptor's nor the request's hits_addend set states none.
func statedCost(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (int64, bool) {
	return hitsAddend(req, d), d.GetHitsAddend() != nil || req.GetHitsAddend() > 0
}

// end settles o at cost and gives back its slot, logging what failed: the reservation
// stands, the slot comes back when it expires. The settlement names the reservation Redis
// recorded at the admission, never the request's id: a client may send the x-request-id it
// likes.
func (s *Service) end(ctx context.Context, o *engine.Outcome, cost int64, stated bool) {
	if _, err := s.Engine.Settle(ctx, FrontName, o, cost, stated); err != nil {
		s.Log.Error(err, "settlement failed: the reservation stands", "policy", o.Rule.Name(), "reserved", o.Reserved(), "cost", cost)
	}
	if _, err := s.Engine.Release(ctx, FrontName, o); err != nil {
		s.Log.Error(err, "release failed: the slot comes back when it expires", "policy", o.Rule.Name())
	}
}
