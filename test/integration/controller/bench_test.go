package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// BenchmarkBulkApply applies 1000 policies across 50 namespaces at once (as a GitOps sync of
// a big repository would) to the shared manager and reports: seconds until every policy is
// Ready, snapshot ConfigMap writes, the manager's API requests per policy, and the largest
// snapshot. It is one measured run whatever b.N is (run it with -benchtime 1x).
func BenchmarkBulkApply(b *testing.B) {
	e := suite(b)
	const namespaces, perNamespace = 50, 20
	const total = namespaces * perNamespace
	run := "bulk-" + rand.String(6)
	nss := benchNamespaces(b, e, run, namespaces)
	var ps []*v1alpha1.RateLimitPolicy
	for _, ns := range nss {
		for i := range perNamespace {
			p := newPolicy(ns, fmt.Sprintf("policy-%02d", i), int64(10+i))
			p.Labels = map[string]string{"bench": run}
			ps = append(ps, p)
		}
	}
	sw := watchSnapshots(b, e, client.MatchingLabels{snapshot.LabelSnapshot: "true"})
	reqTotal, reqWrites, byMethodBefore := currentShared().requests.snapshot()

	b.ResetTimer()
	created, ready := applyRun(b, e, ps, run, 5*time.Minute)
	b.StopTimer()

	time.Sleep(4 * resync) // let stragglers land before counting
	writes := sw.count(nss...)
	reqs, nonGet, byMethod := currentShared().requests.snapshot()
	for k := range byMethod {
		byMethod[k] -= byMethodBefore[k]
	}
	maxBytes := 0
	for _, ns := range nss {
		cm, s, err := getSnapshot(e, ns)
		if err != nil {
			b.Fatalf("snapshot of %s: %v", ns, err)
		}
		if len(s.Policies) != perNamespace {
			b.Fatalf("snapshot of %s holds %d policies, want %d", ns, len(s.Policies), perNamespace)
		}
		maxBytes = max(maxBytes, len(cm.Data[snapshot.DataKey]))
	}
	b.ReportMetric(ready.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(writes), "configmap-writes")
	b.ReportMetric(float64(reqs-reqTotal)/total, "api-requests/policy")
	b.ReportMetric(float64(nonGet-reqWrites)/total, "api-writes/policy")
	b.ReportMetric(float64(maxBytes), "snapshot-bytes-max")
	b.Logf("%d policies in %d namespaces: created in %s, all Ready after %s; %d ConfigMap writes; "+
		"manager API requests %d (non-GET %d) by method %v; largest snapshot %d bytes",
		total, namespaces, created.Round(time.Millisecond), ready.Round(time.Millisecond), writes,
		reqs-reqTotal, nonGet-reqWrites, byMethod, maxBytes)
}
