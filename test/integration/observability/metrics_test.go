package observability

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// targetLabels are the labels Prometheus adds to every series of a target (a PodMonitor,
// ServiceMonitor or the kubernetes_sd relabelling): queries may match them though no binary
// exports them.
var targetLabels = map[string]bool{"namespace": true, "pod": true, "instance": true, "job": true}

// exported is what the binaries' /metrics held: each series name (histograms as their
// _bucket, _sum and _count) with the label values seen for each label.
type exported map[string]map[string]map[string]bool

func (e exported) add(families map[string]*dto.MetricFamily) {
	for name, mf := range families {
		names := []string{name}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = []string{name + "_bucket", name + "_sum", name + "_count"}
		case dto.MetricType_SUMMARY:
			names = []string{name, name + "_sum", name + "_count"}
		}
		for _, n := range names {
			if e[n] == nil {
				e[n] = map[string]map[string]bool{}
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if e[n][l.GetName()] == nil {
						e[n][l.GetName()] = map[string]bool{}
					}
					e[n][l.GetName()][l.GetValue()] = true
				}
			}
			if strings.HasSuffix(n, "_bucket") {
				e[n]["le"] = map[string]bool{}
			}
		}
	}
}

// check reports the selectors that read a series no binary exports, match a label it does
// not have, or want a value of an exported label it never had.
func (e exported) check(t *testing.T, sels []selector) {
	t.Helper()
	for _, s := range sels {
		labels, ok := e[s.metric]
		if !ok {
			t.Errorf("%s: %s is exported by neither the sidecar nor the manager", s.where, s.metric)
			continue
		}
		for name, value := range s.labels {
			values, has := labels[name]
			switch {
			case !has && targetLabels[name]:
			case !has:
				t.Errorf("%s: %s has no label %s (it has %v)", s.where, s.metric, name, slices.Sorted(maps.Keys(labels)))
			case value != "" && name != "le" && !values[value]:
				t.Errorf("%s: %s{%s=%q}: the binaries exported only the values %v", s.where, s.metric, name, value,
					slices.Sorted(maps.Keys(values)))
			}
		}
	}
}

// TestQueriesReadExportedMetrics runs the real sidecar and manager binaries, has each do
// the work whose series the dashboard and the alerts read (decisions allowed, denied by
// Redis and by the deny cache, shadow denials, decisions without Redis, a refused snapshot;
// policies Ready and not), scrapes their /metrics, and checks that every series and label
// the dashboard's and the alerts' PromQL names is exported, with the values they match.
func TestQueriesReadExportedMetrics(t *testing.T) {
	e := suite.Env(t)
	var queries []query
	queries = append(queries, dashboardQueries(t)...)
	queries = append(queries, alertQueries(t)...)
	var sels []selector
	for _, q := range queries {
		sels = append(sels, parse(t, q)...)
	}
	if t.Failed() {
		t.FailNow()
	}

	sidecarBin, managerBin := buildBinaries(t)
	got := exported{}
	got.add(sidecarMetrics(t, sidecarBin))
	got.add(managerMetrics(t, e, managerBin))
	got.check(t, sels)
}

// buildBinaries builds cmd/sidecar and cmd/manager side by side.
func buildBinaries(t *testing.T) (sidecar, manager string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	var serr, merr error
	wg.Go(func() { sidecar, serr = proc.Build(ctx, dir, "cmd/sidecar") })
	wg.Go(func() { manager, merr = proc.Build(ctx, dir, "cmd/manager") })
	wg.Wait()
	for _, err := range []error{serr, merr} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sidecar, manager
}

