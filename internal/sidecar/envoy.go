package sidecar

import (
	"context"
	"math"
	"math/bits"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// EnvoyServer is the Envoy RLS v3 front: it answers ShouldRateLimit calls from the Engine, as
// the package documentation describes. Safe for concurrent use.
type EnvoyServer struct {
	// Engine decides every check.
	Engine *Engine
	// Log receives denials at V(1). Identities are never logged.
	Log logr.Logger
}

var _ rlsv3.RateLimitServiceServer = (*EnvoyServer)(nil)

// Register adds the RLS v3 service to g.
func (s *EnvoyServer) Register(g *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(g, s)
}

// maxLoggedDomain bounds the domain text written to logs: the domain is caller input.
const maxLoggedDomain = 128

// descriptorPlan is one descriptor of a request, matched and with its checks prepared.
type descriptorPlan struct {
	entries  []DescriptorEntry
	policies []*Entry
	checks   []Check // parallel to policies
}

// ShouldRateLimit decides every descriptor of req. Each descriptor is decided on its own (as
// Envoy's reference service does): a descriptor within its limits is debited even when
// another descriptor of the same request is over its limit. Malformed requests (no domain,
// no descriptors, a refused cost) are refused whole, with InvalidArgument, before anything
// is debited. A descriptor's own hits_addend overrides the request's; is_negative_hits
// (a refund) is refused on a descriptor that a policy matches, since the scripts only
// debit; a descriptor's limit override is ignored: the policies alone set limits.
func (s *EnvoyServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	set, err := s.validate(req)
	if err != nil {
		return nil, err
	}
	plans, err := planRequest(set, req)
	if err != nil {
		return nil, err
	}
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(plans)),
	}
	statuses := make([]descriptorStatusAlloc, len(plans)) // one allocation for all
	var all []Outcome                                     // the outcomes of every descriptor, for the headers
	for i := range plans {
		outs := s.decide(ctx, &plans[i])
		st := statuses[i].fill(outs)
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = st
		s.logOutcomes(req.GetDomain(), i, outs)
		if len(plans) == 1 {
			all = outs // the common case: no copy
		} else {
			all = append(all, outs...)
		}
	}
	resp.ResponseHeadersToAdd = headerValues(RateLimitHeaders(all))
	return resp, nil
}

// MaxDescriptors bounds the descriptors of one request: each matched one costs a Redis call.
const MaxDescriptors = 64

// validate checks the request's shape and returns the snapshot in force.
func (s *EnvoyServer) validate(req *rlsv3.RateLimitRequest) (*Set, error) {
	if req.GetDomain() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "descriptors must not be empty")
	}
	if n := len(req.GetDescriptors()); n > MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d per request", n, MaxDescriptors)
	}
	var set *Set
	if s.Engine != nil && s.Engine.Store != nil {
		set = s.Engine.Store.Current()
	}
	if set == nil {
		return nil, status.Errorf(codes.Unavailable, "no rate limit snapshot loaded yet")
	}
	return set, nil
}

// planRequest matches every descriptor and prepares its checks, so that a refused cost in
// any descriptor refuses the request before any descriptor is debited.
func planRequest(set *Set, req *rlsv3.RateLimitRequest) ([]descriptorPlan, error) {
	plans := make([]descriptorPlan, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		p := &plans[i]
		p.entries = descriptorEntries(d)
		p.policies = set.MatchDescriptor(req.GetDomain(), p.entries)
		if len(p.policies) == 0 {
			continue
		}
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument,
				"descriptor %d: is_negative_hits (returning hits) is not supported", i)
		}
		hits := hitsAddend(req, d)
		p.checks = make([]Check, len(p.policies))
		for j, e := range p.policies {
			c, err := descriptorCheck(e, req.GetDomain(), p.entries, hits)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d, policy %s: %v", i, e.Name(), err)
			}
			p.checks[j] = c
		}
	}
	return plans, nil
}

// descriptorEntries converts a descriptor's entries; a nil descriptor has none.
func descriptorEntries(d *ratelimitv3.RateLimitDescriptor) []DescriptorEntry {
	in := d.GetEntries()
	out := make([]DescriptorEntry, len(in))
	for i, e := range in {
		out[i] = DescriptorEntry{Key: e.GetKey(), Value: e.GetValue()}
	}
	return out
}

// hitsAddend is the cost the caller stated for d: the descriptor's own hits_addend when set
// (Envoy lets it override the request's), else the request's. 0 means the policy's default.
func hitsAddend(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), math.MaxInt64))
	}
	return int64(req.GetHitsAddend())
}

// descriptorCheck is the check of one descriptor against policy e.
func descriptorCheck(e *Entry, domain string, entries []DescriptorEntry, hits int64) (Check, error) {
	cost, err := e.StatedCost(hits)
	if err != nil {
		return Check{}, err
	}
	id, ok := e.DescriptorIdentity(entries)
	c := Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: e.DescriptorRequestID(entries)}
	if c.RequestID != "" {
		c.Fingerprint = descriptorFingerprint(domain, entries)
	}
	return c, nil
}

// descriptorFingerprint describes an Envoy request for idempotency: its domain and every
// entry of the descriptor, each length-prefixed.
func descriptorFingerprint(domain string, entries []DescriptorEntry) string {
	parts := make([]string, 0, 1+2*len(entries))
	parts = append(parts, domain)
	for _, e := range entries {
		parts = append(parts, e.Key, e.Value)
	}
	return Fingerprint(parts...)
}

// decide checks one descriptor against its policies; none matched is no outcome.
func (s *EnvoyServer) decide(ctx context.Context, p *descriptorPlan) []Outcome {
	if len(p.policies) == 0 {
		return nil
	}
	return s.Engine.DecideAll(ctx, FrontEnvoy, p.policies, func(e *Entry) Check {
		return p.checks[slices.Index(p.policies, e)]
	})
}

