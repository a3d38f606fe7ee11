package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestEveryClusterPrimary: against a 3-primary Redis Cluster, a Ready policy means its
// scripts are loaded on each primary (not on one routed connection), the snapshot names the
// cluster, and a SCRIPT FLUSH on one primary is repaired on that primary.
func TestEveryClusterPrimary(t *testing.T) {
	e := suite(t)
	cluster := redistest.StartCluster(t, 3)
	ns := kube.NewNamespace(t, e, "c-")
	topo := redisconn.Topology{Mode: redisconn.ModeCluster, Addrs: cluster.Addrs()}
	// The shared manager would rewrite this namespace's snapshot with its own Redis: it
	// stops for this test, and the cluster's manager watches only this namespace.
	replaceShared(t, func() (*manager, error) { return startManager(e, cluster.Client(), topo, ns) })

	create(t, e, newPolicy(ns, "edge", 10))
	got := waitReady(t, e, ns, "edge")
	checkReadyPolicy(t, e, got, topo.Addrs, "cluster")
	waitScriptsLoaded(t, e, ns, "edge")
	ctx := ctxFor(t)
	primaries := cluster.Primaries()
	for i, p := range primaries {
		if err := scriptsLoaded(ctx, p.Client()); err != nil {
			t.Errorf("primary %d (%s): %v", i, p.Addr(), err)
		}
	}

	last := primaries[len(primaries)-1]
	lastClient := last.Client()
	if err := lastClient.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	wait.Eventually(t, 6*resync, "scripts reloaded on "+last.Addr(), func() error {
		return scriptsLoaded(ctx, lastClient)
	})
}

// TestRedisOutage: while Redis is down every policy reports ScriptsLoaded=False
// (RedisUnavailable), with a Warning event, and stays Ready: it is published, and the
// sidecars enforce it by its failure mode. A policy created during the outage is published
// and Ready too. When Redis is back ScriptsLoaded turns True with no one touching the
// policies, and the scripts are loaded into the restarted (empty) server.
func TestRedisOutage(t *testing.T) {
	e, ns := suiteNamespace(t)
	readyPolicy(t, e, ns, "before")

	t.Cleanup(func() {
		if !standby.Running() {
			standby.Restart(t)
		}
	})
	standby.Kill()
	// The loader notices within a resync period and every policy follows.
	waitCondition(t, e, ns, "before", v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
	waitRedisNoted(t, e, ns, "before")
	waitEvents(t, e, ns, "before", v1alpha1.ReasonRedisUnavailable, 1)

	create(t, e, newPolicy(ns, "during", 10))
	waitCondition(t, e, ns, "during", v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
	// Publishing does not need Redis, and Ready is "published".
	waitCondition(t, e, ns, "during", v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonPublished)
	waitRedisNoted(t, e, ns, "during")

	standby.Restart(t)
	start := time.Now()
	for _, name := range []string{"before", "during"} {
		waitCondition(t, e, ns, name, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)
		if p := waitReady(t, e, ns, name); strings.Contains(meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message, "Redis") {
			t.Errorf("%s: Ready message still speaks of Redis after it is back", name)
		}
	}
	t.Logf("scripts loaded again %s after Redis restarted", time.Since(start).Round(time.Millisecond))
	waitEvents(t, e, ns, "before", v1alpha1.ReasonScriptsLoaded, 1)
	if err := scriptsLoaded(ctxFor(t), standby.Client()); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// waitRedisNoted waits until the policy is Ready with a message naming the outage and its
// failure mode.
func waitRedisNoted(t *testing.T, e *kube.Env, ns, name string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, name+" Ready, noting the outage", func() error {
		p, err := getPolicy(e, ns, name)
		if err != nil {
			return err
		}
		if err := readyErr(p); err != nil {
			return err
		}
		if msg := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "failure mode FailOpen") {
			return fmt.Errorf("Ready message %q", msg)
		}
		return nil
	})
}

// TestScriptFlush: SCRIPT FLUSH on the standalone server is repaired within a few resync
// periods, without the policy leaving Ready.
func TestScriptFlush(t *testing.T) {
	e, ns := suiteNamespace(t)
	readyPolicy(t, e, ns, "flush")
	ctx := ctxFor(t)
	rdb := standby.Client()
	loadsBefore := counterValue(t, "ratelimit_script_loads_total")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if err := scriptsLoaded(ctx, rdb); err == nil {
		t.Fatal("SCRIPT FLUSH left the scripts in place; the test proves nothing")
	}
	start := time.Now()
	wait.Eventually(t, 6*resync, "scripts reloaded after SCRIPT FLUSH", func() error {
		return scriptsLoaded(ctx, rdb)
	})
	t.Logf("reloaded %s after SCRIPT FLUSH (resync %s)", time.Since(start).Round(time.Millisecond), resync)
	// The loader counts its loads once the last of them is done, a moment after Redis holds
	// them all (with the lease scripts there are twice as many), so the count is waited for.
	wait.Eventually(t, 2*resync, "ratelimit_script_loads_total to count the repair", func() error {
		if loads := counterValue(t, "ratelimit_script_loads_total") - loadsBefore; loads < 1 {
			return fmt.Errorf("ratelimit_script_loads_total grew by %v", loads)
		}
		return nil
	})
	// The repair is told once per namespace, on its snapshot ConfigMap.
	wait.Eventually(t, 10*time.Second, "a ScriptsReloaded event on the snapshot", func() error {
		var list eventsv1.EventList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == "ScriptsReloaded" && ev.Regarding.Kind == "ConfigMap" && ev.Regarding.Name == snapshot.ConfigMapName {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})
	p, err := getPolicy(e, ns, "flush")
	if err != nil {
		t.Fatal(err)
	}
	if err := readyErr(p); err != nil {
		t.Fatalf("policy left Ready: %v", err)
	}
}

// counterValue sums a counter family (all label values) in controller-runtime's registry.
func counterValue(t testing.TB, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		return sumMetric(f.GetMetric())
	}
	return 0
}

func sumMetric(ms []*dto.Metric) float64 {
	total := 0.0
	for _, m := range ms {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}
