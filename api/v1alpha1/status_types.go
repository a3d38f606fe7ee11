package v1alpha1

// Condition types a RateLimitPolicy reports, each with the generation it was computed for.
// Ready and Stalled are derived from Published; ScriptsLoaded and CountersProtected stand
// on their own.
const (
	// ConditionReady is True when the policy is accepted (it compiles) and this generation
	// is published to its namespace's snapshot, so every sidecar enforces it. It does not
	// depend on Redis: while Redis is away the sidecars enforce the policy by its failure
	// mode, and ScriptsLoaded reports the outage.
	ConditionReady = "Ready"
	// ConditionScriptsLoaded is True when the policy's scripts are loaded on every Redis
	// primary; False with reason RedisUnavailable while Redis cannot be reached.
	ConditionScriptsLoaded = "ScriptsLoaded"
	// ConditionCountersProtected says whether Redis keeps the policy's counters. True
	// (reason CountersProtected) when every node bounds memory (maxmemory,
	// maxmemory-clients, client-output-buffer-limit normal, proto-max-bulk-len 1mb) and
	// evicts nothing (maxmemory-policy noeviction: a full Redis then answers with OOM, and
	// the failure mode decides), and the namespace's key scope holds no key without a TTL.
	// False with the worst finding as reason: CountersEvictable (some other
	// maxmemory-policy: every limiter key has a TTL, so volatile-* policies evict counters
	// too, and an evicted counter admits again), MemoryUnbounded (maxmemory 0),
	// ClientMemoryUnbounded (maxmemory-clients 0), RepliesUnbounded (no hard limit of
	// client-output-buffer-limit normal), ValuesUnbounded (proto-max-bulk-len above 1mb),
	// ForeignKeys (keys without a TTL in the namespace's scope, which the limiter never
	// writes: the namespace's Redis credentials did). Unknown until checked (NotChecked), or when the manager's Redis user lacks the
	// ACL rules to read the settings (MissingGrants, naming them) or a node does not answer
	// (RedisUnavailable). Like ScriptsLoaded it does not gate Ready.
	ConditionCountersProtected = "CountersProtected"
	// ConditionPublished is True when the policy is in its namespace's sidecar snapshot.
	ConditionPublished = "Published"
	// ConditionStalled is present, and True, only while the controller cannot publish the
	// policy without a change (reasons InvalidPolicy, SnapshotTooLarge). It is kstatus's
	// abnormal-true condition: kstatus (Flux, kpt, cli-utils) reports such a policy Failed.
	ConditionStalled = "Stalled"
)

// ScriptStatus is one Lua script a policy runs.
type ScriptStatus struct {
	// name is the script's name, for example "check_bucket" (internal/scripts/generated).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// sha is the script's SHA1 digest, as EVALSHA takes it.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	SHA string `json:"sha"`
}

// SnapshotReference points at the sidecar snapshot carrying a policy.
type SnapshotReference struct {
	// name is the ConfigMap holding the snapshot, in the policy's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// version is the snapshot's content version (a hash of its policies).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
}

// Condition types and reasons of status.ancestors[], besides Gateway API's Accepted and its
// reasons (Accepted, Invalid, TargetNotFound, Conflicted).
const (
	// AncestorConditionEnforced is True when the policy governs traffic through the
	// ancestor: some of the routes it leads to are its own. False with reason Overridden
	// when other policies govern all of them (a Gateway's overrides over a route policy, a
	// route policy over a Gateway's defaults), NoRoutes when a Gateway has no route to
	// govern, NotAccepted when the policy is not accepted there.
	AncestorConditionEnforced = "Enforced"
	// AncestorReasonEnforced is Enforced's reason when True.
	AncestorReasonEnforced = "Enforced"
	// AncestorReasonNoRoutes is Enforced's reason when a Gateway has no route to govern.
	AncestorReasonNoRoutes = "NoRoutes"
	// AncestorReasonNotAccepted is Enforced's reason when Accepted is False.
	AncestorReasonNotAccepted = "NotAccepted"
	// ControllerName is status.ancestors[].controllerName of this operator.
	ControllerName = "policy.ratelimit.dev/ratelimit-operator"
)
