package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// readyTracker remembers the Ready condition this process last wrote for each policy: it
// decides which reconciles are Ready transitions (one event each) and feeds the
// ratelimit_policies{ready} gauge.
type readyTracker struct {
	mu   sync.Mutex
	last map[types.NamespacedName]readyState
}

type readyState struct {
	uid    types.UID
	status metav1.ConditionStatus
	reason string
}

// transition records now as the policy's Ready condition and reports whether it differs from
// the previous one: the one this process recorded for the same object, else was (read from
// the cache; nil for a policy never reconciled).
func (t *readyTracker) transition(key types.NamespacedName, uid types.UID, was, now *metav1.Condition) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[types.NamespacedName]readyState{}
	}
	next := readyState{uid: uid, status: now.Status, reason: now.Reason}
	prev, seen := t.last[key]
	if seen && prev.uid != uid { // deleted and created again under the same name
		policiesByReady.WithLabelValues(string(prev.status)).Dec()
		seen = false
	}
	if !seen && was != nil {
		prev = readyState{uid: uid, status: was.Status, reason: was.Reason}
	}
	t.last[key] = next
	if !seen {
		policiesByReady.WithLabelValues(string(next.status)).Inc()
	} else if prev.status != next.status {
		policiesByReady.WithLabelValues(string(prev.status)).Dec()
		policiesByReady.WithLabelValues(string(next.status)).Inc()
	}
	return (!seen && was == nil) || prev.status != next.status || prev.reason != next.reason
}

// forget drops a policy that is gone.
func (t *readyTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.last[key]; ok {
		policiesByReady.WithLabelValues(string(prev.status)).Dec()
		delete(t.last, key)
	}
}
