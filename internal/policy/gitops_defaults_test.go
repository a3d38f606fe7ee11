package policy_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// TestDefaultFollowsSpecForDefaultedFields: a GitOps user who never wrote a TTL or key layout
// edits the period or the algorithm; the values Default chose follow, so the edit is
// accepted instead of refused for a stale TTL. Values the user wrote stay as written.
func TestDefaultFollowsSpecForDefaultedFields(t *testing.T) {
	p := base()
	(policy.Rules{}).Default(p)
	firstTTL := p.Spec.KeyLayout.TTL.Duration

	p.Spec.Limits[0].Period = metav1.Duration{Duration: time.Hour}
	p.Spec.Algorithm = v1alpha1.AlgorithmSlidingWindow
	p.Spec.Limits[0].Burst = nil
	(policy.Rules{}).Default(p)
	kl := p.Spec.KeyLayout
	if kl.TTL.Duration <= firstTTL || kl.State != (policy.Rules{}).StateKey() {
		t.Fatalf("after the edit: ttl %s (was %s), state %q; want the new horizon and the SlidingWindow layout", kl.TTL, firstTTL, kl.State)
	}
	if _, errs := (policy.Rules{}).CompileAsIs(p); len(errs) > 0 {
		t.Fatalf("edited policy refused: %v", errs)
	}

	// The user now writes a TTL: from then on it is theirs.
	kl.TTL = &metav1.Duration{Duration: 5 * time.Hour}
	(policy.Rules{}).Default(p)
	p.Spec.Limits[0].Period = metav1.Duration{Duration: 2 * time.Hour}
	(policy.Rules{}).Default(p)
	if kl.TTL.Duration != 5*time.Hour {
		t.Fatalf("a TTL the user wrote was changed to %s", kl.TTL)
	}
	if _, ok := p.Annotations[policy.AnnotationDefaultedTTL]; ok {
		t.Fatal("the defaulted-ttl annotation survived a user-written TTL")
	}
}
