package v1alpha1

import gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

// Reasons of a RateLimitPolicy's conditions. Ready carries Published's reason when False
// (Overridden when True but governing nothing), Stalled the Published reason it stands for.
const (
	// ReasonReady is Ready's reason when the policy is accepted and published.
	ReasonReady = "Ready"
	// ReasonPublished is Published's reason when the policy is in the snapshot.
	ReasonPublished = "Published"
	// ReasonPending is Published's reason while the namespace's snapshot is being written.
	ReasonPending = "PublishPending"
	// ReasonNotPublished is Published's reason when the policy is not in the snapshot.
	ReasonNotPublished = "NotPublished"
	// ReasonInvalidPolicy is Published's and ScriptsLoaded's reason for a policy that does
	// not compile.
	ReasonInvalidPolicy = "InvalidPolicy"
	// ReasonSnapshotTooLarge is Published's reason when the namespace's snapshot does not fit
	// a ConfigMap.
	ReasonSnapshotTooLarge = "SnapshotTooLarge"
	// ReasonScriptsLoaded is ScriptsLoaded's reason when the scripts are on every primary.
	ReasonScriptsLoaded = "ScriptsLoaded"
	// ReasonRedisUnavailable is ScriptsLoaded's (and CountersProtected's) reason while Redis
	// cannot be reached.
	ReasonRedisUnavailable = "RedisUnavailable"
)

// Published reasons of a policy with targetRefs that governs no traffic (status.ancestors
// says why, per Gateway). They differ in what GitOps tools make of the policy.
const (
	// ReasonNotAttached: a target is missing. Ready=False, and kstatus InProgress, until it
	// appears: a route applied in the same sync as its policy arrives on its own.
	ReasonNotAttached = "NotAttached"
	// ReasonOverridden: every target is accepted, but other policies govern all its routes
	// (a Gateway's overrides, or route policies over a Gateway's defaults), or a Gateway has
	// no route. That is the state a platform team chose: Ready=True, so an overridden app
	// policy is Current in kstatus, Healthy in Argo CD, and pages nobody. Also Enforced's
	// reason on an ancestor where other policies take every route.
	ReasonOverridden = "Overridden"
	// ReasonConflicted: a target is held by an older policy, or cannot be governed as
	// written (Invalid). Only a change to the policies ends it: Stalled=True, kstatus Failed.
	// Also Gateway API's Accepted reason on an ancestor whose target an older policy holds.
	ReasonConflicted = string(gwapiv1.PolicyReasonConflicted)
)

// Reasons of CountersProtected: the Redis memory monitor's findings (False) and its other
// verdicts. They are the monitor's own names (internal/redismemory), checked alike by a test.
const (
	// ReasonCountersProtected is CountersProtected's reason when True.
	ReasonCountersProtected = "CountersProtected"
	// ReasonCountersEvictable: a maxmemory-policy other than noeviction.
	ReasonCountersEvictable = "CountersEvictable"
	// ReasonMemoryUnbounded: maxmemory 0.
	ReasonMemoryUnbounded = "MemoryUnbounded"
	// ReasonClientMemoryUnbounded: maxmemory-clients 0.
	ReasonClientMemoryUnbounded = "ClientMemoryUnbounded"
	// ReasonRepliesUnbounded: no hard limit of client-output-buffer-limit normal.
	ReasonRepliesUnbounded = "RepliesUnbounded"
	// ReasonValuesUnbounded: proto-max-bulk-len above 1mb.
	ReasonValuesUnbounded = "ValuesUnbounded"
	// ReasonForeignKeys: keys without a TTL in the namespace's key scope.
	ReasonForeignKeys = "ForeignKeys"
	// ReasonMemoryNotChecked: no round has read the settings yet.
	ReasonMemoryNotChecked = "NotChecked"
	// ReasonMissingGrants: the manager's Redis user may not read the settings.
	ReasonMissingGrants = "MissingGrants"
)

// Gateway API's Accepted reasons on status.ancestors[] (besides ReasonConflicted).
const (
	// AncestorReasonAccepted is Accepted's reason when True.
	AncestorReasonAccepted = string(gwapiv1.PolicyReasonAccepted)
	// AncestorReasonInvalid: the target cannot be governed as written, or the policy does
	// not compile.
	AncestorReasonInvalid = string(gwapiv1.PolicyReasonInvalid)
	// AncestorReasonTargetNotFound: the target does not exist (or Gateway API is not served).
	AncestorReasonTargetNotFound = string(gwapiv1.PolicyReasonTargetNotFound)
)

// Reasons of a RateLimitOverride's Ready condition.
const (
	// ReasonOverrideApplied is Ready's reason when the override is published and applies.
	ReasonOverrideApplied = "Applied"
	// ReasonPolicyNotFound is Ready's reason when spec.policyName names no published policy.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonInvalidOverride is Ready's reason when the override does not fit its policy (an
	// unknown tier, a limit of another period than the policy's of that name).
	ReasonInvalidOverride = "InvalidOverride"
	// ReasonExpired is Ready's reason once spec.expires has passed.
	ReasonExpired = "Expired"
)
