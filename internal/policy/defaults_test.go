package policy_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// TestDefaultStateKey: the state key shares one tag per (namespace, policy, identity), one
// key per limit, the same for every algorithm (SlidingWindow keeps both windows in one key).
func TestDefaultStateKey(t *testing.T) {
	cases := map[v1alpha1.Algorithm]string{
		v1alpha1.AlgorithmTokenBucket:   "{rl:${namespace}/${policy}:${identity}}:${limit}",
		v1alpha1.AlgorithmGCRA:          "{rl:${namespace}/${policy}:${identity}}:${limit}",
		v1alpha1.AlgorithmFixedWindow:   "{rl:${namespace}/${policy}:${identity}}:${limit}",
		v1alpha1.AlgorithmSlidingWindow: "{rl:${namespace}/${policy}:${identity}}:${limit}",
	}
	for a, want := range cases {
		t.Run(string(a), func(t *testing.T) {
			p := base()
			p.Spec.Algorithm = a
			p.Spec.Limits = []v1alpha1.Limit{limit("per-minute", 100, time.Minute, 0)}
			(policy.Rules{}).Default(p)
			if got := p.Spec.KeyLayout.State; got != want {
				t.Errorf("state key %q, want %q", got, want)
			}
			if got := (policy.Rules{}).StateKey(); got != want {
				t.Errorf("Rules{}.StateKey() = %q, want %q", got, want)
			}
			if p.Spec.KeyLayout.Idempotency != "" {
				t.Errorf("idempotency key %q defaulted without idempotency", p.Spec.KeyLayout.Idempotency)
			}
			compileOK(t, p)
		})
	}
}

// TestDefaultIdempotencyKey: the request-id key reuses the state key's hash tag, including a
// tag the user chose.
func TestDefaultIdempotencyKey(t *testing.T) {
	cases := []struct {
		name, state, want string
	}{
		{"default state key", "", "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}"},
		{"custom state tag", "{rl:${namespace}/tenant:${identity}}:${limit}", "{rl:${namespace}/tenant:${identity}}:idem:${requestId}"},
		{"custom state tag shared by policies", "{rl:${namespace}/${identity}}:rl:${limit}", "{rl:${namespace}/${identity}}:idem:${requestId}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			idempotent(p)
			if tc.state != "" {
				layout(p, tc.state, "", 0)
			}
			(policy.Rules{}).Default(p)
			if got := p.Spec.KeyLayout.Idempotency; got != tc.want {
				t.Errorf("idempotency key %q, want %q", got, tc.want)
			}
			compileOK(t, p)
		})
	}
}

// TestDefaultTTL: the TTL is the algorithm's horizon, rounded up to a whole second, or to a
// whole millisecond below one second.
func TestDefaultTTL(t *testing.T) {
	cases := []struct {
		name   string
		algo   v1alpha1.Algorithm
		limits []v1alpha1.Limit
		want   time.Duration
	}{
		{"FixedWindow: the window", v1alpha1.AlgorithmFixedWindow,
			[]v1alpha1.Limit{limit("m", 100, time.Minute, 0)}, time.Minute},
		{"FixedWindow: the longest window", v1alpha1.AlgorithmFixedWindow,
			[]v1alpha1.Limit{limit("s", 10, time.Second, 0), limit("h", 1000, time.Hour, 0)}, time.Hour},
		{"FixedWindow: 1.5s rounds up to 2s", v1alpha1.AlgorithmFixedWindow,
			[]v1alpha1.Limit{limit("x", 10, 1500*time.Millisecond, 0)}, 2 * time.Second},
		{"FixedWindow: 250ms stays in ms", v1alpha1.AlgorithmFixedWindow,
			[]v1alpha1.Limit{limit("x", 10, 250*time.Millisecond, 0)}, 250 * time.Millisecond},
		{"SlidingWindow: two of the longest window", v1alpha1.AlgorithmSlidingWindow,
			[]v1alpha1.Limit{limit("m", 100, time.Minute, 0), limit("h", 2000, time.Hour, 0)}, 2 * time.Hour},
		{"SlidingWindow: 1ms windows", v1alpha1.AlgorithmSlidingWindow,
			[]v1alpha1.Limit{limit("x", 1, time.Millisecond, 0)}, 2 * time.Millisecond},
		{"TokenBucket: burst*period/requests", v1alpha1.AlgorithmTokenBucket,
			[]v1alpha1.Limit{limit("s", 10, time.Second, 20)}, 2 * time.Second},
		{"TokenBucket: burst defaults to requests", v1alpha1.AlgorithmTokenBucket,
			[]v1alpha1.Limit{limit("m", 3, time.Minute, 0)}, time.Minute},
		{"TokenBucket: 333.333ms rounds up to 334ms", v1alpha1.AlgorithmTokenBucket,
			[]v1alpha1.Limit{limit("s", 3, time.Second, 1)}, 334 * time.Millisecond},
		{"GCRA: burst*period/requests", v1alpha1.AlgorithmGCRA,
			[]v1alpha1.Limit{limit("s", 5, time.Second, 10)}, 2 * time.Second},
		{"GCRA: 2.333334s rounds up to 3s", v1alpha1.AlgorithmGCRA,
			[]v1alpha1.Limit{limit("x", 3, 7*time.Second, 1)}, 3 * time.Second},
		{"GCRA: the largest of several limits", v1alpha1.AlgorithmGCRA,
			[]v1alpha1.Limit{limit("s", 10, time.Second, 100), limit("m", 600, time.Minute, 60)}, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			p.Spec.Algorithm, p.Spec.Limits = tc.algo, tc.limits
			(policy.Rules{}).Default(p)
			if p.Spec.KeyLayout.TTL == nil {
				t.Fatal("no TTL defaulted")
			}
			if got := p.Spec.KeyLayout.TTL.Duration; got != tc.want {
				t.Errorf("TTL %s, want %s", got, tc.want)
			}
			compileOK(t, p)
		})
	}
}

