package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/ratelimitpolicy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestCreateReady: a new policy becomes Ready with its status filled in, its script is
// loaded on the Redis primary, and its namespace's snapshot holds its compiled form.
func TestCreateReady(t *testing.T) {
	e, ns := suiteNamespace(t)
	p := newPolicy(ns, "orders", 10)
	create(t, e, p)
	got := waitReady(t, e, ns, "orders")
	checkReadyPolicy(t, e, got, standaloneTopology(standby).Addrs, "standalone")
	waitScriptsLoaded(t, e, ns, "orders")
	if err := scriptsLoaded(ctxFor(t), standby.Client()); err != nil {
		t.Fatalf("standalone primary: %v", err)
	}
}

// checkReadyPolicy checks everything a Ready policy promises: status, finalizer, snapshot.
func checkReadyPolicy(t *testing.T, e *kube.Env, got *v1alpha1.RateLimitPolicy, addrs []string, mode string) {
	t.Helper()
	script := checkReadyStatus(t, got)
	cm, s, err := getSnapshot(e, got.Namespace)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if cm.Labels[snapshot.LabelSnapshot] != "true" {
		t.Errorf("snapshot labels %v lack %s=true", cm.Labels, snapshot.LabelSnapshot)
	}
	if got.Status.Snapshot == nil || got.Status.Snapshot.Name != snapshot.ConfigMapName ||
		got.Status.Snapshot.Version != s.Version || cm.Annotations[snapshot.AnnotationVersion] != s.Version {
		t.Errorf("status.snapshot %+v, ConfigMap version %q annotation %q", got.Status.Snapshot, s.Version, cm.Annotations[snapshot.AnnotationVersion])
	}
	if s.Namespace != got.Namespace || s.Redis.Mode != mode || !slices.Equal(s.Redis.Addrs, addrs) {
		t.Errorf("snapshot namespace %q redis %+v, want %s %s %v", s.Namespace, s.Redis, got.Namespace, mode, addrs)
	}
	i := slices.IndexFunc(s.Policies, func(p snapshot.Entry) bool { return p.Name == got.Name })
	if i < 0 {
		t.Fatalf("snapshot does not hold %s: %v", got.Name, policyNames(s))
	}
	if wantEntry := snapshottest.Entry(t, got); !reflect.DeepEqual(s.Policies[i], wantEntry) {
		t.Errorf("snapshot entry\n%+v\nwant the compiled policy\n%+v", s.Policies[i], wantEntry)
	}
	if !slices.ContainsFunc(s.Scripts, func(sc snapshot.Script) bool { return sc.Name == script.Name && sc.SHA == script.SHA }) {
		t.Errorf("snapshot scripts %+v lack %s", s.Scripts, script.Name)
	}
	if !slices.ContainsFunc(cm.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == got.UID }) {
		t.Errorf("snapshot owner references %+v lack the policy", cm.OwnerReferences)
	}
}

// checkReadyStatus checks a Ready policy's status and finalizer and returns its script.
func checkReadyStatus(t *testing.T, got *v1alpha1.RateLimitPolicy) *limiter.Script {
	t.Helper()
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionScriptsLoaded, v1alpha1.ConditionPublished} {
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s: %+v", typ, c)
		}
	}
	want, err := limiter.ScriptFor(limiter.Algorithm(got.Spec.Algorithm))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Scripts) != 1 || got.Status.Scripts[0].Name != want.Name || got.Status.Scripts[0].SHA != want.SHA {
		t.Errorf("status.scripts %+v, want [%s %s]", got.Status.Scripts, want.Name, want.SHA)
	}
	if !slices.Contains(got.Finalizers, ratelimitpolicy.Finalizer) {
		t.Errorf("finalizers %v lack %s", got.Finalizers, ratelimitpolicy.Finalizer)
	}
	return want
}

