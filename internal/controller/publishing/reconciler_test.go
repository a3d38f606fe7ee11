package publishing

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

func testPolicy(ns, name string, requests int64) v1alpha1.RateLimitPolicy {
	p := policytest.New(ns, name, policytest.Paths("/"+name), policytest.Requests(requests))
	p.UID = types.UID("uid-" + name)
	return *p
}

func entryOf(t *testing.T, p v1alpha1.RateLimitPolicy) snapshot.Entry {
	t.Helper()
	c, errs := (policy.Rules{}).Compile(&p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return c.Entry
}

// configMapOf is the ConfigMap a sync writes for the policies.
func configMapOf(t *testing.T, ns string, ps ...v1alpha1.RateLimitPolicy) *corev1.ConfigMap {
	t.Helper()
	s, owners, err := SnapshotOf(ns, snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}}, ps)
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}
	fill(cm, published{data: data, version: s.Version, owners: owners, place: redisPlace{redis: s.Redis}})
	return cm
}

// TestPublishedAfterRestart: a controller that has not synced a namespace yet reports what
// its ConfigMap holds (no PublishPending flap after a restart); an edited ConfigMap is not
// trusted; a missing one holds nothing. The first sync after such a read always notifies.
func TestPublishedAfterRestart(t *testing.T) {
	a, b := testPolicy("ns", "a", 10), testPolicy("ns", "b", 20)
	cm := configMapOf(t, "ns", a)
	edited := configMapOf(t, "edited", a)
	edited.Data[snapshot.DataKey] = `{"schemaVersion":1}`
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cm, edited).Build()
	pubs := &Publications{Reader: c}
	r := &Reconciler{Client: c, Publications: pubs}
	ctx := context.Background()

	version, ok, problem := pubs.Published(ctx, "ns", entryOf(t, a))
	if !ok || version != cm.Annotations[snapshot.AnnotationVersion] || problem != "" {
		t.Fatalf("a: Published %q %v %q, want the ConfigMap's version", version, ok, problem)
	}
	changedA := a
	changedA.Spec.Limits[0].Requests = 11
	if _, ok, _ := pubs.Published(ctx, "ns", entryOf(t, changedA)); ok {
		t.Error("a with other requests reported published")
	}
	if _, ok, _ := pubs.Published(ctx, "ns", entryOf(t, b)); ok {
		t.Error("b reported published")
	}
	for _, c := range []struct {
		ns, name string
		want     bool
	}{
		{"ns", "a", true}, {"ns", "b", false},
		{"edited", "a", true}, {"edited", "zzz", true}, // not known: wait
		{"empty", "a", false},
	} {
		if got := pubs.Holds(ctx, c.ns, c.name); got != c.want {
			t.Errorf("Holds(%s, %s) = %v, want %v", c.ns, c.name, got, c.want)
		}
	}

	// The first sync of a seeded namespace notifies even when it writes the same version.
	if err := r.Sync(ctx, "ns"); err != nil { // no policies in the fake: removes the ConfigMap
		t.Fatal(err)
	}
	select {
	case ev := <-pubs.Changed():
		if ev.Object.GetNamespace() != "ns" {
			t.Errorf("Changed for %s", ev.Object.GetNamespace())
		}
	default:
		t.Fatal("no Changed event after the first sync of a seeded namespace")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err == nil {
		t.Error("ConfigMap of a namespace without policies not removed")
	}
	if pubs.Holds(ctx, "ns", "a") {
		t.Error("a still held after the sync removed it")
	}
}

// TestSyncWritesOnlyChanges: a sync that would write the same bytes does not write.
func TestSyncWritesOnlyChanges(t *testing.T) {
	a := testPolicy("ns", "a", 10)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&a).Build()
	r := &Reconciler{Client: c, Redis: snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}}}
	ctx := context.Background()
	if err := r.Sync(ctx, "ns"); err != nil {
		t.Fatal(err)
	}
	var first corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: snapshot.ConfigMapName}, &first); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.Sync(ctx, "ns"); err != nil {
			t.Fatal(err)
		}
	}
	var again corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(&first), &again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != first.ResourceVersion || again.Data[snapshot.DataKey] != first.Data[snapshot.DataKey] {
		t.Fatalf("rewritten: resourceVersion %s -> %s", first.ResourceVersion, again.ResourceVersion)
	}
}

// TestBuildPublishesTheKeyPrefix: the snapshot carries the installation's key prefix (so
// sidecars check every entry against it), defaulted layouts begin with it, and a layout
// written for another prefix is left out.
func TestBuildPublishesTheKeyPrefix(t *testing.T) {
	rules := policy.Rules{KeyPrefix: "acme:"}
	other := testPolicy("shop", "other", 5)
	other.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:${namespace}/${policy}:${identity}}:${limit}"}
	s, _, err := SnapshotOver(rules, "shop", snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}},
		[]v1alpha1.RateLimitPolicy{testPolicy("shop", "orders", 5), other}, Published{})
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyPrefix != "acme:" || len(s.Policies) != 1 || s.Policies[0].Name != "orders" ||
		s.Policies[0].StateKey != "{acme:${namespace}/${policy}:${identity}}:${limit}" {
		t.Fatalf("snapshot prefix %q, policies %+v; want acme: and only orders, on the acme: default layout", s.KeyPrefix, s.Policies)
	}
	if err := s.Policies[0].InScope(s.Prefix()); err != nil {
		t.Fatal(err)
	}
}

// TestBuildDropsAnOutOfScopeLastEntry: a policy published before the key scope rule existed
// with keys outside its namespace's scope (here another namespace's) no longer compiles; its
// last published entry is not kept, since it is out of scope too: the policy is left out.
func TestBuildDropsAnOutOfScopeLastEntry(t *testing.T) {
	old := testPolicy("shop", "legacy", 5)
	legacy := entryOf(t, old)
	legacy.StateKey = "{rl:search:${identity}}:${limit}"
	last := Published{Snapshot: &snapshot.Snapshot{Namespace: "shop", Policies: []snapshot.Entry{legacy}},
		Owners: []metav1.OwnerReference{{Name: "legacy", UID: old.UID}}}
	stored := old.DeepCopy()
	stored.Spec.KeyLayout = &v1alpha1.KeyLayout{State: legacy.StateKey}
	s, _, err := SnapshotOver(policy.Rules{}, "shop", snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}},
		[]v1alpha1.RateLimitPolicy{*stored}, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 0 {
		t.Fatalf("an out-of-scope policy kept its out-of-scope entry: %+v", s.Policies)
	}
}
