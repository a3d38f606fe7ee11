package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// TestTargetRefsWithoutGatewayAPI: on a cluster without Gateway API a policy with targetRefs
// is stored, governs nothing (Ready=False, NotAttached, not in the snapshot) and says on its
// ancestor that the target is not found because Gateway API is not served, while a match
// policy beside it is published as before.
func TestTargetRefsWithoutGatewayAPI(t *testing.T) {
	e, ns := suiteNamespace(t)
	attached := newPolicy(ns, "attached", 10)
	attached.Spec.Match = v1alpha1.Match{}
	attached.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: gwapiv1.GroupName, Kind: v1alpha1.KindHTTPRoute, Name: "web"}}
	create(t, e, attached, newPolicy(ns, "plain", 10))
	waitReady(t, e, ns, "plain")
	p := waitCondition(t, e, ns, "attached", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAttached)
	if len(p.Status.Ancestors) != 1 || len(p.Status.Ancestors[0].Conditions) == 0 {
		t.Fatalf("ancestors %+v, want the target's", p.Status.Ancestors)
	}
	a := p.Status.Ancestors[0]
	c := a.Conditions[0]
	if a.AncestorRef.Name != "web" || c.Type != "Accepted" || c.Reason != "TargetNotFound" || !strings.Contains(c.Message, "did not serve Gateway API") {
		t.Errorf("ancestor %+v, want HTTPRoute web not found because Gateway API is not served", a)
	}
	waitSnapshot(t, e, ns, "plain") // exactly: attached is not in it
}
