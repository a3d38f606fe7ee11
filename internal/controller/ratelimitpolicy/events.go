package ratelimitpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
)

// patchStatus writes the status if it changed, then emits an event when Ready flipped, when
// ScriptsLoaded turned RedisUnavailable or came back from it (Ready does not follow Redis,
// so this is the policy's only event about an outage), and when CountersProtected turned
// False (a Warning naming the finding), changed finding, or came back True. Events follow a successful
// write (a failed one is retried, and would announce twice) and are compared with what this
// process last wrote, not only with the cached object, which may not show that write yet.
func (r *Reconciler) patchStatus(ctx context.Context, before, p *v1alpha1.RateLimitPolicy) error {
	if !equality.Semantic.DeepEqual(before.Status, p.Status) {
		if err := r.Status().Patch(ctx, p, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("patch status: %w", client.IgnoreNotFound(err))
		}
	}
	r.announce(before, p)
	return nil
}

// announce emits patchStatus's events for the transitions from before to p.
func (r *Reconciler) announce(before, p *v1alpha1.RateLimitPolicy) {
	key := client.ObjectKeyFromObject(p)
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionReady); ok && r.ready.transition(key, p.UID, was, now) {
		r.event(p, now)
	}
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionScriptsLoaded); ok && r.scripts.transition(key, p.UID, was, now) &&
		(now.Reason == v1alpha1.ReasonRedisUnavailable || was != nil && was.Reason == v1alpha1.ReasonRedisUnavailable) {
		r.event(p, now)
	}
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionCountersProtected); ok && r.memory.transition(key, p.UID, was, now) &&
		(now.Status == metav1.ConditionFalse || was != nil && was.Status == metav1.ConditionFalse) && now.Status != metav1.ConditionUnknown {
		r.event(p, now)
	}
}

// conditionPair is a condition before and after a reconcile; ok is false when it is not set.
func conditionPair(before, p *v1alpha1.RateLimitPolicy, typ string) (was, now *metav1.Condition, ok bool) {
	now = meta.FindStatusCondition(p.Status.Conditions, typ)
	return meta.FindStatusCondition(before.Status.Conditions, typ), now, now != nil
}

// event reports a condition's new state on the policy. The condition's message may quote
// the policy's own text (a tier's CEL expression in a compile error, several lines long):
// the Event's note keeps it to one line, so that no author writes a line that passes for
// another Event.
func (r *Reconciler) event(p *v1alpha1.RateLimitPolicy, c *metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if problemReasons[c.Reason] {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(p, nil, kind, c.Reason, "Reconcile", "%s", eventnote.OneLine(c.Message))
}

// problemReasons are the reasons worth a Warning event; the others (PublishPending, seen by
// every new or changed policy for a moment, and the recoveries) are Normal.
var problemReasons = map[string]bool{
	v1alpha1.ReasonInvalidPolicy: true, v1alpha1.ReasonRedisUnavailable: true, v1alpha1.ReasonSnapshotTooLarge: true,
	v1alpha1.ReasonCountersEvictable: true, v1alpha1.ReasonMemoryUnbounded: true, v1alpha1.ReasonClientMemoryUnbounded: true,
	v1alpha1.ReasonRepliesUnbounded: true, v1alpha1.ReasonValuesUnbounded: true, v1alpha1.ReasonForeignKeys: true,
}
