package redisbackend

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// TestBackendReady: Ready is True only when every reported condition is, and otherwise
// carries the first failing one's reason and message; UsersReady counts only when reported.
func TestBackendReady(t *testing.T) {
	b := &v1alpha1.RedisBackend{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Status: v1alpha1.RedisBackendStatus{Namespaces: []string{"a", "b"}}}
	setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionTrue, v1alpha1.ReasonConnected, "answers")
	setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded, "loaded")
	setBackendReady(b)
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 || c.Message != "serves 2 namespace(s)" {
		t.Fatalf("Ready %+v", c)
	}
	setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionUnknown, v1alpha1.ReasonNotChecked, "not checked yet")
	setBackendCondition(b, v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonNamespaceConflict, "c")
	setBackendReady(b)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse ||
		c.Reason != v1alpha1.ReasonNotChecked || c.Message != "UsersReady: not checked yet" {
		t.Fatalf("Ready with UsersReady unknown: %+v", c)
	}
	setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonCredentialsUnavailable, "no Secret")
	setBackendReady(b)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonCredentialsUnavailable {
		t.Fatalf("Ready with Connected False: %+v", c)
	}
}

func TestJoinLimited(t *testing.T) {
	if got := joinLimited([]string{"a", "b", "c"}, 2); got != "a, b and 1 more" {
		t.Errorf("joinLimited: %q", got)
	}
}
