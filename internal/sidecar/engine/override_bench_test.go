package engine_test

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// tenThousand are the overrides of BenchmarkOverrides: 100 RateLimitOverrides of 100
// callers each ("customer-<i>-<j>"), half giving tier pro and half limits of their own.
func tenThousand() []*v1alpha1.RateLimitOverride {
	out := make([]*v1alpha1.RateLimitOverride, 100)
	for i := range out {
		o := &v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Namespace: sidecartest.Namespace, Name: fmt.Sprintf("plan-%03d", i)},
			Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: "plans", Tier: "pro"}}
		if i%2 == 1 {
			o.Spec.Tier = ""
			o.Spec.Limits = []v1alpha1.Limit{{Name: "per-minute", Requests: int64(1000 * (1 + i%4)), Period: metav1.Duration{Duration: time.Minute}}}
		}
		for j := range 100 {
			o.Spec.Callers = append(o.Spec.Callers, v1alpha1.OverrideCaller{Value: fmt.Sprintf("customer-%03d-%03d", i, j)})
		}
		out[i] = o
	}
	return out
}

// overridesDoc is the snapshot of a tiered policy "plans" with the 10,000 overrides.
func overridesDoc(b *testing.B) []byte {
	p := sidecartest.Policy("plans", 10, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Tiers = []v1alpha1.Tier{{Name: "pro", When: `headers["x-plan"] == "pro"`,
			Limits: []v1alpha1.Limit{{Name: "per-minute", Requests: 500, Period: metav1.Duration{Duration: time.Minute}}}}}
	})
	s := snapshottest.WithOverrides(b, snapshottest.Build(b, sidecartest.Namespace, "127.0.0.1:6379", p), tenThousand()...)
	return sidecartest.Reseal(b, s)
}

// BenchmarkOverrides: what 10,000 overridden callers in one namespace cost a sidecar. load
// is a reload of the snapshot (parse, compile, index), reporting the document's bytes and
// the heap it holds per caller; plan-* are the per-request cost of reading a request's
// checks for an overridden caller and for one without an override, against plan-plain, the
// same policy without overrides, in the same run.
func BenchmarkOverrides(b *testing.B) {
	doc := overridesDoc(b)
	b.Run("load", func(b *testing.B) {
		var before, after runtime.MemStats
		var kept *engine.Store
		for b.Loop() {
			b.StopTimer()
			runtime.KeepAlive(kept) // the previous load is garbage from here
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.StartTimer()
			kept = &engine.Store{Namespace: sidecartest.Namespace}
			if err := kept.Load(doc, "bench"); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.StartTimer()
		}
		b.ReportMetric(float64(len(doc)), "snapshot-bytes")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/10000, "heap-B/caller")
		runtime.KeepAlive(kept)
	})
	with := &engine.Store{Namespace: sidecartest.Namespace}
	if err := with.Load(doc, "bench"); err != nil {
		b.Fatal(err)
	}
	plain := sidecartest.Set(b, sidecartest.Policy("plans", 10))
	path, _, err := requestread.ParseTarget(http.MethodGet, "/api/plans/items")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, tier string
		set             *engine.Set
	}{
		{"plan-plain", "customer-042-007", snapshot.DefaultTier, plain},
		{"plan-overridden", "customer-042-007", "pro", with.Current()},
		{"plan-not-overridden", "someone-else", snapshot.DefaultTier, with.Current()},
	} {
		h := http.Header{}
		h.Set("X-API-Key", tc.key)
		req := &requestread.HTTPRequest{Method: http.MethodGet, Host: "api.example.com", Path: path, Header: h, Peer: "10.0.0.1:5000"}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, checks, err := tc.set.PlanHTTP(req)
				if err != nil || len(checks) != 1 || checks[0].Tier.Name != tc.tier {
					b.Fatal(err, checks)
				}
			}
		})
	}
}
