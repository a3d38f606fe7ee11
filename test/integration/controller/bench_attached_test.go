package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/hack/pinnedmod"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Shape of BenchmarkBulkApplyAttached: per namespace, routesPerNs HTTPRoutes of
// rulesPerRoute named rules, and one policy per rule (targetRef the route, sectionName the
// rule), so no two policies conflict.
const (
	attachedNamespaces = 10
	routesPerNs        = 20
	rulesPerRoute      = 5
)

// BenchmarkBulkApplyAttached is BenchmarkBulkApply with Gateway API attachment: 1000
// policies targeting rules of 200 HTTPRoutes (10 namespaces of 100 policies, each policy
// resolved against its namespace's others) applied at once, routes first. It installs
// Gateway API's standard CRDs (the version hack/gatewaycrds pins) and runs a manager started
// after them in place of the shared one, and reports seconds until every policy is Ready and
// the CPU time this process (the manager) spent meanwhile.
// One measured run whatever b.N is (run it with -benchtime 1x).
func BenchmarkBulkApplyAttached(b *testing.B) {
	e := suite(b)
	installGatewayAPI(b, e)
	m := replaceShared(b, func() (*manager, error) { return startManager(env, standby.Client(), standaloneTopology(standby)) })
	const total = attachedNamespaces * routesPerNs * rulesPerRoute
	run := "bulk-" + rand.String(6)
	nss := benchNamespaces(b, e, run, attachedNamespaces)
	var ps []*v1alpha1.RateLimitPolicy
	for _, ns := range nss {
		create(b, e, benchGateway(ns))
		for r := range routesPerNs {
			create(b, e, benchRoute(ns, r))
			for k := range rulesPerRoute {
				ps = append(ps, attachedPolicy(ns, run, r, k))
			}
		}
	}
	reqTotal, reqWrites, _ := m.requests.snapshot()

	b.ResetTimer()
	cpuBefore := processCPU(b)
	created, ready := applyRun(b, e, ps, run, 10*time.Minute)
	cpu := processCPU(b) - cpuBefore
	b.StopTimer()

	reqs, nonGet, _ := m.requests.snapshot()
	b.ReportMetric(ready.Seconds(), "s-to-all-ready")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.ReportMetric(float64(reqs-reqTotal)/total, "api-requests/policy")
	b.ReportMetric(float64(nonGet-reqWrites)/total, "api-writes/policy")
	b.Logf("%d attached policies on %d HTTPRoutes in %d namespaces: created in %s, all Ready after %s; manager API requests %d (non-GET %d); "+
		"%s CPU in this process (the manager and the clients creating and polling)",
		total, attachedNamespaces*routesPerNs, attachedNamespaces, created.Round(time.Millisecond), ready.Round(time.Millisecond),
		reqs-reqTotal, nonGet-reqWrites, cpu.Round(time.Millisecond))
}

// processCPU is the user and system CPU time this process (the in-process manager among it)
// has used so far: unlike wall time, hardly moved by other work on a shared machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// installGatewayAPI installs Gateway API's standard-channel CRDs, from the module version
// hack/gatewaycrds pins, into e for the rest of the benchmark.
func installGatewayAPI(b *testing.B, e *kube.Env) {
	b.Helper()
	const mod = "sigs.k8s.io/gateway-api"
	dirs, err := pinnedmod.Download(filepath.Join(kube.RepoRoot(), "hack", "gatewaycrds"), mod)
	if err != nil {
		b.Skipf("Gateway API CRDs: %v", err)
	}
	opts := envtest.CRDInstallOptions{Paths: []string{filepath.Join(dirs[mod], "config", "crd", "standard")}, ErrorIfPathMissing: true}
	crds, err := envtest.InstallCRDs(e.Config, opts)
	if err != nil {
		b.Fatalf("install Gateway API CRDs: %v", err)
	}
	// Registered before replaceShared's cleanup, so it runs after it: the shared manager
	// restarted then finds Gateway API served, as it was when it stopped.
	b.Cleanup(func() {
		opts.CRDs = crds
		_ = envtest.UninstallCRDs(e.Config, opts)
	})
}

// benchNamespaces creates n labelled namespaces, deleted (their policies first) at cleanup.
func benchNamespaces(b *testing.B, e *kube.Env, run string, n int) []string {
	var nss []string
	for range n {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b-" + rand.String(8), Labels: map[string]string{"bench": run}}}
		create(b, e, ns)
		nss = append(nss, ns.Name)
		b.Cleanup(func() {
			ctx := context.Background()
			_ = e.Client.DeleteAllOf(ctx, &v1alpha1.RateLimitPolicy{}, client.InNamespace(ns.Name))
			_ = e.Client.Delete(ctx, ns)
		})
	}
	return nss
}

// applyRun creates ps, the policies of the run (labelled bench=run), and waits up to within
// until all of them are Ready; it returns how long the creates took and how long until all
// were Ready, both from the first create.
func applyRun(b *testing.B, e *kube.Env, ps []*v1alpha1.RateLimitPolicy, run string, within time.Duration) (created, ready time.Duration) {
	b.Helper()
	byRun := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"bench": run})}
	start := time.Now()
	createMany(b, e, ps)
	created = time.Since(start)
	if err := wait.Poll(within, 100*time.Millisecond, func() error { return allReady(e, len(ps), byRun) }); err != nil {
		b.Fatalf("not all Ready: %v", err)
	}
	return created, time.Since(start)
}

// benchGateway is the namespace's Gateway, of a class no implementation runs (no data plane
// objects to write).
func benchGateway(ns string) *gwapiv1.Gateway {
	return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "bench",
		Listeners:        []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}}}}
}

// benchRoute is HTTPRoute route-<r> on the namespace's Gateway, with rulesPerRoute named rules.
func benchRoute(ns string, r int) *gwapiv1.HTTPRoute {
	rt := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route-%02d", r)}}
	rt.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "gw"}}
	rt.Spec.Hostnames = []gwapiv1.Hostname{gwapiv1.Hostname(fmt.Sprintf("svc-%02d.example.com", r))}
	prefix := gwapiv1.PathMatchPathPrefix
	for k := range rulesPerRoute {
		name := gwapiv1.SectionName(fmt.Sprintf("rule-%d", k))
		path := fmt.Sprintf("/r%d", k)
		rt.Spec.Rules = append(rt.Spec.Rules, gwapiv1.HTTPRouteRule{Name: &name,
			Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &path}}}})
	}
	return rt
}

// attachedPolicy targets rule k of route r.
func attachedPolicy(ns, run string, r, k int) *v1alpha1.RateLimitPolicy {
	p := newPolicy(ns, fmt.Sprintf("policy-%02d-%d", r, k), int64(10+k))
	p.Labels = map[string]string{"bench": run}
	p.Spec.Match = v1alpha1.Match{}
	section := gwapiv1.SectionName(fmt.Sprintf("rule-%d", k))
	p.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: gwapiv1.GroupName, Kind: v1alpha1.KindHTTPRoute,
		Name: gwapiv1.ObjectName(fmt.Sprintf("route-%02d", r)), SectionName: &section}}
	return p
}
