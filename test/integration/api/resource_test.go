package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// TestDiscovery checks what kubectl learns from discovery: the short name rlp, the ratelimit
// category, namespaced scope and a status subresource.
func TestDiscovery(t *testing.T) {
	e := suite.Env(t)
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	list, err := dc.ServerResourcesForGroupVersion(policyv1alpha1.GroupVersion.String())
	if err != nil {
		t.Fatalf("discover %s: %v", policyv1alpha1.GroupVersion, err)
	}
	var main, status *metav1.APIResource
	for i := range list.APIResources {
		switch r := &list.APIResources[i]; r.Name {
		case "ratelimitpolicies":
			main = r
		case "ratelimitpolicies/status":
			status = r
		}
	}
	if main == nil {
		t.Fatalf("ratelimitpolicies not served; got %+v", list.APIResources)
	}
	if !slices.Contains(main.ShortNames, "rlp") || !slices.Contains(main.Categories, "ratelimit") || !main.Namespaced {
		t.Errorf("want namespaced, short name rlp, category ratelimit; got %+v", main)
	}
	if status == nil {
		t.Error("no status subresource served")
	}
}

// TestPrinterColumns reads policies as the server-side Table that `kubectl get rlp` prints and
// checks the columns and their values before and after the controller would mark it Ready.
func TestPrinterColumns(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "t-")
	p := typedPolicy(ns, "columns")
	if err := e.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("create: %v", err)
	}
	tbl := getTable(t, e, ns)
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	want := []string{"Name", "Algorithm", "Requests", "Per", "Ready", "Age"}
	if !slices.Equal(names, want) {
		t.Fatalf("columns %v, want %v", names, want)
	}
	row := tbl.Rows[0].Cells
	if row[0] != "columns" || row[1] != "TokenBucket" || fmt.Sprint(row[2]) != "10" || row[3] != "1s" || row[4] != nil {
		t.Errorf("row before Ready: %v", row)
	}
	p.Status.Conditions = []metav1.Condition{readyCondition(p.Generation)}
	if err := e.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatalf("status update: %v", err)
	}
	if row := getTable(t, e, ns).Rows[0].Cells; row[4] != "True" {
		t.Errorf("Ready column %v after the Ready condition was set, want True", row[4])
	}
}

// TestStatusSubresource proves spec and status are written through separate endpoints: a spec
// update ignores status and bumps generation, a status update ignores spec and does not.
func TestStatusSubresource(t *testing.T) {
	e := suite.Env(t)
	ctx := context.Background()
	ns := kube.NewNamespace(t, e, "t-")
	p := typedPolicy(ns, "status")
	if err := e.Client.Create(ctx, p); err != nil {
		t.Fatalf("create: %v", err)
	}
	p.Status.ObservedGeneration = 1
	p.Status.Conditions = []metav1.Condition{readyCondition(1)}
	if err := e.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("status update: %v", err)
	}

	p.Spec.Limits[0].Requests = 99
	p.Status.ObservedGeneration = 42
	if err := e.Client.Update(ctx, p); err != nil {
		t.Fatalf("spec update: %v", err)
	}
	got := get(t, e, client.ObjectKeyFromObject(p))
	if got.Spec.Limits[0].Requests != 99 || got.Generation != 2 {
		t.Errorf("spec update: requests %d generation %d, want 99 and 2", got.Spec.Limits[0].Requests, got.Generation)
	}
	if got.Status.ObservedGeneration != 1 || len(got.Status.Conditions) != 1 {
		t.Errorf("spec update changed status: %+v", got.Status)
	}

	got.Spec.Limits[0].Requests = 7
	got.Status.ObservedGeneration = 2
	if err := e.Client.Status().Update(ctx, got); err != nil {
		t.Fatalf("second status update: %v", err)
	}
	after := get(t, e, client.ObjectKeyFromObject(p))
	if after.Spec.Limits[0].Requests != 99 || after.Generation != 2 {
		t.Errorf("status update changed spec: requests %d generation %d", after.Spec.Limits[0].Requests, after.Generation)
	}
	if after.Status.ObservedGeneration != 2 {
		t.Errorf("status update lost: observedGeneration %d, want 2", after.Status.ObservedGeneration)
	}
}

func typedPolicy(ns, name string) *policyv1alpha1.RateLimitPolicy {
	return policytest.New(ns, name, policytest.Paths("/"),
		policytest.Sources(policyv1alpha1.IdentitySource{Type: policyv1alpha1.IdentityClientIP}))
}

func readyCondition(gen int64) metav1.Condition {
	return metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Published", Message: "test", ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
}

func get(t *testing.T, e *kube.Env, key client.ObjectKey) *policyv1alpha1.RateLimitPolicy {
	t.Helper()
	var p policyv1alpha1.RateLimitPolicy
	if err := e.Client.Get(context.Background(), key, &p); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return &p
}

// getTable lists the namespace's policies as a meta.k8s.io Table, the way kubectl asks.
func getTable(t *testing.T, e *kube.Env, ns string) *metav1.Table {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	body, err := cs.RESTClient().Get().
		AbsPath("apis", policyv1alpha1.GroupVersion.Group, policyv1alpha1.GroupVersion.Version,
			"namespaces", ns, "ratelimitpolicies").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatalf("get table: %v: %s", err, body)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatalf("decode table: %v", err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("want 1 row, got %d", len(tbl.Rows))
	}
	return &tbl
}
