package envoyrls

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// FrontName names the Envoy RLS front in metrics and logs.
const FrontName = "envoy"

// Service is the Envoy RLS v3 RateLimitService: it answers ShouldRateLimit calls from the
// Engine, as the package documentation describes. Safe for concurrent use; not to be copied.
type Service struct {
	// Engine decides every check.
	Engine *engine.Engine
	// Log receives denials at V(1). Identities are never logged.
	Log logr.Logger

	// limits are the reported limits of the snapshot in force (rateLimitsOf).
	limits atomic.Pointer[rateLimits]
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// Register adds the RLS v3 service to g.
func (s *Service) Register(g *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(g, s)
}

// maxLoggedDomain bounds the domain text written to logs: the domain is caller input.
const maxLoggedDomain = 128

// descriptorPlan is one descriptor of a request, matched and with its checks prepared.
type descriptorPlan struct {
	entries []engine.DescriptorEntry
	rules   []*engine.Rule
	checks  []engine.Check // parallel to rules
}

// ShouldRateLimit decides every descriptor of req. Each descriptor is decided on its own (as
// Envoy's reference service does): a descriptor within its limits is debited even when
// another descriptor of the same request is over its limit. Malformed requests (no domain,
// no descriptors, a refused cost) are refused whole, with InvalidArgument, before anything
// is debited. A descriptor's own hits_addend overrides the request's; is_negative_hits
// (a refund) is refused on a descriptor that a policy matches, since the scripts only
// debit; a descriptor's limit override is ignored: the policies alone set limits.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, span := tracing.StartGRPC(ctx, FrontName)
	defer span.End()
	set, err := s.validate(req)
	if err != nil {
		tracing.EndFront(span, tracing.ResultError, 0)
		return nil, err
	}
	plans, err := planRequest(set, req)
	if err != nil {
		tracing.EndFront(span, tracing.ResultError, 0)
		return nil, err
	}
	limits := s.rateLimitsOf(set)
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(plans)),
	}
	statuses := make([]descriptorStatusAlloc, len(plans)) // one allocation for all
	var all []engine.Outcome                              // the outcomes of every descriptor, for the headers
	for i := range plans {
		outs := s.decide(ctx, &plans[i])
		st := statuses[i].fill(outs, limits)
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = st
		engine.LogDenials(s.Log, FrontName, outs, "domain", loggedDomain(req.GetDomain()), "descriptor", i)
		if len(plans) == 1 {
			all = outs // the common case: no copy
		} else {
			all = append(all, outs...)
		}
	}
	resp.ResponseHeadersToAdd = headerValues(ratelimitheaders.For(all))
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		tracing.EndFront(span, tracing.ResultDenied, len(all))
	} else {
		tracing.EndFront(span, tracing.ResultAllowed, len(all))
	}
	return resp, nil
}

// MaxDescriptors bounds the descriptors of one request: each matched one costs a Redis call.
const MaxDescriptors = 64

// validate checks the request's shape and returns the snapshot in force.
func (s *Service) validate(req *rlsv3.RateLimitRequest) (*engine.Set, error) {
	if req.GetDomain() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "descriptors must not be empty")
	}
	if n := len(req.GetDescriptors()); n > MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d per request", n, MaxDescriptors)
	}
	var set *engine.Set
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
func planRequest(set *engine.Set, req *rlsv3.RateLimitRequest) ([]descriptorPlan, error) {
	plans := make([]descriptorPlan, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		p := &plans[i]
		p.entries = descriptorEntries(d)
		p.rules = set.MatchDescriptor(req.GetDomain(), p.entries)
		if len(p.rules) == 0 {
			continue
		}
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument,
				"descriptor %d: is_negative_hits (returning hits) is not supported", i)
		}
		hits := hitsAddend(req, d)
		p.checks = make([]engine.Check, len(p.rules))
		for j, r := range p.rules {
			c, err := r.DescriptorCheck(req.GetDomain(), p.entries, hits)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d, policy %s: %v", i, r.Name(), err)
			}
			p.checks[j] = c
		}
	}
	return plans, nil
}

// descriptorEntries converts a descriptor's entries; a nil descriptor has none.
func descriptorEntries(d *ratelimitv3.RateLimitDescriptor) []engine.DescriptorEntry {
	in := d.GetEntries()
	out := make([]engine.DescriptorEntry, len(in))
	for i, e := range in {
		out[i] = engine.DescriptorEntry{Key: e.GetKey(), Value: e.GetValue()}
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

// decide checks one descriptor against its policies; none matched is no outcome.
func (s *Service) decide(ctx context.Context, p *descriptorPlan) []engine.Outcome {
	if len(p.rules) == 0 {
		return nil
	}
	return s.Engine.DecideAll(ctx, FrontName, p.rules, p.checks)
}

// descriptorStatusAlloc holds one descriptor's status and its duration, so that a response
// allocates them for all its descriptors at once.
type descriptorStatusAlloc struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	reset  durationpb.Duration
}

// fill answers one descriptor: OVER_LIMIT when an outcome denied, with the reported limit
// (the denying one, else the tightest that Redis answered for).
func (a *descriptorStatusAlloc) fill(outs []engine.Outcome, limits *rateLimits) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &a.status
	st.Code = rlsv3.RateLimitResponse_OK
	rep := engine.Denial(outs)
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
	if l := limits.of(rep.Rule, d.LimitName); l != nil {
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
func tightest(outs []engine.Outcome) *engine.Outcome {
	var best *engine.Outcome
	for i := range outs {
		o := &outs[i]
		if o.Decision.LimitName != "" && (best == nil || o.Decision.Remaining < best.Decision.Remaining) {
			best = o
		}
	}
	return best
}

func clampUint32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// headerValues converts header fields to Envoy's form.
func headerValues(fields []ratelimitheaders.Field) []*corev3.HeaderValue {
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

// loggedDomain is domain as logged: at most maxLoggedDomain bytes of it, then "...".
func loggedDomain(domain string) string {
	if len(domain) <= maxLoggedDomain {
		return domain
	}
	return domain[:maxLoggedDomain] + "..."
}
