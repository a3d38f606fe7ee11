package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// tenancyOptions are the flags of per-namespace Redis users.
type tenancyOptions struct {
	enabled        bool
	secretName     string
	userPrefix     string
	rotationPeriod time.Duration
	grace          time.Duration
	allowEvalSHA   bool
}

func (t *tenancyOptions) bind(fs *flag.FlagSet) {
	fs.BoolVar(&t.enabled, "redis-tenant-users", false,
		"Give each namespace with policies its own Redis ACL user, limited to its keys, with its credentials in a Secret of the namespace. --redis-credentials-path must then name an administrative user (config/redis/acl.conf).")
	fs.StringVar(&t.secretName, "redis-tenant-secret-name", tenancy.DefaultSecretName,
		"Name of the kubernetes.io/basic-auth Secret written in each namespace (the one sidecars mount). Another name needs the ClusterRole's secrets resourceNames changed too.")
	fs.StringVar(&t.userPrefix, "redis-tenant-user-prefix", tenancy.DefaultUserPrefix,
		"Prefix of the per-namespace Redis user names (<prefix><namespace>). Users with it belong to this manager: give managers sharing one Redis different prefixes.")
	fs.DurationVar(&t.rotationPeriod, "redis-tenant-rotation-period", 0,
		"Replace each namespace's Redis password at this age; 0 (default) rotates only on request (annotation policy.ratelimit.dev/rotate on the Secret).")
	fs.BoolVar(&t.allowEvalSHA, "redis-tenant-allow-evalsha", false,
		"Also grant each namespace's user EVALSHA (never EVAL), for an upgrade while sidecars of a version that calls the scripts with EVALSHA still run; turn it off once every sidecar is upgraded (they then call the functions the manager loads, with FCALL).")
	fs.DurationVar(&t.grace, "redis-tenant-password-grace", tenancy.DefaultGrace,
		"How long Redis keeps accepting a replaced password, and keeps a namespace's user after its last policy: longer than the kubelet takes to refresh a mounted Secret.")
}

// validate reports the first bad flag, by name.
func (t *tenancyOptions) validate() error {
	if !t.enabled {
		return nil
	}
	switch {
	case t.grace <= 0:
		return fmt.Errorf("--redis-tenant-password-grace: %s; a replaced password must stay valid until the kubelet has refreshed every mount", t.grace)
	case t.rotationPeriod < 0 || (t.rotationPeriod > 0 && t.rotationPeriod <= t.grace):
		return fmt.Errorf("--redis-tenant-rotation-period: %s; 0 (off) or longer than --redis-tenant-password-grace %s", t.rotationPeriod, t.grace)
	case len(validation.IsDNS1123Subdomain(t.secretName)) > 0:
		return fmt.Errorf("--redis-tenant-secret-name: %q: %s", t.secretName, strings.Join(validation.IsDNS1123Subdomain(t.secretName), "; "))
	case t.userPrefix == "" || strings.ContainsAny(t.userPrefix, " \t\r\n"):
		return fmt.Errorf("--redis-tenant-user-prefix: %q is empty or holds whitespace", t.userPrefix)
	}
	return nil
}

// addCache restricts the manager's Secret cache to the credentials Secrets.
func (t *tenancyOptions) addCache(byObject map[client.Object]cache.ByObject) {
	if t.enabled {
		obj, by := tenancy.SecretCache(t.secretName)
		byObject[obj] = by
	}
}

// setup registers the per-namespace users on nodes (the default Redis) and, with
// RedisBackends on, on the Redis of each (redises) when enabled; unknown is the repair
// loops' shared channel.
func (t *tenancyOptions) setup(mgr ctrl.Manager, nodes redisacl.Nodes, ro redisconn.Options, resync time.Duration,
	keyPrefix string, redises *redisbackend.Redises, unknown chan event.GenericEvent) error {
	if !t.enabled {
		return nil
	}
	o := tenancy.Options{Nodes: nodes, Topology: ro.Topology(),
		SecretName: t.secretName, UserPrefix: t.userPrefix, RotationPeriod: t.rotationPeriod, Grace: t.grace,
		Resync: resync, KeyPrefix: keyPrefix, AllowEvalSHA: t.allowEvalSHA, Unknown: unknown}
	if redises.Enabled() {
		o.Redises = redises
	}
	err := tenancy.Setup(mgr, o)
	if err != nil {
		return fmt.Errorf("--redis-tenant-*: %w", err)
	}
	return nil
}

// usersPrefix is the prefix of the per-namespace users' names; "" without them.
func (t *tenancyOptions) usersPrefix() string {
	if !t.enabled {
		return ""
	}
	return t.userPrefix
}
