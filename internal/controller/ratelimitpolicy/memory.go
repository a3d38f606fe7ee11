package ratelimitpolicy

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// memoryStatus maps an assessment's state to the condition's status.
var memoryStatus = map[redismemory.State]metav1.ConditionStatus{
	redismemory.Protected: metav1.ConditionTrue,
	redismemory.Exposed:   metav1.ConditionFalse,
	redismemory.Unknown:   metav1.ConditionUnknown,
}

// setCountersProtected sets CountersProtected from the last report of the monitor of the
// Redis serving the policy's namespace (rt); with the memory checks off the policy has no
// such condition.
func (r *Reconciler) setCountersProtected(p *v1alpha1.RateLimitPolicy, rt redisbackend.Route) {
	if r.Memory == nil {
		return
	}
	a := assess(p.Namespace, rt)
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCountersProtected,
		Status: memoryStatus[a.State], Reason: a.Reason, Message: a.Message, ObservedGeneration: p.Generation})
}

// assess is what the monitor of rt's Redis says of namespace ns: Unknown while that Redis
// is not connected, or has no monitor.
func assess(ns string, rt redisbackend.Route) redismemory.Assessment {
	switch {
	case rt.Redis == nil:
		return redismemory.Assessment{State: redismemory.Unknown, Reason: redismemory.ReasonRedisUnavailable,
			Message: rt.NotConnected().Error()}
	case rt.Redis.Memory == nil:
		return redismemory.Assessment{State: redismemory.Unknown, Reason: redismemory.ReasonNotChecked,
			Message: "the memory of " + backend.Describe(rt.Backend) + " is not checked"}
	}
	return rt.Redis.Memory.Assess(ns)
}
