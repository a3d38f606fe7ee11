package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

func TestStoreKeepsLastGoodSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := &engine.Store{Namespace: sidecartest.Namespace, Metrics: engine.NewMetrics(reg)}
	good := sidecartest.Doc(t, sidecartest.Policy("a", 5))
	if err := s.Load(good, "test"); err != nil {
		t.Fatal(err)
	}
	version := s.Current().Version
	bad := map[string][]byte{
		"truncated":       good[:len(good)/2],
		"not json":        []byte("hello"),
		"edited":          []byte(strings.Replace(string(good), `"requests":5`, `"requests":500`, 1)),
		"unknown version": []byte(strings.Replace(string(good), `"schemaVersion":1`, `"schemaVersion":2`, 1)),
		"empty":           nil,
		"other namespace": []byte(strings.Replace(string(sidecartest.Doc(t, sidecartest.Policy("a", 5))), `"namespace":"shop"`, `"namespace":"bank"`, 1)),
	}
	for name, doc := range bad {
		if err := s.Load(doc, name); err == nil {
			t.Errorf("%s: loaded, want refused", name)
		}
		if got := s.Current().Version; got != version {
			t.Fatalf("%s: version %s in force, want the last good %s", name, got, version)
		}
	}
	if got := sidecartest.MetricValue(t, reg, "ratelimit_sidecar_snapshot_loads_total", map[string]string{"result": "refused"}); got != float64(len(bad)) {
		t.Errorf("refused loads = %v, want %d", got, len(bad))
	}
	if err := s.Load(sidecartest.Doc(t, sidecartest.Policy("a", 6)), "test"); err != nil || s.Current().Version == version {
		t.Fatalf("a new good snapshot must load: err %v", err)
	}
}

func TestStoreReusesUnchangedPolicies(t *testing.T) {
	s := &engine.Store{Namespace: sidecartest.Namespace}
	localCap := func(spec *v1alpha1.RateLimitPolicySpec) {
		spec.FailureMode = v1alpha1.FailureModeLocalCap
		spec.LocalCap = &v1alpha1.LocalCap{Requests: 3, Period: spec.Limits[0].Period, MaxIdentities: 100}
	}
	if err := s.Load(sidecartest.Doc(t, sidecartest.Policy("a", 5, localCap), sidecartest.Policy("b", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	if err := s.Load(sidecartest.Doc(t, sidecartest.Policy("a", 5, localCap), sidecartest.Policy("b", 7)), "test"); err != nil {
		t.Fatal(err)
	}
	after := s.Current()
	if after.Rule("a") != before.Rule("a") {
		t.Error("unchanged policy a was recompiled: its LocalCap counters would reset on every reload")
	}
	if after.Rule("b") == before.Rule("b") || after.Rule("b").Entry.Limits[0].Requests != 7 {
		t.Error("changed policy b was not recompiled")
	}
}

func TestStoreClearMeansNoPolicy(t *testing.T) {
	s := &engine.Store{Namespace: sidecartest.Namespace}
	if err := s.Load(sidecartest.Doc(t, sidecartest.Policy("a", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	s.Clear("configmap deleted")
	set := s.Current()
	if set == nil || len(set.Rules) != 0 || len(set.MatchHTTP("x", mustPath(t, "/api/a"), "GET")) != 0 || set.Rule("a") != nil {
		t.Fatalf("after Clear: %+v, want an empty set in force", set)
	}
	if err := s.Load(sidecartest.Doc(t, sidecartest.Policy("a", 5)), "test"); err != nil || s.Current().Rule("a") == nil {
		t.Fatalf("load after clear: %v", err)
	}
}

// withBrokenPolicy re-seals doc with policy name's state key made uncompilable, as a newer
// controller's feature or a hand edit could leave it.
func withBrokenPolicy(t *testing.T, doc []byte, name string) []byte {
	t.Helper()
	var s snapshot.Snapshot
	if err := json.Unmarshal(doc, &s); err != nil {
		t.Fatal(err)
	}
	for i := range s.Policies {
		if s.Policies[i].Name == name {
			s.Policies[i].StateKey = "{rl:${identity}x}:${limit}"
		}
	}
	return sidecartest.Reseal(t, &s)
}

// TestStoreRefusesOnePolicyNotTheSnapshot: one policy the sidecar cannot compile is refused
// alone: the others load (a new pod becomes ready and enforces them), and a policy that was
// good before keeps its last good version. The refusal is counted.
func TestStoreRefusesOnePolicyNotTheSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	fresh := &engine.Store{Namespace: sidecartest.Namespace, Metrics: engine.NewMetrics(reg)}
	doc := withBrokenPolicy(t, sidecartest.Doc(t, sidecartest.Policy("a", 5), sidecartest.Policy("b", 5)), "b")
	if err := fresh.Load(doc, "new pod"); err != nil {
		t.Fatalf("a snapshot with one bad policy refused whole: %v", err)
	}
	if set := fresh.Current(); set.Rule("a") == nil || set.Rule("b") != nil || set.Refused() != 1 {
		t.Fatalf("new pod: a %v, b %v, refused %d; want a loaded, b refused", set.Rule("a"), set.Rule("b"), set.Refused())
	}
	if got := sidecartest.MetricValue(t, reg, "ratelimit_sidecar_snapshot_policies_refused", nil); got != 1 {
		t.Errorf("ratelimit_sidecar_snapshot_policies_refused = %v, want 1", got)
	}

	running := &engine.Store{Namespace: sidecartest.Namespace}
	if err := running.Load(sidecartest.Doc(t, sidecartest.Policy("a", 5), sidecartest.Policy("b", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	good := running.Current().Rule("b")
	edited := withBrokenPolicy(t, sidecartest.Doc(t, sidecartest.Policy("a", 7), sidecartest.Policy("b", 9)), "b")
	if err := running.Load(edited, "edit"); err != nil {
		t.Fatal(err)
	}
	set := running.Current()
	if set.Rule("a").Entry.Limits[0].Requests != 7 || set.Rule("b") != good {
		t.Fatalf("after an edit breaking b: a has %d requests (want 7), b is the last good one: %v",
			set.Rule("a").Entry.Limits[0].Requests, set.Rule("b") == good)
	}
}

// TestStoreRefusesKeysOutsideTheNamespace: a snapshot entry whose keys fall outside its
// namespace's scope (another namespace's keys, as a hand-edited document could name them)
// is refused alone; a document whose key prefix cannot scope namespaces is refused whole.
func TestStoreRefusesKeysOutsideTheNamespace(t *testing.T) {
	var s snapshot.Snapshot
	if err := json.Unmarshal(sidecartest.Doc(t, sidecartest.Policy("a", 5), sidecartest.Policy("b", 5)), &s); err != nil {
		t.Fatal(err)
	}
	s.Policies[1].StateKey = "{rl:victim/payments:${identity}}:${limit}"
	store := &engine.Store{Namespace: sidecartest.Namespace}
	if err := store.Load(sidecartest.Reseal(t, &s), "edited"); err != nil {
		t.Fatal(err)
	}
	if set := store.Current(); set.Rule("a") == nil || set.Rule("b") != nil || set.Refused() != 1 {
		t.Fatalf("want a loaded and b (keys of namespace victim) refused")
	}
	s.KeyPrefix = "rl"
	if err := store.Load(sidecartest.Reseal(t, &s), "bad prefix"); err == nil || !strings.Contains(err.Error(), "keyPrefix") {
		t.Fatalf("a key prefix that cannot scope namespaces: %v, want the document refused", err)
	}
}
