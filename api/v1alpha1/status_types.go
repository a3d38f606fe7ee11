package v1alpha1

// Condition types a RateLimitPolicy reports, each with the generation it was computed for.
// Ready and Stalled are derived from Published; ScriptsLoaded stands on its own.
const (
	// ConditionReady is True when the policy is accepted (it compiles) and this generation
	// is published to its namespace's snapshot, so every sidecar enforces it. It does not
	// depend on Redis: while Redis is away the sidecars enforce the policy by its failure
	// mode, and ScriptsLoaded reports the outage.
	ConditionReady = "Ready"
	// ConditionScriptsLoaded is True when the policy's scripts are loaded on every Redis
	// primary; False with reason RedisUnavailable while Redis cannot be reached.
	ConditionScriptsLoaded = "ScriptsLoaded"
	// ConditionPublished is True when the policy is in its namespace's sidecar snapshot.
	ConditionPublished = "Published"
	// ConditionStalled is present, and True, only while the controller cannot publish the
	// policy without a change (reasons InvalidPolicy, SnapshotTooLarge). It is kstatus's
	// abnormal-true condition: kstatus (Flux, kpt, cli-utils) reports such a policy Failed.
	ConditionStalled = "Stalled"
)

// ScriptStatus is one Lua script a policy runs.
type ScriptStatus struct {
	// name is the script's name, for example "token_bucket".
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
