package envoyrls

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
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
	// pending are the admissions waiting for their stream's end (ends.go).
	pending pendingEnds
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// Register adds the RLS v3 service to g.
func (s *Service) Register(g *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(g, s)
}

// descriptorPlan is one descriptor of a request, matched and with its checks prepared, and
// once decided its outcomes.
type descriptorPlan struct {
	entries []requestread.DescriptorEntry
	rules   []*engine.Rule
	checks  []engine.Check // parallel to rules
	outs    []engine.Outcome
}

// ShouldRateLimit decides every descriptor of req. Each descriptor is decided on its own (as
// Envoy's reference service does): a descriptor within its limits is debited even when
// another descriptor of the same request is over its limit. Malformed requests (no domain,
// no descriptors, a refused cost) are refused whole, with InvalidArgument, before anything
// is debited. A descriptor's own hits_addend overrides the request's, and set to 0 asks
// for a peek: the descriptor is decided as usual and nothing is debited; is_negative_hits
// (a refund) is refused on a descriptor that a policy matches, since the scripts only
// debit; a descriptor's limit override is ignored: the policies alone set limits. A request
// whose descriptors carry StreamDoneKey is the call Envoy makes when a stream ends: it
// settles and releases what the stream's admission reserved (ends.go) and debits nothing.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, span := tracing.StartGRPC(ctx, FrontName)
	defer span.End()
	if streamDone(req) {
		return s.ended(ctx, span, req)
	}
	f := s.front()
	set, plans, err := s.plan(req)
	if err != nil {
		return nil, grpcError(f.Refuse(span, err))
	}
	v := f.Decided(span, s.decideAll(ctx, plans))
	s.remember(ctx, plans, v.Kind == verdict.Denied)
	return response(&v, plans, s.rateLimitsOf(set)), nil
}

// front is the verdict front of this service.
func (s *Service) front() verdict.Front {
	return verdict.Front{Name: FrontName, Engine: s.Engine, Log: s.Log}
}

// plan validates req and prepares every descriptor's checks on the snapshot in force.
func (s *Service) plan(req *rlsv3.RateLimitRequest) (*engine.Set, []descriptorPlan, error) {
	if err := validate(req); err != nil {
		return nil, nil, err
	}
	set, err := s.Engine.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	plans, err := planRequest(set, req)
	return set, plans, err
}

// grpcError is the gRPC status of a request that was not judged.
func grpcError(v verdict.Verdict) error {
	if v.Kind == verdict.Unavailable {
		return status.Error(codes.Unavailable, v.Message)
	}
	return status.Error(codes.InvalidArgument, v.Message)
}

// decideAll decides every descriptor and returns the outcomes of all of them, in order.
func (s *Service) decideAll(ctx context.Context, plans []descriptorPlan) []engine.Outcome {
	var all []engine.Outcome
	for i := range plans {
		p := &plans[i]
		p.outs = s.decide(ctx, p)
		if len(plans) == 1 {
			return p.outs // the common case: no copy
		}
		all = append(all, p.outs...)
	}
	return all
}

// response answers v: OVER_LIMIT when a descriptor is over its limit, each descriptor's
// status, and v's RateLimit headers.
func response(v *verdict.Verdict, plans []descriptorPlan, limits *rateLimits) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{
		OverallCode:          rlsv3.RateLimitResponse_OK,
		Statuses:             make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(plans)),
		ResponseHeadersToAdd: headerValues(v.Fields),
	}
	if v.Kind == verdict.Denied {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	statuses := make([]descriptorStatusAlloc, len(plans)) // one allocation for all
	for i := range plans {
		resp.Statuses[i] = statuses[i].fill(plans[i].outs, limits)
	}
	return resp
}

// MaxDescriptors bounds the descriptors of one request: each matched one costs a Redis call.
const MaxDescriptors = 64

// validate checks the request's shape.
func validate(req *rlsv3.RateLimitRequest) error {
	if req.GetDomain() == "" {
		return errors.New("domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return errors.New("descriptors must not be empty")
	}
	if n := len(req.GetDescriptors()); n > MaxDescriptors {
		return fmt.Errorf("%d descriptors: at most %d per request", n, MaxDescriptors)
	}
	return nil
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
			return nil, fmt.Errorf("descriptor %d: is_negative_hits (returning hits) is not supported", i)
		}
		if err := p.prepare(req.GetDomain(), hitsAddend(req, d)); err != nil {
			return nil, fmt.Errorf("descriptor %d, %w", i, err)
		}
		if peeks(d) {
			for j := range p.checks {
				p.checks[j].Peek, p.checks[j].RequestID = true, ""
			}
		}
	}
	return plans, nil
}

// prepare reads the check of every policy p matched, for a descriptor of domain that
// states the cost hits.
func (p *descriptorPlan) prepare(domain string, hits int64) error {
	p.checks = make([]engine.Check, len(p.rules))
	// Only a descriptor naming its request can be settled when its stream ends (ends.go).
	settles := entryValue(p.entries, RequestIDKey) != ""
	for j, r := range p.rules {
		c, err := r.DescriptorCheck(domain, p.entries, hits)
		if err != nil {
			return fmt.Errorf("policy %s: %w", r.Name(), err)
		}
		c.Settles = settles
		p.checks[j] = c
	}
	return nil
}

// descriptorEntries converts a descriptor's entries; a nil descriptor has none.
func descriptorEntries(d *ratelimitv3.RateLimitDescriptor) []requestread.DescriptorEntry {
	in := d.GetEntries()
	out := make([]requestread.DescriptorEntry, len(in))
	for i, e := range in {
		out[i] = requestread.DescriptorEntry{Key: e.GetKey(), Value: e.GetValue()}
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

// peeks reports whether d asks for a peek: its own hits_addend set to 0. The request's
// hits_addend cannot say it: 0 there is "not set", which Envoy's API reads as 1. A peek is
// decided at the policy's default cost and debits nothing.
func peeks(d *ratelimitv3.RateLimitDescriptor) bool {
	h := d.GetHitsAddend()
	return h != nil && h.GetValue() == 0
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
	if l := limits.of(rep.Tier, d.LimitName); l != nil {
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