// descriptorStatusAlloc holds one descriptor's status and its duration, so that a response
// allocates them for all its descriptors at once.
type descriptorStatusAlloc struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	reset  durationpb.Duration
}

// fill answers one descriptor: OVER_LIMIT when an outcome denied, with the reported limit
// (the denying one, else the tightest that Redis answered for).
func (a *descriptorStatusAlloc) fill(outs []Outcome) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &a.status
	st.Code = rlsv3.RateLimitResponse_OK
	rep := Denial(outs)
	if rep != nil {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	} else if rep = tightest(outs); rep == nil {
		return st
	}
	d := &rep.Decision
	reset := d.ResetAfter
	if !d.Allowed && d.RetryAfter > 0 {
		reset = d.RetryAfter
	}
	if l := rep.Entry.envoyLimit(d.LimitName); l != nil {
		st.CurrentLimit = l
		st.DurationUntilReset = a.duration(max(reset, 0))
	} else if reset > 0 {
		st.DurationUntilReset = a.duration(reset)
	}
	st.LimitRemaining = clampUint32(d.Remaining)
	return st
}

// duration is d as the status's own Duration message (durationpb.New without allocating).
func (a *descriptorStatusAlloc) duration(d time.Duration) *durationpb.Duration {
	a.reset.Seconds, a.reset.Nanos = int64(d/time.Second), int32(d%time.Second)
	return &a.reset
}

// tightest is the outcome with the least remaining among those Redis answered for a limit.
func tightest(outs []Outcome) *Outcome {
	var best *Outcome
	for i := range outs {
		o := &outs[i]
		if o.Decision.LimitName != "" && (best == nil || o.Decision.Remaining < best.Decision.Remaining) {
			best = o
		}
	}
	return best
}

// envoyLimit is e's limit named name as Envoy RLS reports it, or nil.
func (e *Entry) envoyLimit(name string) *rlsv3.RateLimitResponse_RateLimit {
	if name == "" {
		return nil
	}
	for i := range e.Spec.Limits {
		if e.Spec.Limits[i].Name == name {
			return e.envoyLimits[i]
		}
	}
	return nil
}

// envoyUnit is an RLS time unit and its length in milliseconds.
type envoyUnit struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	ms   int64
}

// envoyUnits are the units a limit is reported in, largest first.
var envoyUnits = []envoyUnit{
	{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * 3600 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, 3600 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, 60 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_SECOND, 1000},
}

// envoyRateLimit reports limit l of policy as an RLS RateLimit named "<policy>/<limit>".
//
// RLS units are fixed (SECOND, MINUTE, HOUR, DAY) while a policy's period is any duration,
// so this is an approximation: the unit is the largest one not longer than the period
// (SECOND for periods under a second) and requests_per_unit is floor(size * unit / period),
// at least 1, where size is the limit's burst when set, else its requests (the same quota
// the RateLimit-Policy header reports). 10 per 90s is thus reported as 6 per MINUTE, and
// 5 per 500ms as 10 per SECOND. The limit itself is enforced exactly; only this report is
// rounded.
func envoyRateLimit(policy string, l *snapshot.Limit) *rlsv3.RateLimitResponse_RateLimit {
	size := l.Burst
	if size <= 0 {
		size = l.Requests
	}
	u := envoyUnits[len(envoyUnits)-1]
	for _, c := range envoyUnits {
		if c.ms <= l.PeriodMs {
			u = c
			break
		}
	}
	return &rlsv3.RateLimitResponse_RateLimit{
		Name:            policy + "/" + l.Name,
		RequestsPerUnit: perUnit(size, u.ms, l.PeriodMs),
		Unit:            u.unit,
	}
}

// perUnit is floor(size * unitMs / periodMs) clamped to [1, MaxUint32], computed without
// overflow.
func perUnit(size, unitMs, periodMs int64) uint32 {
	if size <= 0 || periodMs <= 0 {
		return 1
	}
	hi, lo := bits.Mul64(uint64(size), uint64(unitMs)) //nolint:gosec // both positive
	// hi >= periodMs: the quotient does not fit in 64 bits.
	if hi >= uint64(periodMs) {
		return math.MaxUint32
	}
	q, _ := bits.Div64(hi, lo, uint64(periodMs))
	return uint32(min(max(q, 1), math.MaxUint32))
}

func clampUint32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// headerValues converts header fields to Envoy's form.
func headerValues(fields []HeaderField) []*corev3.HeaderValue {
	if len(fields) == 0 {
		return nil
	}
	out := make([]*corev3.HeaderValue, len(fields))
	values := make([]corev3.HeaderValue, len(fields)) // one allocation for all
	for i, f := range fields {
		values[i].Key, values[i].Value = f.Name, f.Value
		out[i] = &values[i]
	}
	return out
}

// logOutcomes logs, at V(1), every denial and every denial a shadow policy let through. The
// identity is not logged: it is often a credential such as an API key.
func (s *EnvoyServer) logOutcomes(domain string, descriptor int, outs []Outcome) {
	log := s.Log.V(1)
	if !log.Enabled() {
		return
	}
	for i := range outs {
		o := &outs[i]
		if o.Allowed && !o.Shadowed {
			continue
		}
		d := &o.Decision
		log.Info("rate limit denied", "front", FrontEnvoy, "domain", truncate(domain, maxLoggedDomain),
			"descriptor", descriptor, "policy", o.Entry.Name(), "result", o.Result(),
			"limit", d.DeniedBy, "source", string(d.Source), "retryAfter", d.RetryAfter.Round(time.Millisecond))
	}
}
