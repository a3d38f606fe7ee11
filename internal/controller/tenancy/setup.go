package tenancy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// DefaultGrace is how long a replaced password stays valid, and a namespace's user
// outlives its last policy: the kubelet refreshes a mounted Secret or ConfigMap within its
// sync period (1 min) plus its cache TTL (up to 1 min more), so 5 min leaves room.
const DefaultGrace = 5 * time.Minute

// redisRetry is how long a namespace waits to retry its user while Redis is unavailable:
// the policy controller's redisbackend.Retry.
const redisRetry = 5 * time.Second

// Options configure per-namespace Redis users (Setup).
type Options struct {
	// Nodes are every node of the Redis deployment (redisacl.NodesOf). Required.
	Nodes redisacl.Nodes
	// Topology is the Redis the sidecars reach: Cluster adds CLUSTER SLOTS and COMMAND to
	// the users' commands, a database other than 0 adds SELECT.
	Topology redisconn.Topology
	// SecretName is the credentials Secret in each namespace. Default DefaultSecretName.
	SecretName string
	// UserPrefix begins each user name. Default DefaultUserPrefix. Users with the
	// prefix belong to this manager: two managers sharing a Redis need different prefixes.
	UserPrefix string
	// KeyPrefix is the operator's key prefix. Default redisacl.DefaultKeyPrefix.
	KeyPrefix string
	// RotationPeriod replaces each password at this age; 0 never (on request only).
	RotationPeriod time.Duration
	// Grace is how long a replaced password stays valid. Default DefaultGrace.
	Grace time.Duration
	// Resync is how often every node's users are checked and repaired. Default 10s.
	Resync time.Duration
	// AllowEvalSHA grants the users EVALSHA (never EVAL) besides FCALL, for an upgrade while
	// sidecars of a version that calls the scripts with EVALSHA still run.
	AllowEvalSHA bool
	// Redises, when set, says which Redis serves each namespace (RedisBackends, which the
	// API server must serve: their changes are watched): a namespace's user lives on that
	// Redis's nodes. Nil: every namespace on Nodes.
	Redises Redises
	// Unknown, when set, is the channel the repair loops send the namespaces of managed
	// users found unasked: the RedisBackends' loops share it with the default Redis's.
	Unknown chan event.GenericEvent
}

// withDefaults fills in the defaults.
func (o Options) withDefaults() Options {
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.UserPrefix == "" {
		o.UserPrefix = DefaultUserPrefix
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = redisacl.DefaultKeyPrefix
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	return o
}

// Validate reports the first option that cannot work.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Nodes == nil:
		return errors.New("tenancy: no Redis nodes")
	case len(validation.IsDNS1123Subdomain(o.SecretName)) > 0:
		return fmt.Errorf("secret name %q: %s", o.SecretName, strings.Join(validation.IsDNS1123Subdomain(o.SecretName), "; "))
	case strings.ContainsAny(o.UserPrefix, " \t\r\n\x00"):
		return fmt.Errorf("user prefix %q holds whitespace", o.UserPrefix)
	case o.Grace < 0:
		return fmt.Errorf("grace %s is negative", o.Grace)
	case o.RotationPeriod < 0 || (o.RotationPeriod > 0 && o.RotationPeriod <= o.Grace):
		return fmt.Errorf("rotation period %s: 0 (off) or longer than the grace %s", o.RotationPeriod, o.Grace)
	}
	_, err := redisacl.KeyPattern(o.KeyPrefix, "ns")
	return err
}

// Setup registers per-namespace Redis users: the Reconciler and the
// Repairer, both leader only. The manager's cache must hold only the credentials
// Secrets (SecretCache): the manager may read no other Secret.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.withDefaults()
	users := &redisacl.Users{Nodes: o.Nodes, Prefix: o.UserPrefix}
	unknown := o.Unknown
	if unknown == nil {
		unknown = NewUnknown()
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Users: users, Topology: o.Topology,
		Redises: o.Redises, Recorder: mgr.GetEventRecorder("ratelimit-operator"), SecretName: o.SecretName,
		UserPrefix: o.UserPrefix, KeyPrefix: o.KeyPrefix, AllowEvalSHA: o.AllowEvalSHA,
		RotationPeriod: o.RotationPeriod, Grace: o.Grace, Unknown: unknown}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("tenant controller: %w", err)
	}
	repairer := &Repairer{Users: users, UserPrefix: o.UserPrefix, Resync: o.Resync, Unknown: unknown,
		Log: mgr.GetLogger().WithName("tenant-users")}
	if err := mgr.Add(repairer); err != nil {
		return fmt.Errorf("add tenant user repairer: %w", err)
	}
	return nil
}

// NewUnknown is a channel for Options.Unknown.
func NewUnknown() chan event.GenericEvent { return make(chan event.GenericEvent, 1024) }

// SecretCache is the manager cache entry for the credentials Secrets: only Secrets
// named name are listed and watched (the ClusterRole grants no other), as snapshot
// ConfigMaps are.
func SecretCache(name string) (client.Object, cache.ByObject) {
	if name == "" {
		name = DefaultSecretName
	}
	return &corev1.Secret{}, cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
}