// sidecarMetrics runs the sidecar on a snapshot file and a real redis-server, makes it
// decide every way the dashboard and alerts show, and returns its /metrics.
func sidecarMetrics(t *testing.T, bin string) map[string]*dto.MetricFamily {
	t.Helper()
	const ns = "shop"
	srv := redistest.StartServer(t)
	orders := policytest.New(ns, "orders", policytest.Limit("per-minute", 2, time.Minute),
		policytest.FailureMode(v1alpha1.FailureModeFailOpen))
	audit := policytest.New(ns, "audit", policytest.Limit("per-minute", 1, time.Minute),
		policytest.FailureMode(v1alpha1.FailureModeFailOpen), func(p *v1alpha1.RateLimitPolicy) { p.Spec.Shadow = true })
	dir := t.TempDir()
	snap := filepath.Join(dir, "snapshot.json")
	writeAtomic(t, snap, snapshottest.Document(t, ns, srv.Addr(), orders, audit))

	check, metrics := wait.FreeAddr(t), wait.FreeAddr(t)
	p := start(t, "sidecar", bin, "--namespace", ns, "--snapshot-file", snap,
		"--http-bind-address", check, "--grpc-bind-address", wait.FreeAddr(t), "--metrics-bind-address", metrics,
		"--redis-addrs", srv.Addr(), "--redis-timeout", "2s", "--drain-delay", "0s")
	wait.HTTPStatus(t, nil, "http://"+metrics+"/readyz", http.StatusOK, time.Minute, p.Gone)

	decide := func(policy, identity string) string {
		t.Helper()
		resp, err := http.Post("http://"+check+"/v1/check", "application/json", //nolint:noctx // test
			strings.NewReader(fmt.Sprintf(`{"policy":%q,"identity":%q}`, policy, identity)))
		if err != nil {
			t.Fatalf("check %s %s: %v", policy, identity, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// orders: allowed twice, denied by Redis, then by the deny cache; audit (shadow):
	// allowed, then shadow_denied.
	for range 4 {
		decide("orders", "alice")
	}
	for range 2 {
		decide("audit", "alice")
	}
	// Without Redis, FailOpen decides.
	srv.Stop()
	wait.Until(t, 30*time.Second, "a decision without Redis", func() bool {
		decide("orders", "bob")
		return strings.Contains(scrape(t, metrics), "ratelimit_sidecar_decisions_without_redis_total{")
	})
	// A corrupt snapshot is refused (the last good one stays).
	writeAtomic(t, snap, []byte(`{"schemaVersion":1,"namespace":"shop"`))
	wait.Until(t, 30*time.Second, "the corrupt snapshot refused", func() bool {
		return strings.Contains(scrape(t, metrics), `ratelimit_sidecar_snapshot_loads_total{result="refused"}`)
	})
	return parseMetrics(t, scrape(t, metrics))
}

// managerMetrics runs the manager against the envtest API server and a real redis-server
// with one Ready policy and one that is not, and a key without a TTL in their namespace's
// scope, and returns its /metrics (served plain, as
// --metrics-secure=false does, since the test is no authenticated scraper).
func managerMetrics(t *testing.T, e *kube.Env, bin string) map[string]*dto.MetricFamily {
	t.Helper()
	srv := redistest.StartServer(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteKubeconfig(e.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	probe, metrics := wait.FreeAddr(t), wait.FreeAddr(t)
	p := start(t, "manager", bin, "--kubeconfig", kubeconfig, "--health-probe-bind-address", probe,
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--webhooks=false", "--redis-addrs", srv.Addr())
	wait.HTTPStatus(t, nil, "http://"+probe+"/readyz", http.StatusOK, time.Minute, p.Gone)

	ns := kube.NewNamespace(t, e, "obs-")
	good := policytest.New(ns, "good")
	// Two limits whose state keys share no {hash tag}: one script could not check them on
	// Redis Cluster, so the controller refuses it (InvalidPolicy) without the webhook.
	bad := policytest.New(ns, "bad", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Limits = append(p.Spec.Limits, v1alpha1.Limit{Name: "per-minute", Requests: 100,
			Period: metav1.Duration{Duration: time.Minute}})
		p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "rl:${namespace}:${policy}:${identity}:${limit}"}
	})
	for _, pol := range []*v1alpha1.RateLimitPolicy{good, bad} {
		if err := e.Client.Create(t.Context(), pol); err != nil {
			t.Fatalf("create policy %s: %v", pol.Name, err)
		}
	}
	// A key without a TTL in the namespace's scope, which the memory sampling reports.
	if err := srv.Client().Set(t.Context(), "{rl:"+ns+"/foreign}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var text string
	wait.Until(t, time.Minute, "ratelimit_policies by Ready True and False, and the foreign key", func() bool {
		text = scrape(t, metrics)
		return strings.Contains(text, `ratelimit_policies{ready="True"} 1`) && strings.Contains(text, `ratelimit_policies{ready="False"} 1`) &&
			strings.Contains(text, `ratelimit_redis_namespace_foreign_keys{tenant_namespace="`+ns+`"} 1`)
	})
	return parseMetrics(t, text)
}

// start starts bin with args as name (proc.Start).
func start(t *testing.T, name, bin string, args ...string) *proc.Process {
	t.Helper()
	return proc.Start(t, name, exec.Command(bin, args...))
}

// scrape is the text of http://addr/metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics") //nolint:noctx // test
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	return string(b)
}

func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// writeAtomic replaces path with data by a rename, as a volume update does.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