// TestUpdate: changing a policy's requests publishes a new snapshot version holding the new
// value, and the policy is Ready again for the new generation with that version.
func TestUpdate(t *testing.T) {
	e, ns := suiteNamespace(t)
	create(t, e, newPolicy(ns, "search", 10))
	p := waitReady(t, e, ns, "search")
	v1 := p.Status.Snapshot.Version

	p.Spec.Limits[0].Requests = 25
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatalf("update: %v", err)
	}
	var got *v1alpha1.RateLimitPolicy
	wait.Eventually(t, readyTimeout, "Ready with a new snapshot version", func() error {
		var err error
		if got, err = getPolicy(e, ns, "search"); err != nil {
			return err
		}
		if err := readyErr(got); err != nil {
			return err
		}
		if got.Generation != 2 || got.Status.Snapshot.Version == v1 {
			return fmt.Errorf("generation %d, snapshot version %s (old %s)", got.Generation, got.Status.Snapshot.Version, v1)
		}
		return nil
	})
	checkReadyPolicy(t, e, got, standaloneTopology(standby).Addrs, "standalone")
	_, s, err := getSnapshot(e, ns)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Policies[0].Limits[0].Requests; r != 25 || s.Version != got.Status.Snapshot.Version {
		t.Fatalf("snapshot %s holds requests %d, want 25 in version %s", s.Version, r, got.Status.Snapshot.Version)
	}
}

// TestDelete: a deleted policy leaves the snapshot before it goes; the namespace's last
// policy takes the ConfigMap with it.
func TestDelete(t *testing.T) {
	e, ns := suiteNamespace(t)
	a, _, _ := readyPair(t, e, ns)

	if err := e.Client.Delete(context.Background(), a); err != nil {
		t.Fatalf("delete a: %v", err)
	}
	waitGone(t, e, ns, "a")
	_, s := waitSnapshot(t, e, ns, "b")
	wait.Eventually(t, readyTimeout, "b reports the new snapshot version", func() error {
		b, err := getPolicy(e, ns, "b")
		if err != nil {
			return err
		}
		if err := readyErr(b); err != nil {
			return err
		}
		if b.Status.Snapshot.Version != s.Version {
			return fmt.Errorf("b reports version %s, ConfigMap has %s", b.Status.Snapshot.Version, s.Version)
		}
		return nil
	})

	b, err := getPolicy(e, ns, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(context.Background(), b); err != nil {
		t.Fatalf("delete b: %v", err)
	}
	waitGone(t, e, ns, "b")
	waitNoSnapshot(t, e, ns)
}

// waitGone waits until the policy is deleted for good (its finalizer removed).
func waitGone(t testing.TB, e *kube.Env, ns, name string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, name+" deleted", func() error {
		p, err := getPolicy(e, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, deletionTimestamp %v, finalizers %v", p.DeletionTimestamp, p.Finalizers)
	})
}

// TestInvalidPolicy: a stored policy the API server accepts (no webhook here) but that does
// not compile is reported InvalidPolicy with the field, is not published, is not retried in a
// loop, and does not disturb the namespace's other policies; fixing it makes it Ready.
func TestInvalidPolicy(t *testing.T) {
	e, ns := suiteNamespace(t)
	bad := newPolicy(ns, "bad", 10)
	// Two limits share one key: CEL allows it, the limiter does not.
	bad.Spec.Limits = append(bad.Spec.Limits, v1alpha1.Limit{Name: "per-minute", Requests: 100,
		Period: metav1.Duration{Duration: time.Minute}})
	bad.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:${namespace}/${identity}}"}
	create(t, e, newPolicy(ns, "good", 10), bad)

	waitReady(t, e, ns, "good")
	got := waitCondition(t, e, ns, "bad", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy)
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(ready.Message, "spec.keyLayout.state") {
		t.Errorf("Ready message %q does not name spec.keyLayout.state", ready.Message)
	}
	for _, typ := range []string{v1alpha1.ConditionScriptsLoaded, v1alpha1.ConditionPublished} {
		if c := meta.FindStatusCondition(got.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonInvalidPolicy {
			t.Errorf("condition %s: %+v", typ, c)
		}
	}
	if got.Status.Snapshot != nil || len(got.Status.Scripts) != 0 || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status %+v: want observedGeneration %d, no snapshot and no scripts", got.Status, got.Generation)
	}
	_, s := waitSnapshot(t, e, ns, "good")
	// No crash loop: the invalid policy's object and the snapshot stay put over several
	// resync periods, and good stays Ready.
	rv := got.ResourceVersion
	wait.Consistently(t, 4*resync, "invalid policy left alone", func() error {
		p, err := getPolicy(e, ns, "bad")
		if err != nil {
			return err
		}
		if p.ResourceVersion != rv {
			return fmt.Errorf("rewritten: resourceVersion %s -> %s, status %+v", rv, p.ResourceVersion, p.Status)
		}
		_, now, err := getSnapshot(e, ns)
		if err != nil || now.Version != s.Version {
			return fmt.Errorf("snapshot changed (err %w)", err)
		}
		g, err := getPolicy(e, ns, "good")
		if err != nil {
			return err
		}
		return readyErr(g)
	})

	// Fixing the layout makes it Ready and publishes it.
	got.Spec.KeyLayout.State = "{rl:${namespace}/${identity}}:${limit}"
	if err := e.Client.Update(context.Background(), got); err != nil {
		t.Fatalf("fix: %v", err)
	}
	fixed := waitReady(t, e, ns, "bad")
	checkReadyPolicy(t, e, fixed, standaloneTopology(standby).Addrs, "standalone")
	waitSnapshot(t, e, ns, "bad", "good")
}

