package envoyrls_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// envoyFuzzServer is a Service whose limiter points at a closed port, over policies
// with each failure mode, idempotency, a cost maximum, a Fixed identity and a Reject.
func envoyFuzzServer(t testing.TB) *envoyrls.Service {
	t.Helper()
	maxCost := int64(5)
	e := sidecartest.ClosedEngine(t,
		sidecartest.EnvoyPolicy("closed", "/c", 5, time.Second),
		sidecartest.EnvoyPolicy("open", "", 5, time.Second, func(s *v1alpha1.RateLimitPolicySpec) {
			s.FailureMode = v1alpha1.FailureModeFailOpen
			s.Cost = &v1alpha1.Cost{Default: 1, Max: &maxCost}
			s.Idempotency = &v1alpha1.Idempotency{DescriptorKey: "id", TTL: metav1.Duration{Duration: time.Minute}}
		}),
		sidecartest.EnvoyPolicy("fixed", "/f", 5, time.Second, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
		}),
		sidecartest.EnvoyPolicy("strict", "/c", 5, time.Second, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.OnMissing = v1alpha1.MissingIdentityReject
			s.Identity.Sources[0].Descriptor.Key = "k"
		}),
	)
	return &envoyrls.Service{Engine: e, Log: logr.Discard()}
}

// envoyFuzzRequest builds a request of n descriptors (0..3) from the fuzzed parts.
func envoyFuzzRequest(domain, k1, v1, k2, v2 string, hits uint32, descHits uint64, flags uint8) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
	n := int(flags & 3)
	for i := range n {
		d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k1, Value: v1}}}
		if i > 0 || flags&4 != 0 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k2, Value: v2})
		}
		if flags&8 != 0 {
			d.HitsAddend = wrapperspb.UInt64(descHits)
		}
		d.IsNegativeHits = flags&16 != 0
		if flags&32 != 0 && i == 1 {
			d = nil // a nil element, possible only for in-process callers
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

func FuzzEnvoyRequest(f *testing.F) {
	f.Add("edge", "route", "/c", "user", "alice", uint32(0), uint64(0), uint8(5))
	f.Add("edge", "route", "/f", "user", "", uint32(1), uint64(0), uint8(1))
	f.Add("edge", "route", "/x", "id", "req-1", uint32(3), uint64(9), uint8(13))
	f.Add("edge", "route", "/x", "id", "req-1", uint32(0), uint64(1<<63), uint8(9))
	f.Add("edge", "route", "/c", "k", "v", uint32(1<<31), uint64(0), uint8(3))
	f.Add("edge", "route", "/c", "k", "v", uint32(1), uint64(0), uint8(17))
	f.Add("edge", "route", "\xff\xfe", "user", "\x00{}\n", uint32(0), uint64(0), uint8(38))
	f.Add("", "route", "/c", "user", "u", uint32(0), uint64(0), uint8(1))
	f.Add("edge", "", "", "", "", uint32(0), uint64(0), uint8(0))
	f.Add("\xc3\x28", "route", strings.Repeat("x", 1<<16), "user", strings.Repeat("{", 1<<12), uint32(0), uint64(0), uint8(6))
	s := envoyFuzzServer(f)
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, hits uint32, descHits uint64, flags uint8) {
		req := envoyFuzzRequest(domain, k1, v1, k2, v2, hits, descHits, flags)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := s.ShouldRateLimit(ctx, req)
		envoyCheckFuzzAnswer(t, req, resp, err)
	})
}

// envoyCheckFuzzAnswer checks what holds for every answer: an error is InvalidArgument (the
// snapshot is loaded) and is given exactly for the malformed requests; a response has one
// status per descriptor, an overall code that agrees with them, and always marshals (nothing
// of the caller's input, possibly invalid UTF-8, is echoed into it).
func envoyCheckFuzzAnswer(t *testing.T, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse, err error) {
	t.Helper()
	if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("malformed request answered %v, %v; want InvalidArgument", resp, err)
		}
		return
	}
	if err != nil {
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("error %v, want InvalidArgument or an answer", err)
		}
		return
	}
	if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
	}
	over := false
	for _, st := range resp.GetStatuses() {
		over = over || st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT
		if c := st.GetCode(); c != rlsv3.RateLimitResponse_OK && c != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("descriptor code %v", c)
		}
	}
	if over != (resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT) {
		t.Fatalf("overall %v disagrees with statuses %v", resp.GetOverallCode(), resp.GetStatuses())
	}
	if _, err := proto.Marshal(resp); err != nil {
		t.Fatalf("response does not marshal: %v", err)
	}
}
