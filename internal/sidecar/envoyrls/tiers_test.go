package envoyrls_test

import (
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// On Envoy RLS a tier is chosen by the descriptor's entries, and the reply reports the
// chosen tier's limit: current_limit and the RateLimit headers.
func TestEnvoyTiers(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 2, time.Minute,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Tiers = []v1alpha1.Tier{{Name: "pro", When: `"plan" in descriptors && descriptors["plan"] == "pro"`,
				Limits: []v1alpha1.Limit{{Name: "per-period", Requests: 6, Period: metav1.Duration{Duration: time.Minute}}}}}
		}))
	for _, tc := range []struct {
		user, plan string
		want       int
	}{{"free", "", 2}, {"pro", "pro", 6}, {"other", "gold", 2}} {
		kv := []string{"route", "/api", "user", tc.user}
		if tc.plan != "" {
			kv = append(kv, "plan", tc.plan)
		}
		req := envoyReq(0, envoyDesc(kv...))
		admitted, last := h.envoyCalls(t, req, tc.want+3)
		if admitted != tc.want {
			t.Errorf("%s: %d admitted, want %d", tc.user, admitted, tc.want)
		}
		envoyWantLimit(t, tc.user, last.GetStatuses()[0], "api/per-period", uint32(tc.want), rlsv3.RateLimitResponse_RateLimit_MINUTE)
		if got := envoyHeader(last, ratelimitheaders.HeaderPolicy); got != `"api/per-period";q=`+strconv.Itoa(tc.want)+`;w=60` {
			t.Errorf("%s: RateLimit-Policy %q, want q=%d", tc.user, got, tc.want)
		}
	}
}

// On Envoy RLS a RateLimitOverride gives the caller named by the descriptor entry its
// limits, reported as current_limit, whatever the entries say of its tier.
func TestEnvoyOverrides(t *testing.T) {
	p := sidecartest.EnvoyPolicy("api", "/api", 2, time.Minute)
	rig := sidecartest.Start(t, limiter.Options{}, p)
	o := &v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Name: "vip"},
		Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: "api", Callers: []v1alpha1.OverrideCaller{{Value: "vip"}},
			Limits: []v1alpha1.Limit{{Name: "per-period", Requests: 5, Period: metav1.Duration{Duration: time.Minute}}}}}
	doc := sidecartest.Reseal(t, snapshottest.WithOverrides(t, snapshottest.Build(t, sidecartest.Namespace, rig.Redis.Addr(), p), o))
	if err := rig.Store.Load(doc, "test"); err != nil {
		t.Fatal(err)
	}
	log, _ := sidecartest.Logger()
	h := &envoyHarness{t: t, client: envoyServe(t, &envoyrls.Service{Log: log, Engine: rig.Engine}), store: rig.Store, reg: rig.Reg}
	for _, tc := range []struct {
		user string
		want int
	}{{"vip", 5}, {"someone", 2}} {
		req := envoyReq(0, envoyDesc("route", "/api", "user", tc.user))
		admitted, last := h.envoyCalls(t, req, tc.want+3)
		if admitted != tc.want {
			t.Errorf("%s: %d admitted, want %d", tc.user, admitted, tc.want)
		}
		envoyWantLimit(t, tc.user, last.GetStatuses()[0], "api/per-period", uint32(tc.want), rlsv3.RateLimitResponse_RateLimit_MINUTE)
	}
}

// envoyCalls sends req n times and returns how many were admitted and the last response.
func (h *envoyHarness) envoyCalls(t *testing.T, req *rlsv3.RateLimitRequest, n int) (int, *rlsv3.RateLimitResponse) {
	t.Helper()
	admitted := 0
	var last *rlsv3.RateLimitResponse
	for range n {
		last = h.envoyCall(t, req)
		if last.GetOverallCode() == codeOK {
			admitted++
		}
	}
	return admitted, last
}
