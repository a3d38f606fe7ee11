package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestHandEditedSnapshot: the snapshot ConfigMap is the controller's: an edit of its data,
// labels or version annotation is put back to the canonical bytes, a delete is recreated.
func TestHandEditedSnapshot(t *testing.T) {
	e, ns := suiteNamespace(t)
	_, cm, s := readyPair(t, e, ns)
	canonical := cm.Data[snapshot.DataKey]
	ctx := context.Background()

	edits := map[string]func(*corev1.ConfigMap){
		"data": func(cm *corev1.ConfigMap) {
			cm.Data[snapshot.DataKey] = `{"schemaVersion":1,"policies":[]}`
			cm.Data["extra"] = "x"
		},
		"label":      func(cm *corev1.ConfigMap) { delete(cm.Labels, snapshot.LabelSnapshot) },
		"annotation": func(cm *corev1.ConfigMap) { cm.Annotations[snapshot.AnnotationVersion] = "0000000000000000" },
	}
	for _, name := range []string{"data", "label", "annotation"} {
		cur, _, err := getSnapshot(e, ns)
		if err != nil {
			t.Fatal(err)
		}
		edits[name](cur)
		if err := e.Client.Update(ctx, cur); err != nil {
			t.Fatalf("edit %s: %v", name, err)
		}
		waitCanonical(t, e, ns, canonical, s.Version, "after editing the "+name)
	}

	cur, _, err := getSnapshot(e, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, cur); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitCanonical(t, e, ns, canonical, s.Version, "after deleting it")
	for _, name := range []string{"a", "b"} {
		if p := waitReady(t, e, ns, name); p.Status.Snapshot.Version != s.Version {
			t.Errorf("%s reports version %s, want %s", name, p.Status.Snapshot.Version, s.Version)
		}
	}
}

// waitCanonical waits until the namespace's ConfigMap is exactly what the controller writes.
func waitCanonical(t testing.TB, e *kube.Env, ns, data, version, when string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, "snapshot restored "+when, func() error {
		cm, _, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		switch {
		case len(cm.Data) != 1 || cm.Data[snapshot.DataKey] != data:
			return fmt.Errorf("data %v", cm.Data)
		case cm.Labels[snapshot.LabelSnapshot] != "true":
			return fmt.Errorf("labels %v", cm.Labels)
		case cm.Annotations[snapshot.AnnotationVersion] != version:
			return fmt.Errorf("annotations %v", cm.Annotations)
		}
		return nil
	})
}

// samplePolicies are the policies under config/samples, in namespace ns.
func samplePolicies(t testing.TB, ns string) []*v1alpha1.RateLimitPolicy {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(kube.RepoRoot(), "config", "samples", "policy_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples under config/samples (err %v)", err)
	}
	var out []*v1alpha1.RateLimitPolicy
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p v1alpha1.RateLimitPolicy
		if err := yaml.UnmarshalStrict(raw, &p); err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		p.Namespace = ns
		out = append(out, &p)
	}
	return out
}

