package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// readyTimeout bounds every wait for the controller to act.
const readyTimeout = 20 * time.Second

func ctxFor(t testing.TB) context.Context { return wait.Context(t, 2*time.Minute) }

// newPolicy is a valid policy as a user without the webhook would store it: no keyLayout
// (the controller defaults it in memory), TokenBucket, requests per second per API key.
func newPolicy(ns, name string, requests int64) *v1alpha1.RateLimitPolicy {
	return policytest.New(ns, name, policytest.Paths("/api/"+name), policytest.Requests(requests))
}

// suiteNamespace is suite with a fresh namespace (prefix c-) for the test.
func suiteNamespace(t testing.TB) (*kube.Env, string) {
	t.Helper()
	e := suite(t)
	return e, kube.NewNamespace(t, e, "c-")
}

// readyPair creates policies a (10 requests) and b (20) in ns, waits until both are Ready
// and the snapshot holds both, and returns a as Ready and that snapshot.
func readyPair(t testing.TB, e *kube.Env, ns string) (*v1alpha1.RateLimitPolicy, *corev1.ConfigMap, *snapshot.Snapshot) {
	t.Helper()
	create(t, e, newPolicy(ns, "a", 10), newPolicy(ns, "b", 20))
	a := waitReady(t, e, ns, "a")
	waitReady(t, e, ns, "b")
	cm, s := waitSnapshot(t, e, ns, "a", "b")
	return a, cm, s
}

// readyPolicy creates newPolicy(ns, name, 10) and waits until it is Ready.
func readyPolicy(t testing.TB, e *kube.Env, ns, name string) {
	t.Helper()
	create(t, e, newPolicy(ns, name, 10))
	waitReady(t, e, ns, name)
}

func create(t testing.TB, e *kube.Env, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}

func getPolicy(e *kube.Env, ns, name string) (*v1alpha1.RateLimitPolicy, error) {
	var p v1alpha1.RateLimitPolicy
	err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p)
	return &p, err
}

// setRequests updates the stored policy's first limit to n requests per period.
func setRequests(t testing.TB, e *kube.Env, ns, name string, n int64) {
	t.Helper()
	p, err := getPolicy(e, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Limits[0].Requests = n
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
}

// deletePolicy deletes the stored policy.
func deletePolicy(t testing.TB, e *kube.Env, ns, name string) {
	t.Helper()
	p, err := getPolicy(e, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(context.Background(), p); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

// readyErr says why p is not Ready for its current generation, or nil.
func readyErr(p *v1alpha1.RateLimitPolicy) error {
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case p.Status.ObservedGeneration != p.Generation:
		return fmt.Errorf("%s: observedGeneration %d, generation %d", p.Name, p.Status.ObservedGeneration, p.Generation)
	case c == nil:
		return fmt.Errorf("%s: no Ready condition", p.Name)
	case c.Status != metav1.ConditionTrue || c.ObservedGeneration != p.Generation:
		return fmt.Errorf("%s: Ready %s (%s: %s) for generation %d", p.Name, c.Status, c.Reason, c.Message, c.ObservedGeneration)
	}
	return nil
}

// waitReady waits until the policy is Ready for its current generation and returns it.
func waitReady(t testing.TB, e *kube.Env, ns, name string) *v1alpha1.RateLimitPolicy {
	t.Helper()
	var p *v1alpha1.RateLimitPolicy
	wait.Eventually(t, readyTimeout, "policy "+name+" Ready", func() error {
		var err error
		if p, err = getPolicy(e, ns, name); err != nil {
			return err
		}
		return readyErr(p)
	})
	return p
}

// waitCondition waits until the policy's condition typ has the status and reason for the
// current generation and returns the policy.
func waitCondition(t testing.TB, e *kube.Env, ns, name, typ string, status metav1.ConditionStatus, reason string) *v1alpha1.RateLimitPolicy {
	t.Helper()
	var p *v1alpha1.RateLimitPolicy
	wait.Eventually(t, readyTimeout, fmt.Sprintf("%s %s=%s/%s", name, typ, status, reason), func() error {
		var err error
		if p, err = getPolicy(e, ns, name); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("condition %+v (generation %d)", c, p.Generation)
		}
		return nil
	})
	return p
}

// getSnapshot reads the namespace's snapshot ConfigMap and parses its document.
func getSnapshot(e *kube.Env, ns string) (*corev1.ConfigMap, *snapshot.Snapshot, error) {
	var cm corev1.ConfigMap
	if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}, &cm); err != nil {
		return nil, nil, err
	}
	s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
	if err != nil {
		return &cm, nil, fmt.Errorf("parse %s/%s: %w", ns, snapshot.ConfigMapName, err)
	}
	return &cm, s, nil
}

// waitSnapshot waits until the namespace's snapshot holds exactly the named policies.
func waitSnapshot(t testing.TB, e *kube.Env, ns string, names ...string) (*corev1.ConfigMap, *snapshot.Snapshot) {
	t.Helper()
	var cm *corev1.ConfigMap
	var s *snapshot.Snapshot
	want := strings.Join(names, ",")
	wait.Eventually(t, readyTimeout, "snapshot of "+ns+" holds "+want, func() error {
		var err error
		if cm, s, err = getSnapshot(e, ns); err != nil {
			return err
		}
		if got := strings.Join(policyNames(s), ","); got != want {
			return fmt.Errorf("holds %q", got)
		}
		return nil
	})
	return cm, s
}

// waitNoSnapshot waits until the namespace has no snapshot ConfigMap.
func waitNoSnapshot(t testing.TB, e *kube.Env, ns string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, "snapshot of "+ns+" removed", func() error {
		_, _, err := getSnapshot(e, ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %w)", err)
	})
}

func policyNames(s *snapshot.Snapshot) []string {
	out := make([]string, len(s.Policies))
	for i, p := range s.Policies {
		out[i] = p.Name
	}
	return out
}

// scriptSHAs are the SHAs of every script the loader keeps on Redis (lease scripts too).
func scriptSHAs() []string {
	var out []string
	for _, s := range limiter.AllScripts() {
		out = append(out, s.SHA)
	}
	return out
}

// waitScriptsLoaded waits until each named policy reports ScriptsLoaded=True for its
// generation. Ready means published, which does not wait for Redis: a test that then looks
// for the scripts on Redis must wait for this condition, or it races the loader.
func waitScriptsLoaded(t testing.TB, e *kube.Env, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		waitCondition(t, e, ns, name, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)
	}
}

// scriptsLoaded says which limiter scripts are missing on one Redis node.
func scriptsLoaded(ctx context.Context, c *redis.Client) error {
	shas := scriptSHAs()
	got, err := c.ScriptExists(ctx, shas...).Result()
	if err != nil {
		return err
	}
	var missing []string
	for i, ok := range got {
		if !ok {
			missing = append(missing, shas[i])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("scripts missing: %v", missing)
	}
	return nil
}

// policyEvents lists the events.k8s.io/v1 events about one policy (every policy of the
// namespace when name is empty).
func policyEvents(e *kube.Env, ns, name string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "RateLimitPolicy" && (name == "" || ev.Regarding.Name == name) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// eventCount is how many times an event was emitted, counting its series.
func eventCount(ev eventsv1.Event) int32 {
	if ev.Series != nil {
		return ev.Series.Count
	}
	return 1
}
