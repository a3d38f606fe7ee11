package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Condition reasons.
const (
	ReasonInvalidPolicy    = "InvalidPolicy"
	ReasonScriptsLoaded    = "ScriptsLoaded"
	ReasonRedisUnavailable = "RedisUnavailable"
	ReasonPublished        = "Published"
	ReasonPending          = "PublishPending"
	ReasonSnapshotTooLarge = "SnapshotTooLarge"
	ReasonNotPublished     = "NotPublished"
	ReasonReady            = "Ready"
)

// setCondition sets one condition with the policy's generation.
func setCondition(p *v1alpha1.RateLimitPolicy, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: typ, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: p.Generation})
}

// setReady summarises the finer conditions into Ready.
func setReady(p *v1alpha1.RateLimitPolicy) {
	for _, typ := range []string{v1alpha1.ConditionScriptsLoaded, v1alpha1.ConditionPublished} {
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue {
			reason, msg := "Unknown", typ+" is not known yet"
			if c != nil {
				reason, msg = c.Reason, c.Message
			}
			setCondition(p, v1alpha1.ConditionReady, false, reason, msg)
			return
		}
	}
	setCondition(p, v1alpha1.ConditionReady, true, ReasonReady, "scripts loaded on every Redis primary and the policy is in its namespace's snapshot")
}
