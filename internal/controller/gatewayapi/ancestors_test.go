package gatewayapi

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// TestAncestorMessageBounded: a long ancestor message is cut at a rune boundary within the
// bound, marked with an ellipsis; a short one is kept.
func TestAncestorMessageBounded(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got := truncate(long)
	if len(got) > maxMessage || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("truncate: %d bytes, valid %t, suffix %q", len(got), utf8.ValidString(got), got[len(got)-3:])
	}
	if truncate("short") != "short" {
		t.Errorf("a short message changed")
	}
}

// TestSetAncestorsKeepsTransitions: re-reporting an ancestor keeps each condition's
// transition time while its status holds, and moves it when the status changes.
func TestSetAncestorsKeepsTransitions(t *testing.T) {
	g, k, ns := gwapiv1.Group(gwapiv1.GroupName), gwapiv1.Kind("Gateway"), gwapiv1.Namespace("shop")
	ref := gwapiv1.ParentReference{Group: &g, Kind: &k, Namespace: &ns, Name: "gw"}
	res := func(ok bool) *attachment.Result {
		return &attachment.Result{Ancestors: []attachment.Ancestor{{Ref: ref,
			Accepted: attachment.Condition{OK: true, Reason: "Accepted", Message: "attached"},
			Enforced: attachment.Condition{OK: ok, Reason: "Enforced", Message: "governs"}}}}
	}
	p := &v1alpha1.RateLimitPolicy{}
	SetAncestors(p, res(true))
	old := metav1.NewTime(time.Unix(1000, 0))
	for i := range p.Status.Ancestors[0].Conditions {
		p.Status.Ancestors[0].Conditions[i].LastTransitionTime = old
	}
	SetAncestors(p, res(false))
	conds := p.Status.Ancestors[0].Conditions
	if c := meta.FindStatusCondition(conds, "Accepted"); c == nil || !c.LastTransitionTime.Equal(&old) {
		t.Errorf("Accepted held True but its transition time moved: %+v", c)
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.AncestorConditionEnforced); c == nil || c.LastTransitionTime.Equal(&old) || c.Status != metav1.ConditionFalse {
		t.Errorf("Enforced turned False but kept its old transition time: %+v", c)
	}
	if p.Status.Ancestors[0].ControllerName != v1alpha1.ControllerName {
		t.Errorf("controllerName %q", p.Status.Ancestors[0].ControllerName)
	}
	SetAncestors(p, nil)
	if p.Status.Ancestors != nil {
		t.Errorf("ancestors kept for a policy without targetRefs: %+v", p.Status.Ancestors)
	}
}
