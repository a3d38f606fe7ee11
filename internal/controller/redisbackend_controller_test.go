package controller

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// TestBackendReady: Ready is True only when every reported condition is, and otherwise
// carries the first failing one's reason and message; UsersReady counts only when reported.
func TestBackendReady(t *testing.T) {
	b := &v1alpha1.RedisBackend{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Status: v1alpha1.RedisBackendStatus{Namespaces: []string{"a", "b"}}}
	setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionTrue, v1alpha1.ReasonConnected, "answers")
	setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded, "loaded")
	setBackendReady(b)
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 || c.Message != "serves 2 namespace(s)" {
		t.Fatalf("Ready %+v", c)
	}
	setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionUnknown, v1alpha1.ReasonNotChecked, "not checked yet")
	setBackendCondition(b, v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonNamespaceConflict, "c")
	setBackendReady(b)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse ||
		c.Reason != v1alpha1.ReasonNotChecked || c.Message != "UsersReady: not checked yet" {
		t.Fatalf("Ready with UsersReady unknown: %+v", c)
	}
	setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonCredentialsUnavailable, "no Secret")
	setBackendReady(b)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonCredentialsUnavailable {
		t.Fatalf("Ready with Connected False: %+v", c)
	}
}

// TestOptionsKey: a connection is rebuilt when what reaches Redis changes (addresses, TLS,
// its CA, whether it authenticates), not when only the password does (new connections read
// it).
func TestOptionsKey(t *testing.T) {
	creds := func(context.Context) (string, string, error) { return "u", "p", nil }
	base := redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{"r:6379"}, Credentials: creds}
	key := optionsKey(base)
	same := base
	same.Credentials = func(context.Context) (string, string, error) { return "u", "rotated", nil }
	if optionsKey(same) != key {
		t.Error("another credentials provider changed the key")
	}
	for name, edit := range map[string]func(o *redisconn.Options){
		"addrs":   func(o *redisconn.Options) { o.Addrs = []string{"s:6379"} },
		"db":      func(o *redisconn.Options) { o.DB = 1 },
		"tls":     func(o *redisconn.Options) { o.TLS.Enabled = true },
		"ca":      func(o *redisconn.Options) { o.TLS.Enabled, o.TLS.CA = true, []byte("pem") },
		"no auth": func(o *redisconn.Options) { o.Credentials = nil },
	} {
		o := base
		edit(&o)
		if optionsKey(o) == key {
			t.Errorf("a change of %s kept the key", name)
		}
	}
}

func TestJoinLimited(t *testing.T) {
	if got := joinLimited([]string{"a", "b", "c"}, 2); got != "a, b and 1 more" {
		t.Errorf("joinLimited: %q", got)
	}
}

// TestBackendMemoryMetrics: a RedisBackend's memory monitor is exported beside the default
// Redis's, its series labelled backend=<name>, until the backend goes.
func TestBackendMemoryMetrics(t *testing.T) {
	c := &monitorCollector{}
	c.monitor.Store(&redismemory.Monitor{})
	iso := &redismemory.Monitor{}
	c.addBackend("isolated", iso)
	reg := prometheus.NewRegistry() // as controller-runtime's metrics.Registry: not pedantic
	reg.MustRegister(c)
	series := func() []string {
		families, err := prometheus.Gatherers{reg}.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range families {
			if f.GetName() != "ratelimit_redis_memory_check_failures_total" {
				continue
			}
			for _, m := range f.Metric {
				labels := ""
				for _, l := range m.Label {
					labels += l.GetName() + "=" + l.GetValue()
				}
				out = append(out, labels)
			}
		}
		return out
	}
	if got := series(); !slices.Equal(got, []string{"", "backend=isolated"}) {
		t.Errorf("check failure series %q; want the default's and the backend's", got)
	}
	c.removeBackend("isolated", &redismemory.Monitor{}) // another monitor: not this backend's
	c.removeBackend("isolated", iso)
	if got := series(); !slices.Equal(got, []string{""}) {
		t.Errorf("after the backend went: %q", got)
	}
}

// TestRedisPlaceDiffers: a namespace moved when its snapshot names another backend or the
// same one pointed at other addresses (its counters start fresh either way); not when only
// the functions flag or TLS changed.
func TestRedisPlaceDiffers(t *testing.T) {
	base := redisPlace{backend: "isolated", redis: snapshot.Redis{Mode: "standalone", Addrs: []string{"a:6379"}}}
	for name, c := range map[string]struct {
		edit func(*redisPlace)
		want bool
	}{
		"nothing":     {func(*redisPlace) {}, false},
		"functions":   {func(p *redisPlace) { p.redis.Functions, p.redis.TLS = true, true }, false},
		"backend":     {func(p *redisPlace) { p.backend = "" }, true},
		"addresses":   {func(p *redisPlace) { p.redis.Addrs = []string{"b:6379"} }, true},
		"database":    {func(p *redisPlace) { p.redis.DB = 2 }, true},
		"master name": {func(p *redisPlace) { p.redis.Mode, p.redis.MasterName = "sentinel", "m" }, true},
	} {
		p := base
		p.redis.Addrs = slices.Clone(base.redis.Addrs)
		c.edit(&p)
		if got := base.differs(p); got != c.want {
			t.Errorf("%s: differs %v, want %v", name, got, c.want)
		}
	}
	if got := base.String(); got != "RedisBackend isolated (a:6379)" {
		t.Errorf("String %q", got)
	}
}
