package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisMode is the topology of a RedisBackend's Redis.
// +kubebuilder:validation:Enum=Standalone;Cluster;Sentinel
type RedisMode string

// The topologies a RedisBackend can name.
const (
	// RedisModeStandalone is one Redis server (or a proxy that behaves like one).
	RedisModeStandalone RedisMode = "Standalone"
	// RedisModeCluster is Redis Cluster: keys are routed by hash slot.
	RedisModeCluster RedisMode = "Cluster"
	// RedisModeSentinel is a primary with replicas, found through Sentinels.
	RedisModeSentinel RedisMode = "Sentinel"
)

// RedisBackendSpec names a Redis deployment, the administrative credentials the manager uses
// on it, and the namespaces whose counters it holds instead of the manager's default Redis
// (its --redis-* flags).
//
// +kubebuilder:validation:XValidation:rule="self.mode != 'Standalone' || size(self.addrs) == 1",message="mode Standalone takes exactly one address",fieldPath=".addrs"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Sentinel' || has(self.masterName)",message="mode Sentinel needs masterName",fieldPath=".masterName"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' || !has(self.masterName)",message="masterName is for mode Sentinel only",fieldPath=".masterName"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Cluster' || !has(self.db) || self.db == 0",message="Redis Cluster has only database 0",fieldPath=".db"
type RedisBackendSpec struct {
	// mode is the topology: Standalone (one server), Cluster (addrs are seed nodes) or
	// Sentinel (addrs are the Sentinels, which name the primary of masterName). Defaults to
	// Standalone.
	// +optional
	// +kubebuilder:default=Standalone
	Mode RedisMode `json:"mode,omitempty"`

	// addrs are the endpoints, host:port: the server, the Cluster's seed nodes, or the
	// Sentinels. They are published to the sidecars of the namespaces this Redis serves.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=3
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:Pattern=`^\S+:[0-9]{1,5}$`
	Addrs []string `json:"addrs"`

	// masterName is the name the Sentinels monitor the primary under; mode Sentinel only,
	// and required there.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MasterName string `json:"masterName,omitempty"`

	// db is the logical database (mode Standalone and Sentinel; Cluster has only 0).
	// Defaults to 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	DB int32 `json:"db,omitempty"`

	// tls configures TLS to every node (and Sentinel). Sidecars are told only that TLS is
	// on: which CAs they trust is their own --redis-tls-* setting.
	// +optional
	TLS *RedisBackendTLS `json:"tls,omitempty"`

	// credentialsSecretRef names a kubernetes.io/basic-auth Secret (keys username and
	// password) holding the Redis user the manager loads the scripts with and, with
	// per-namespace Redis users, makes them with: the administrative user of
	// config/redis/acl.conf, as --redis-credentials-path is for the default Redis. Keep it in
	// the operator's namespace, where the manager's Role lets it read Secrets; it is read
	// again every minute, and a new password reaches new connections. Unset: no AUTH.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// namespaceSelector selects the namespaces whose counters (and, with per-namespace
	// users, whose Redis users) live on this Redis. A namespace selected by several
	// RedisBackends is served by the one whose name sorts first; the others report
	// Conflict. A namespace selected by none uses the manager's default Redis. An empty
	// selector would select nothing, so it is refused.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="an empty namespaceSelector selects nothing: name the labels of the namespaces this Redis serves"
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
}

// RedisBackendTLS is how the manager reaches a RedisBackend's Redis over TLS.
//
// +kubebuilder:validation:XValidation:rule="(has(self.enabled) && self.enabled) || (!has(self.caSecretRef) && !has(self.serverName))",message="caSecretRef and serverName need enabled: true"
type RedisBackendTLS struct {
	// enabled turns TLS 1.2 or newer on for every connection, verifying the server
	// certificate.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// caSecretRef names a Secret whose key ca.crt holds the PEM CAs that sign the servers'
	// certificates. Unset: the system roots.
	// +optional
	CASecretRef *SecretReference `json:"caSecretRef,omitempty"`

	// serverName is the name verified in the servers' certificates (and sent as SNI).
	// Unset: the host of each address dialled.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// namespace is the Secret's namespace: the operator's own is where the manager may
	// read Secrets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Condition types a RedisBackend reports, each with the generation it was computed for.
const (
	// ConditionConnected is True when the manager holds the backend's credentials and its
	// Redis answered; False with reason CredentialsUnavailable (a Secret missing, of
	// another type, or not readable) or RedisUnavailable.
	ConditionConnected = "Connected"
	// ConditionUsersReady (per-namespace Redis users only) is True when every node holds
	// the users of the namespaces this Redis serves; False with reason RedisUnavailable.
	ConditionUsersReady = "UsersReady"
	// ConditionConflict is True when the backend selects namespaces another RedisBackend
	// (whose name sorts first) serves, naming them; False otherwise. It does not gate
	// Ready: the backend serves the namespaces it wins.
	ConditionConflict = "Conflict"
)

// Reasons of a RedisBackend's conditions (besides ScriptsLoaded and RedisUnavailable, which
// a policy's conditions use too).
const (
	// ReasonConnected is Connected's reason when True.
	ReasonConnected = "Connected"
	// ReasonCredentialsUnavailable is Connected's reason when a referenced Secret cannot be
	// used.
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	// ReasonUsersReady is UsersReady's reason when True.
	ReasonUsersReady = "UsersReady"
	// ReasonNotChecked is the reason of a condition not checked yet.
	ReasonNotChecked = "NotChecked"
	// ReasonNamespaceConflict is Conflict's reason when True.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonNoConflict is Conflict's reason when False.
	ReasonNoConflict = "NoConflict"
	// ReasonInvalidSelector is Conflict's reason when the namespaceSelector cannot be read
	// (the backend then selects nothing).
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonRedisChanged is the reason of the Event on each policy of a namespace that
	// moved to another Redis: its counters start fresh there.
	ReasonRedisChanged = "RedisChanged"
)

// RedisBackendStatus is the observed state of a RedisBackend.
type RedisBackendStatus struct {
	// observedGeneration is the metadata.generation the controller last acted on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the backend's current state: Ready (Connected, ScriptsLoaded and,
	// with per-namespace Redis users, UsersReady all True), Connected, ScriptsLoaded,
	// UsersReady and Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// namespaces are the namespaces this Redis serves now, sorted: those its
	// namespaceSelector selects and no RedisBackend whose name sorts first also selects.
	// +optional
	// +listType=set
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceCount is how many namespaces this Redis serves.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NamespaceCount int32 `json:"namespaceCount,omitempty"`
}

// RedisBackend gives the namespaces it selects a Redis of their own: their counters, their
// scripts and (with per-namespace Redis users) their users live there, and no other
// namespace's. A platform team moves a tenant to it by labelling its namespace, without
// touching its policies; its counters start fresh on the new Redis.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rlredis,categories=ratelimit
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaceCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisBackend struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the Redis and the namespaces it serves.
	// +required
	Spec RedisBackendSpec `json:"spec"`

	// status is the state observed by the controller.
	// +optional
	Status RedisBackendStatus `json:"status,omitempty"`
}

// RedisBackendList is a list of RedisBackend objects.
//
// +kubebuilder:object:root=true
type RedisBackendList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the backends.
	Items []RedisBackend `json:"items"`
}