// TestDeterminism: the same policies give byte-identical snapshots: built in any order,
// across reconciles that change nothing that is published, and across a controller restart,
// which also leaves every policy's status and the ConfigMap untouched.
func TestDeterminism(t *testing.T) {
	e, ns := suiteNamespace(t)
	ps := samplePolicies(t, ns)
	var names []string
	for _, p := range ps {
		create(t, e, p)
		names = append(names, p.Name)
	}
	sort.Strings(names)
	for _, n := range names {
		waitReady(t, e, ns, n)
	}
	cm, s := waitSnapshot(t, e, ns, names...)
	data, rv := cm.Data[snapshot.DataKey], cm.ResourceVersion

	checkBuild(t, e, ns, s.Redis, data)

	// A spec change that compiles to the same entry (the default layout written out) is
	// reconciled, and the snapshot is not rewritten.
	writeDefaultLayout(t, e, ns, names[0])
	checkUnchanged(t, e, ns, data, rv, "after an equivalent edit")

	// A controller restart changes nothing: no snapshot write, no status write, no event.
	before := policyResourceVersions(t, e, ns)
	events := eventTotal(t, e, ns)
	restartShared(t)
	wait.Consistently(t, 2*time.Second, "after a controller restart", func() error {
		if err := unchanged(e, ns, data, rv); err != nil {
			return err
		}
		now := policyResourceVersions(t, e, ns)
		for name, v := range before {
			if now[name] != v {
				return fmt.Errorf("policy %s rewritten: resourceVersion %s -> %s", name, v, now[name])
			}
		}
		if n := eventTotal(t, e, ns); n != events {
			return fmt.Errorf("%d events after the restart, %d before", n, events)
		}
		return nil
	})
	// The new controller computes the same bytes: it restores them after a hand edit.
	cur, _, err := getSnapshot(e, ns)
	if err != nil {
		t.Fatal(err)
	}
	cur.Data[snapshot.DataKey] = "{}"
	if err := e.Client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	waitCanonical(t, e, ns, data, s.Version, "by the restarted controller")
}

// checkBuild checks that publishing.SnapshotOf gives the ConfigMap's bytes whatever the order
// the policies are listed in.
func checkBuild(t *testing.T, e *kube.Env, ns string, redis snapshot.Redis, data string) {
	t.Helper()
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		items := append([]v1alpha1.RateLimitPolicy(nil), list.Items...)
		rand.Shuffle(len(items), func(a, b int) { items[a], items[b] = items[b], items[a] })
		built, _, err := publishing.SnapshotOf(ns, redis, items)
		if err != nil {
			t.Fatal(err)
		}
		b, err := built.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != data {
			t.Fatalf("build %d differs from the ConfigMap:\n%s\n%s", i, b, data)
		}
	}
}

func checkUnchanged(t testing.TB, e *kube.Env, ns, data, rv, when string) {
	t.Helper()
	wait.Consistently(t, 4*resync, "snapshot "+when, func() error { return unchanged(e, ns, data, rv) })
}

func unchanged(e *kube.Env, ns, data, rv string) error {
	cm, _, err := getSnapshot(e, ns)
	if err != nil {
		return err
	}
	if cm.Data[snapshot.DataKey] != data {
		return fmt.Errorf("bytes changed:\n%s\n%s", data, cm.Data[snapshot.DataKey])
	}
	if cm.ResourceVersion != rv {
		return fmt.Errorf("rewritten with the same bytes: resourceVersion %s -> %s", rv, cm.ResourceVersion)
	}
	return nil
}

// eventTotal counts the events about policies in the namespace, series included.
func eventTotal(t testing.TB, e *kube.Env, ns string) int32 {
	t.Helper()
	evs, err := policyEvents(e, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, ev := range evs {
		n += eventCount(ev)
	}
	return n
}

// snapshotWatch counts the writes to one namespace's snapshot ConfigMap as a watcher sees
// them: every event is a new resourceVersion.
type snapshotWatch struct {
	mu     sync.Mutex
	writes map[string]int // by namespace
	stop   func()
	done   chan struct{}
}

func watchSnapshots(t testing.TB, e *kube.Env, opts ...client.ListOption) *snapshotWatch {
	t.Helper()
	wc, err := client.NewWithWatch(e.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, opts...)
	if err != nil {
		cancel()
		t.Fatalf("watch ConfigMaps: %v", err)
	}
	sw := &snapshotWatch{writes: map[string]int{}, done: make(chan struct{})}
	sw.stop = func() {
		cancel()
		w.Stop()
		<-sw.done
	}
	t.Cleanup(sw.stop)
	go func() {
		defer close(sw.done)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || cm.Name != snapshot.ConfigMapName || ev.Type == watch.Bookmark {
				continue
			}
			sw.mu.Lock()
			sw.writes[cm.Namespace]++
			sw.mu.Unlock()
		}
	}()
	return sw
}

