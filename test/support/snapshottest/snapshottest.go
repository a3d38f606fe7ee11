// Package snapshottest (import path test/support/snapshot; the name does not shadow
// internal/snapshot) builds snapshot documents exactly as the controller publishes them
// (publishing.SnapshotOf: defaults, compile, scripts, seal), for the tests of their readers.
package snapshottest

import (
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Build is the sealed snapshot of policies in namespace, naming a standalone Redis at
// redisAddr. A policy the controller would leave out (it does not compile) fails the test.
func Build(t testing.TB, namespace, redisAddr string, policies ...*v1alpha1.RateLimitPolicy) *snapshot.Snapshot {
	t.Helper()
	return BuildFor(t, namespace, Standalone(redisAddr), policies...)
}

// Standalone is the topology of the standalone Redis at addr, as the controller publishes it.
func Standalone(addr string) snapshot.Redis {
	return snapshot.Redis{Mode: "standalone", Addrs: []string{addr}}
}

// BuildFor is Build naming the Redis redis (a topology, and whether the scripts are
// functions).
func BuildFor(t testing.TB, namespace string, redis snapshot.Redis, policies ...*v1alpha1.RateLimitPolicy) *snapshot.Snapshot {
	t.Helper()
	items := make([]v1alpha1.RateLimitPolicy, len(policies))
	for i, p := range policies {
		items[i] = *p.DeepCopy()
		items[i].Namespace = namespace
	}
	s, _, err := publishing.SnapshotOf(namespace, redis, items)
	if err != nil {
		t.Fatalf("build snapshot: %v", err)
	}
	if len(s.Policies) != len(policies) {
		for _, p := range policies {
			p = p.DeepCopy()
			(policy.Rules{}).Default(p)
			if _, errs := (policy.Rules{}).CompileAsIs(p); len(errs) > 0 {
				t.Fatalf("compile %s: %v", p.Name, errs.ToAggregate())
			}
		}
		t.Fatalf("snapshot holds %d of %d policies", len(s.Policies), len(policies))
	}
	return s
}

// Entry is what the controller publishes for the stored policy p: compiled with the
// defaults applied in memory. A policy that does not compile fails the test.
func Entry(t testing.TB, p *v1alpha1.RateLimitPolicy) snapshot.Entry {
	t.Helper()
	c, errs := (policy.Rules{}).Compile(p)
	if len(errs) > 0 {
		t.Fatalf("compile %s: %v", p.Name, errs.ToAggregate())
	}
	return c.Entry
}

// Document is Build's canonical JSON, what the ConfigMap's snapshot.json holds.
func Document(t testing.TB, namespace, redisAddr string, policies ...*v1alpha1.RateLimitPolicy) []byte {
	t.Helper()
	return DocumentFor(t, namespace, Standalone(redisAddr), policies...)
}

// DocumentFor is Document naming the Redis redis.
func DocumentFor(t testing.TB, namespace string, redis snapshot.Redis, policies ...*v1alpha1.RateLimitPolicy) []byte {
	t.Helper()
	b, err := BuildFor(t, namespace, redis, policies...).Marshal()
	if err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
	return b
}

// WithOverrides attaches overrides to s as the controller publishes them
// (publishing.AttachOverrides, at now) and reseals it; an override the controller would
// leave out fails the test.
func WithOverrides(t testing.TB, s *snapshot.Snapshot, overrides ...*v1alpha1.RateLimitOverride) *snapshot.Snapshot {
	t.Helper()
	items := make([]v1alpha1.RateLimitOverride, len(overrides))
	for i, o := range overrides {
		items[i] = *o.DeepCopy()
		items[i].Namespace = s.Namespace
	}
	verdicts, _, err := publishing.AttachOverrides(s, items, time.Now())
	if err != nil {
		t.Fatalf("attach overrides: %v", err)
	}
	for name, v := range verdicts {
		if !v.Applied() {
			t.Fatalf("override %s: %s: %s", name, v.Reason, v.Message)
		}
	}
	return s
}
