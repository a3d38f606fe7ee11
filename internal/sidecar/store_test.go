package sidecar_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

func TestStoreKeepsLastGoodSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := &sidecar.Store{Namespace: scNamespace, Metrics: sidecar.NewMetrics(reg)}
	good := scDoc(t, scPolicy("a", 5))
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
		"other namespace": []byte(strings.Replace(string(scDoc(t, scPolicy("a", 5))), `"namespace":"shop"`, `"namespace":"bank"`, 1)),
	}
	for name, doc := range bad {
		if err := s.Load(doc, name); err == nil {
			t.Errorf("%s: loaded, want refused", name)
		}
		if got := s.Current().Version; got != version {
			t.Fatalf("%s: version %s in force, want the last good %s", name, got, version)
		}
	}
	if got := metricValue(t, reg, "ratelimit_sidecar_snapshot_loads_total", map[string]string{"result": "refused"}); got != float64(len(bad)) {
		t.Errorf("refused loads = %v, want %d", got, len(bad))
	}
	if err := s.Load(scDoc(t, scPolicy("a", 6)), "test"); err != nil || s.Current().Version == version {
		t.Fatalf("a new good snapshot must load: err %v", err)
	}
}

func TestStoreReusesUnchangedPolicies(t *testing.T) {
	s := &sidecar.Store{Namespace: scNamespace}
	localCap := func(spec *v1alpha1.RateLimitPolicySpec) {
		spec.FailureMode = v1alpha1.FailureModeLocalCap
		spec.LocalCap = &v1alpha1.LocalCap{Requests: 3, Period: spec.Limits[0].Period, MaxIdentities: 100}
	}
	if err := s.Load(scDoc(t, scPolicy("a", 5, localCap), scPolicy("b", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	if err := s.Load(scDoc(t, scPolicy("a", 5, localCap), scPolicy("b", 7)), "test"); err != nil {
		t.Fatal(err)
	}
	after := s.Current()
	if after.Policy("a") != before.Policy("a") {
		t.Error("unchanged policy a was recompiled: its LocalCap counters would reset on every reload")
	}
	if after.Policy("b") == before.Policy("b") || after.Policy("b").Spec.Limits[0].Requests != 7 {
		t.Error("changed policy b was not recompiled")
	}
}

// metricValue sums the series of a counter or gauge whose labels include want.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m.GetLabel(), want) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(have []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func TestStoreClearMeansNoPolicy(t *testing.T) {
	s := &sidecar.Store{Namespace: scNamespace}
	if err := s.Load(scDoc(t, scPolicy("a", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	s.Clear("configmap deleted")
	set := s.Current()
	if set == nil || len(set.Entries) != 0 || len(set.MatchHTTP("x", mustPath(t, "/api/a"), "GET")) != 0 || set.Policy("a") != nil {
		t.Fatalf("after Clear: %+v, want an empty set in force", set)
	}
	if err := s.Load(scDoc(t, scPolicy("a", 5)), "test"); err != nil || s.Current().Policy("a") == nil {
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
	return reseal(t, &s)
}

// TestStoreRefusesOnePolicyNotTheSnapshot: one policy the sidecar cannot compile is refused
// alone: the others load (a new pod becomes ready and enforces them), and a policy that was
// good before keeps its last good version. The refusal is counted.
func TestStoreRefusesOnePolicyNotTheSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	fresh := &sidecar.Store{Namespace: scNamespace, Metrics: sidecar.NewMetrics(reg)}
	doc := withBrokenPolicy(t, scDoc(t, scPolicy("a", 5), scPolicy("b", 5)), "b")
	if err := fresh.Load(doc, "new pod"); err != nil {
		t.Fatalf("a snapshot with one bad policy refused whole: %v", err)
	}
	if set := fresh.Current(); set.Policy("a") == nil || set.Policy("b") != nil || set.Refused() != 1 {
		t.Fatalf("new pod: a %v, b %v, refused %d; want a loaded, b refused", set.Policy("a"), set.Policy("b"), set.Refused())
	}
	if got := metricValue(t, reg, "ratelimit_sidecar_snapshot_policies_refused", nil); got != 1 {
		t.Errorf("ratelimit_sidecar_snapshot_policies_refused = %v, want 1", got)
	}

	running := &sidecar.Store{Namespace: scNamespace}
	if err := running.Load(scDoc(t, scPolicy("a", 5), scPolicy("b", 5)), "test"); err != nil {
		t.Fatal(err)
	}
	good := running.Current().Policy("b")
	edited := withBrokenPolicy(t, scDoc(t, scPolicy("a", 7), scPolicy("b", 9)), "b")
	if err := running.Load(edited, "edit"); err != nil {
		t.Fatal(err)
	}
	set := running.Current()
	if set.Policy("a").Spec.Limits[0].Requests != 7 || set.Policy("b") != good {
		t.Fatalf("after an edit breaking b: a has %d requests (want 7), b is the last good one: %v",
			set.Policy("a").Spec.Limits[0].Requests, set.Policy("b") == good)
	}
}

// TestStoreRefusesKeysOutsideTheNamespace: a snapshot entry whose keys fall outside its
// namespace's scope (another namespace's keys, as a hand-edited document could name them)
// is refused alone; a document whose key prefix cannot scope namespaces is refused whole.
func TestStoreRefusesKeysOutsideTheNamespace(t *testing.T) {
	var s snapshot.Snapshot
	if err := json.Unmarshal(scDoc(t, scPolicy("a", 5), scPolicy("b", 5)), &s); err != nil {
		t.Fatal(err)
	}
	s.Policies[1].StateKey = "{rl:victim/payments:${identity}}:${limit}"
	store := &sidecar.Store{Namespace: scNamespace}
	if err := store.Load(reseal(t, &s), "edited"); err != nil {
		t.Fatal(err)
	}
	if set := store.Current(); set.Policy("a") == nil || set.Policy("b") != nil || set.Refused() != 1 {
		t.Fatalf("want a loaded and b (keys of namespace victim) refused")
	}
	s.KeyPrefix = "rl"
	if err := store.Load(reseal(t, &s), "bad prefix"); err == nil || !strings.Contains(err.Error(), "keyPrefix") {
		t.Fatalf("a key prefix that cannot scope namespaces: %v, want the document refused", err)
	}
}

func reseal(t *testing.T, s *snapshot.Snapshot) []byte {
	t.Helper()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
