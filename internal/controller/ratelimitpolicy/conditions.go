package ratelimitpolicy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
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

// stalledReasons are the Published reasons the controller cannot get past on its own: the
// spec (or, for SnapshotTooLarge, the namespace's policies) must change.
var stalledReasons = map[string]bool{v1alpha1.ReasonInvalidPolicy: true, v1alpha1.ReasonSnapshotTooLarge: true, v1alpha1.ReasonConflicted: true}

// setReady derives Ready and Stalled from Published.
//
// Ready means "accepted and published": the spec compiles and this generation is in the
// namespace's snapshot, so every sidecar enforces it. It does not depend on Redis. While
// Redis is away the sidecars still enforce the policy, by its failure mode, and turning
// every policy of every namespace not-Ready (Degraded in Argo CD, not Current in Flux) would
// page every application team for one infrastructure fault that has its own condition
// (ScriptsLoaded=False, RedisUnavailable), metric and alert. The Ready message says so.
//
// Stalled (kstatus's abnormal-true condition, which makes kstatus report Failed) is True
// while the policy cannot be published without a change: InvalidPolicy, SnapshotTooLarge,
// Conflicted. An attached policy Overridden on every route is Ready: it is accepted, and
// governing nothing is what the Gateway's owner asked for.
// It is removed otherwise.
func setReady(p *v1alpha1.RateLimitPolicy) {
	pub := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionPublished)
	switch {
	case pub == nil:
		setCondition(p, v1alpha1.ConditionReady, false, "Unknown", v1alpha1.ConditionPublished+" is not known yet")
	case pub.Status != metav1.ConditionTrue && pub.Reason == v1alpha1.ReasonOverridden:
		setCondition(p, v1alpha1.ConditionReady, true, v1alpha1.ReasonOverridden, "accepted; "+pub.Message)
	case pub.Status != metav1.ConditionTrue:
		setCondition(p, v1alpha1.ConditionReady, false, pub.Reason, pub.Message)
	default:
		msg := "accepted and " + pub.Message
		if s := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionScriptsLoaded); s == nil || s.Status != metav1.ConditionTrue {
			msg += "; Redis is unavailable (see ScriptsLoaded): sidecars apply failure mode " +
				string(failureMode(p)) + " until it is back"
		}
		setCondition(p, v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, msg)
	}
	if pub != nil && pub.Status != metav1.ConditionTrue && stalledReasons[pub.Reason] {
		setCondition(p, v1alpha1.ConditionStalled, true, pub.Reason, pub.Message)
	} else {
		meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionStalled)
	}
}

// failureMode is the policy's failure mode, FailOpen when unset (the CRD default).
func failureMode(p *v1alpha1.RateLimitPolicy) v1alpha1.FailureMode {
	if p.Spec.FailureMode == "" {
		return v1alpha1.FailureModeFailOpen
	}
	return p.Spec.FailureMode
}

// conditionTracker remembers one condition this process last wrote for each policy: it
// decides which reconciles are transitions (one event each) and, when gauge is set, counts
// policies by the condition's status (the ratelimit_policies{ready} gauge for Ready).
type conditionTracker struct {
	gauge *prometheus.GaugeVec // nil: no gauge

	mu   sync.Mutex
	last map[types.NamespacedName]readyState
}

type readyState struct {
	uid    types.UID
	status metav1.ConditionStatus
	reason string
}

func (t *conditionTracker) add(status metav1.ConditionStatus, d float64) {
	if t.gauge != nil {
		t.gauge.WithLabelValues(string(status)).Add(d)
	}
}

// transition records now as the policy's condition and reports whether it differs from the
// previous one: the one this process recorded for the same object, else was (read from the
// cache; nil for a policy never reconciled).
func (t *conditionTracker) transition(key types.NamespacedName, uid types.UID, was, now *metav1.Condition) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[types.NamespacedName]readyState{}
	}
	next := readyState{uid: uid, status: now.Status, reason: now.Reason}
	prev, seen := t.last[key]
	if seen && prev.uid != uid { // deleted and created again under the same name
		t.add(prev.status, -1)
		seen = false
	}
	if !seen && was != nil {
		prev = readyState{uid: uid, status: was.Status, reason: was.Reason}
	}
	t.last[key] = next
	if !seen {
		t.add(next.status, 1)
	} else if prev.status != next.status {
		t.add(prev.status, -1)
		t.add(next.status, 1)
	}
	return (!seen && was == nil) || prev.status != next.status || prev.reason != next.reason
}

// forget drops a policy that is gone.
func (t *conditionTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.last[key]; ok {
		t.add(prev.status, -1)
		delete(t.last, key)
	}
}
