package inject

// Labels and annotations a Pod (or its namespace) sets to choose what it gets.
const (
	// LabelInject opts a namespace (label) or a Pod (label or annotation) in with
	// ValueEnabled, or a Pod out with ValueDisabled. The Pod label is what the webhook
	// configuration selects on; the annotation is read too.
	LabelInject = "ratelimit.dev/inject"
	// AnnotationMode chooses the sidecar's front: ModeProxy, ModeEnvoy or ModeCheck.
	AnnotationMode = "ratelimit.dev/mode"
	// AnnotationUpstreamPort names (or numbers) the app's container port the proxy forwards
	// to; setting it makes ModeProxy the default mode.
	AnnotationUpstreamPort = "ratelimit.dev/upstream-port"
	// AnnotationProxyPort is the port the proxy listens on, on every interface.
	AnnotationProxyPort = "ratelimit.dev/proxy-port"
	// AnnotationMetricsPort is the port of the sidecar's /metrics, /healthz and /readyz.
	AnnotationMetricsPort = "ratelimit.dev/metrics-port"
	// AnnotationCPU overrides the sidecar's CPU request, up to Config.MaxCPU.
	AnnotationCPU = "ratelimit.dev/sidecar-cpu"
	// AnnotationMemory overrides the sidecar's memory request, up to Config.MaxMemory.
	AnnotationMemory = "ratelimit.dev/sidecar-memory"
)

// Values of LabelInject.
const (
	// ValueEnabled opts in.
	ValueEnabled = "enabled"
	// ValueDisabled opts out; on a Pod it wins over its namespace.
	ValueDisabled = "disabled"
)

// What the injection records on the Pod, so that
// `kubectl get pods -l ratelimit.dev/injected=true -L ratelimit.dev/sidecar-version`
// shows which Pods run an older sidecar.
const (
	// LabelInjected is "true" on every Pod that got the sidecar.
	LabelInjected = "ratelimit.dev/injected"
	// LabelSidecarVersion is the injecting manager's version, as a label value.
	LabelSidecarVersion = "ratelimit.dev/sidecar-version"
	// AnnotationSidecarImage is the sidecar's image.
	AnnotationSidecarImage = "ratelimit.dev/sidecar-image"
)

// Names of what the injection adds to the Pod.
const (
	// ContainerName is the sidecar's (init) container; its presence marks a Pod as injected.
	ContainerName = "ratelimit-sidecar"
	// SnapshotVolume mounts the namespace's snapshot ConfigMap.
	SnapshotVolume = "ratelimit-snapshot"
	// CredentialsVolume mounts the namespace's Redis credentials Secret.
	CredentialsVolume = "ratelimit-redis-credentials"
)

// What the sidecar reads, as config/samples/example-app-sidecar mounts it.
const (
	// SnapshotConfigMap is the namespace's snapshot, written by the manager.
	SnapshotConfigMap = "ratelimit-snapshot"
	// SnapshotDir is where the snapshot ConfigMap is mounted.
	SnapshotDir = "/etc/ratelimit"
	// SnapshotFile is the sidecar's --snapshot-file.
	SnapshotFile = SnapshotDir + "/snapshot.json"
	// CredentialsSecret is the namespace's Redis credentials (kubernetes.io/basic-auth).
	CredentialsSecret = "ratelimit-redis-credentials"
	// CredentialsDir is where the credentials Secret is mounted: --redis-credentials-path.
	CredentialsDir = "/var/run/secrets/ratelimit/redis" //nolint:gosec // a mount path, not a credential
	// SidecarCommand is the sidecar binary in the operator's image.
	SidecarCommand = "/usr/local/bin/sidecar"
)
