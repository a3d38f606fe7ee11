package publishing

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// OverrideVerdict is what became of one RateLimitOverride in its namespace's snapshot: its
// Ready condition's reason (v1alpha1.ReasonOverrideApplied when it is published) and
// message.
type OverrideVerdict struct {
	// Reason is Ready's reason.
	Reason string
	// Message says why, naming the field at fault.
	Message string
	// Generation is the override's metadata.generation the verdict is of.
	Generation int64
}

// Applied reports whether the override is published.
func (v OverrideVerdict) Applied() bool { return v.Reason == v1alpha1.ReasonOverrideApplied }

// AttachOverrides adds the overrides ovs of snap's namespace to the entries of their
// policies (replacing any they carry, such as a kept entry's old ones) and reseals snap. An
// override is left out, with the reason in its verdict, when it is being deleted, its policy
// is not in snap, it has expired by now, or it does not fit its policy (policy.Override).
// next is the earliest expiry still to come, zero when none: the snapshot must be rebuilt
// then to drop it (sidecars stop applying it at that instant by themselves).
func AttachOverrides(snap *snapshot.Snapshot, ovs []v1alpha1.RateLimitOverride, now time.Time) (verdicts map[string]OverrideVerdict, next time.Time, err error) {
	slices.SortFunc(ovs, func(a, b v1alpha1.RateLimitOverride) int { return strings.Compare(a.Name, b.Name) })
	byPolicy := make(map[string]int, len(snap.Policies))
	for i := range snap.Policies {
		snap.Policies[i].Overrides = nil
		byPolicy[snap.Policies[i].Name] = i
	}
	verdicts = make(map[string]OverrideVerdict, len(ovs))
	for i := range ovs {
		o := &ovs[i]
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		v, wire := overrideVerdict(snap, byPolicy, o, now)
		v.Generation = o.Generation
		verdicts[o.Name] = v
		if !v.Applied() {
			continue
		}
		e := &snap.Policies[byPolicy[o.Spec.PolicyName]]
		e.Overrides = append(e.Overrides, wire)
		if exp := o.Spec.Expires; exp != nil && (next.IsZero() || exp.Time.Before(next)) {
			next = exp.Time
		}
	}
	if err := snap.Seal(); err != nil {
		return nil, time.Time{}, err
	}
	return verdicts, next, nil
}

// overrideVerdict is what becomes of o in snap, and its wire form when it applies.
func overrideVerdict(snap *snapshot.Snapshot, byPolicy map[string]int, o *v1alpha1.RateLimitOverride, now time.Time) (OverrideVerdict, snapshot.Override) {
	i, ok := byPolicy[o.Spec.PolicyName]
	if !ok {
		return OverrideVerdict{Reason: v1alpha1.ReasonPolicyNotFound, Message: fmt.Sprintf(
			"spec.policyName: policy %q is not published in namespace %s (it does not exist, or is invalid and has no published version)",
			o.Spec.PolicyName, snap.Namespace)}, snapshot.Override{}
	}
	if exp := o.Spec.Expires; exp != nil && !now.Before(exp.Time) {
		return OverrideVerdict{Reason: v1alpha1.ReasonExpired, Message: "spec.expires: expired at " + exp.UTC().Format(time.RFC3339) +
			"; its callers' tiers apply again"}, snapshot.Override{}
	}
	wire, errs := policy.Override(snap.Policies[i], snap.Namespace, o)
	if len(errs) > 0 {
		return OverrideVerdict{Reason: v1alpha1.ReasonInvalidOverride, Message: errs.ToAggregate().Error()}, snapshot.Override{}
	}
	return OverrideVerdict{Reason: v1alpha1.ReasonOverrideApplied, Message: fmt.Sprintf("%d caller(s) of policy %q get %s",
		len(wire.Callers), o.Spec.PolicyName, overrideGives(wire))}, wire
}

// overrideGives says what an applied override gives its callers.
func overrideGives(o snapshot.Override) string {
	if o.Tier != "" {
		return "tier " + o.Tier
	}
	parts := make([]string, 0, len(o.Limits))
	for _, l := range o.Limits {
		parts = append(parts, fmt.Sprintf("%s: %d per %s", l.Name, l.Requests, l.Per()))
	}
	return "limits " + strings.Join(parts, ", ")
}
