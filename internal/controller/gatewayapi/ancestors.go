package gatewayapi

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// SetAncestors writes status.ancestors from res, keeping each condition's transition time
// while its status holds.
func SetAncestors(p *v1alpha1.RateLimitPolicy, res *attachment.Result) {
	if res == nil {
		p.Status.Ancestors = nil
		return
	}
	out := make([]gwapiv1.PolicyAncestorStatus, 0, len(res.Ancestors))
	for _, a := range res.Ancestors {
		st := gwapiv1.PolicyAncestorStatus{AncestorRef: a.Ref, ControllerName: v1alpha1.ControllerName}
		if prev := findAncestor(p.Status.Ancestors, a.Ref); prev != nil {
			st.Conditions = append([]metav1.Condition(nil), prev.Conditions...)
		}
		meta.SetStatusCondition(&st.Conditions, ancestorCondition(p, string(gwapiv1.PolicyConditionAccepted), a.Accepted))
		meta.SetStatusCondition(&st.Conditions, ancestorCondition(p, v1alpha1.AncestorConditionEnforced, a.Enforced))
		out = append(out, st)
	}
	p.Status.Ancestors = out
}

func ancestorCondition(p *v1alpha1.RateLimitPolicy, typ string, c attachment.Condition) metav1.Condition {
	status := metav1.ConditionFalse
	if c.OK {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: c.Reason, Message: truncate(c.Message), ObservedGeneration: p.Generation}
}

// maxMessage bounds an ancestor condition's message: a Gateway with many routes names them
// all, and the API allows 32768 bytes per message, 16 ancestors and 8 conditions each.
const maxMessage = 1024

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func findAncestor(list []gwapiv1.PolicyAncestorStatus, ref gwapiv1.ParentReference) *gwapiv1.PolicyAncestorStatus {
	for i := range list {
		if list[i].ControllerName == v1alpha1.ControllerName && equality.Semantic.DeepEqual(list[i].AncestorRef, ref) {
			return &list[i]
		}
	}
	return nil
}
