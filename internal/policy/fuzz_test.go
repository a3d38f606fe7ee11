package policy_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// FuzzCompile drives policy validation (what the webhook and the controller share) with
// hostile key templates, limits and algorithms: it never panics, every refusal names a field,
// and whatever it accepts keeps every key of a call on one slot for any identity (the empty
// Shared one included), with a TTL no shorter than the algorithm's horizon, and is published
// exactly: the snapshot entry compiles back to the same policy.
func FuzzCompile(f *testing.F) {
	f.Add("TokenBucket", "{rl:${namespace}/${policy}:${identity}}:${limit}", "", int64(10), int64(1000), int64(0), int64(2), "a-b")
	f.Add("GCRA", "{rl:${namespace}/x:${identity}}:${limit}", "{rl:${namespace}/x:${identity}}:i:${requestId}", int64(3), int64(1000), int64(2), int64(1), "")
	f.Add("SlidingWindow", "{rl:${identity}}:${limit}:${slot}", "{rl:${identity}}:idem:${requestId}", int64(5), int64(60000), int64(0), int64(0), "{x}")
	f.Add("GCRA", "rl:${identity}:${limit}", "", int64(1), int64(1), int64(3), int64(1), "\x00")
	f.Add("FixedWindow", "{}${identity}", "{${requestId}}", int64(0), int64(-5), int64(-1), int64(0), "")
	f.Add("TokenBucket", "{${identity}}:${limit}", "", int64(10), int64(1900), int64(0), int64(1), "")
	f.Fuzz(func(t *testing.T, alg, state, idem string, requests, periodUs, burst, limits int64, identity string) {
		p := base()
		p.Spec.Algorithm = v1alpha1.Algorithm(alg)
		p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: state, Idempotency: idem}
		p.Spec.Limits = nil
		for i := range limits%4 + 1 {
			l := v1alpha1.Limit{Name: string(rune('a' + i)), Requests: requests + i,
				Period: metav1.Duration{Duration: time.Duration(periodUs*(i+1)) * time.Microsecond}}
			if burst != 0 {
				l.Burst = ptr.To(burst)
			}
			p.Spec.Limits = append(p.Spec.Limits, l)
		}
		if idem != "" {
			p.Spec.Idempotency = &v1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
		}
		(policy.Rules{}).Default(p)
		compiled, errs := (policy.Rules{}).CompileAsIs(p)
		for _, e := range errs {
			if e.Field == "" {
				t.Fatalf("refusal without a field: %v", e)
			}
		}
		if compiled == nil {
			return
		}
		for _, id := range []string{identity, ""} {
			keys := compiled.Keys(id, "req")
			for _, k := range keys {
				if !strings.HasPrefix(k, keylayout.ScopeOf(keylayout.DefaultPrefix, p.Namespace)) {
					t.Fatalf("accepted %q/%q: key %q outside namespace %s's scope", state, idem, k, p.Namespace)
				}
			}
			for _, k := range keys[1:] {
				if keylayout.Slot(k) != keylayout.Slot(keys[0]) {
					t.Fatalf("accepted %q/%q: keys %q and %q of one call are on different slots", state, idem, keys[0], k)
				}
			}
		}
		if h := limiter.Horizon(compiled.Algorithm, compiled.Limits); compiled.TTL < h {
			t.Fatalf("accepted a TTL %s below the horizon %s", compiled.TTL, h)
		}
		built, _ := (policy.Rules{}).Compile(p)
		published, err := limiterspec.Compile(p.Namespace, built.Entry, false)
		if err != nil || !reflect.DeepEqual(published.Spec, compiled.Spec) {
			t.Fatalf("accepted %+v, but its snapshot entry compiles to %+v (%v)", compiled.Spec, published, err)
		}
	})
}