// count is how many writes the watch saw in the namespaces.
func (sw *snapshotWatch) count(namespaces ...string) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	n := 0
	for _, ns := range namespaces {
		n += sw.writes[ns]
	}
	return n
}

// createMany creates the policies with a few concurrent clients, as kubectl apply of a big
// directory or a GitOps sync would.
func createMany(t testing.TB, e *kube.Env, ps []*v1alpha1.RateLimitPolicy) {
	t.Helper()
	const workers = 8
	ch := make(chan *v1alpha1.RateLimitPolicy)
	errs := make(chan error, len(ps))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range ch {
				if err := e.Client.Create(context.Background(), p); err != nil {
					errs <- fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		})
	}
	for _, p := range ps {
		ch <- p
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// allReady returns nil once every policy listed with opts is Ready for its generation.
func allReady(e *kube.Env, want int, opts ...client.ListOption) error {
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, opts...); err != nil {
		return err
	}
	if len(list.Items) != want {
		return fmt.Errorf("%d policies, want %d", len(list.Items), want)
	}
	notReady := 0
	var first error
	for i := range list.Items {
		if err := readyErr(&list.Items[i]); err != nil {
			notReady++
			if first == nil {
				first = err
			}
		}
	}
	if notReady > 0 {
		return fmt.Errorf("%d of %d not Ready, e.g. %w", notReady, want, first)
	}
	return nil
}

// TestCoalescing: 200 policies created at once in one namespace cost a handful of snapshot
// writes, not one per policy, and the final snapshot holds them all.
func TestCoalescing(t *testing.T) {
	e, ns := suiteNamespace(t)
	const n = 200
	sw := watchSnapshots(t, e, client.InNamespace(ns))
	metricBefore := counterValue(t, "ratelimit_snapshot_writes_total")
	reqTotal, reqWrites, byMethodBefore := currentShared().requests.snapshot()

	var ps []*v1alpha1.RateLimitPolicy
	var names []string
	for i := range n {
		name := fmt.Sprintf("p-%03d", i)
		ps = append(ps, newPolicy(ns, name, int64(10+i)))
		names = append(names, name)
	}
	start := time.Now()
	createMany(t, e, ps)
	created := time.Since(start)
	waitSnapshot(t, e, ns, names...)
	published := time.Since(start)
	wait.Eventually(t, 60*time.Second, "all policies Ready", func() error { return allReady(e, n, client.InNamespace(ns)) })
	ready := time.Since(start)
	// Let stragglers land before counting.
	time.Sleep(4 * resync)

	writes := sw.count(ns)
	metricWrites := counterValue(t, "ratelimit_snapshot_writes_total") - metricBefore
	total, nonGet, byMethod := currentShared().requests.snapshot()
	for k := range byMethod {
		byMethod[k] -= byMethodBefore[k]
	}
	t.Logf("%d policies: created in %s, all in the snapshot after %s, all Ready after %s",
		n, created.Round(time.Millisecond), published.Round(time.Millisecond), ready.Round(time.Millisecond))
	t.Logf("snapshot writes: %d seen by a watch, %v by ratelimit_snapshot_writes_total", writes, metricWrites)
	t.Logf("manager API requests: %d (%.1f per policy), non-GET %d (%.1f per policy), by method %v",
		total-reqTotal, float64(total-reqTotal)/n, nonGet-reqWrites, float64(nonGet-reqWrites)/n, byMethod)
	if writes < 1 || writes > 20 {
		t.Errorf("%d snapshot writes for %d policies, want 1..20", writes, n)
	}
	if metricWrites < float64(writes) {
		t.Errorf("ratelimit_snapshot_writes_total grew by %v, the watch saw %d writes", metricWrites, writes)
	}
}