// TestDefaultKeepsUserFields: fields the user set are never changed, even when Compile will
// refuse them, and nothing outside keyLayout is touched.
func TestDefaultKeepsUserFields(t *testing.T) {
	cases := []struct {
		name              string
		state, idem       string
		ttl               time.Duration
		wantState, wantID string
		wantTTL           time.Duration
	}{
		{"all three set", "{t:${identity}}:${limit}", "{t:${identity}}:r:${requestId}", time.Hour,
			"{t:${identity}}:${limit}", "{t:${identity}}:r:${requestId}", time.Hour},
		{"too short a TTL is kept", "", "", time.Millisecond,
			(policy.Rules{}).StateKey(), "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}", time.Millisecond},
		{"a broken state key is kept", "{rl:${user}", "", 0,
			"{rl:${user}", "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}", 2 * time.Second},
		{"an idempotency key on another tag is kept", "", otherTagIdem, 0,
			(policy.Rules{}).StateKey(), otherTagIdem, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			idempotent(p)
			layout(p, tc.state, tc.idem, tc.ttl)
			before := p.DeepCopy()
			(policy.Rules{}).Default(p)
			kl := p.Spec.KeyLayout
			if kl.State != tc.wantState || kl.Idempotency != tc.wantID || kl.TTL == nil || kl.TTL.Duration != tc.wantTTL {
				t.Errorf("layout after Default: state %q idempotency %q ttl %v; want %q %q %s",
					kl.State, kl.Idempotency, kl.TTL, tc.wantState, tc.wantID, tc.wantTTL)
			}
			after := p.DeepCopy()
			after.Spec.KeyLayout, before.Spec.KeyLayout = nil, nil
			// The only other change allowed: annotations recording what Default filled in.
			delete(after.Annotations, policy.AnnotationDefaultedStateKey)
			delete(after.Annotations, policy.AnnotationDefaultedTTL)
			if len(after.Annotations) == 0 {
				after.Annotations = before.Annotations
			}
			if !equality.Semantic.DeepEqual(before, after) {
				t.Errorf("Default changed fields outside keyLayout")
			}
		})
	}
}

// TestDefaultIdempotent: defaulting twice gives what defaulting once gives, for the base
// variations and every sample.
func TestDefaultIdempotent(t *testing.T) {
	for name, p := range accepted(t) {
		t.Run(name, func(t *testing.T) {
			once := p.DeepCopy()
			(policy.Rules{}).Default(once)
			twice := once.DeepCopy()
			(policy.Rules{}).Default(twice)
			if !equality.Semantic.DeepEqual(once, twice) {
				t.Errorf("Default is not idempotent:\nonce  %+v\ntwice %+v", once.Spec.KeyLayout, twice.Spec.KeyLayout)
			}
		})
	}
}