// TestInvalidEditKeepsLastValidVersion: an edit that does not compile (here stored without
// the webhook; equally a rule added by an upgrade) must not lift a limit that is enforced:
// the snapshot keeps the policy's last valid entry, the policy says it is invalid and that
// its last version stays enforced, and fixing it publishes the fix.
func TestInvalidEditKeepsLastValidVersion(t *testing.T) {
	e, ns := suiteNamespace(t)
	readyPolicy(t, e, ns, "kept")
	_, before := waitSnapshot(t, e, ns, "kept")
	p, err := getPolicy(e, ns, "kept")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Limits = append(p.Spec.Limits, v1alpha1.Limit{Name: "per-minute", Requests: 100,
		Period: metav1.Duration{Duration: time.Minute}})
	p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:${namespace}/${identity}}"} // two limits, one key
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, e, ns, "kept", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "spec.keyLayout.state") ||
		!strings.Contains(msg, "last valid version stays enforced") {
		t.Errorf("Ready message %q: want the field and that the last valid version stays enforced", msg)
	}
	wait.Consistently(t, 2*resync, "last valid entry kept", func() error {
		_, now, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(now.Policies, before.Policies) {
			return fmt.Errorf("snapshot policies %+v, want the last valid %+v", now.Policies, before.Policies)
		}
		return nil
	})
	got.Spec.KeyLayout.State = "{rl:${namespace}/${identity}}:${limit}"
	if err := e.Client.Update(context.Background(), got); err != nil {
		t.Fatalf("fix: %v", err)
	}
	fixed := waitReady(t, e, ns, "kept")
	checkReadyPolicy(t, e, fixed, standaloneTopology(standby).Addrs, "standalone")
}

// TestStoredPolicyOutOfScope: a policy naming another namespace's keys, stored without the
// webhook (or before the key scope rule existed), is not Ready, says which prefix its keys
// must begin with, and is not published; the namespace's other policies are.
func TestStoredPolicyOutOfScope(t *testing.T) {
	e, ns := suiteNamespace(t)
	thief := newPolicy(ns, "thief", 10)
	thief.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:victim/payments:${identity}}:${limit}"}
	create(t, e, newPolicy(ns, "honest", 10), thief)
	waitReady(t, e, ns, "honest")
	got := waitCondition(t, e, ns, "thief", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "spec.keyLayout.state") ||
		!strings.Contains(msg, `must begin with "{rl:${namespace}/"`) {
		t.Errorf("Ready message %q: want the field and the required prefix", msg)
	}
	_, s := waitSnapshot(t, e, ns, "honest")
	if slices.ContainsFunc(s.Policies, func(p snapshot.Entry) bool { return p.Name == "thief" }) {
		t.Fatalf("the out-of-scope policy was published")
	}
}
