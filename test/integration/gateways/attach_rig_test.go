package gateways_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/operator"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Class names of the test's GatewayClasses; the manager maps them by controllerName, as
// --gateway-implementations does by default.
const (
	egClass    = "eg"
	istioClass = "istio"
)

// attachRig is a namespace in envtest with the real Gateway API, Envoy Gateway and Istio
// CRDs, the operator's controllers running on a real redis-server with only the generated
// ClusterRole's permissions, and the ext_authz front (as a gateway calls it) over an engine
// loaded with the namespace's published snapshot.
type attachRig struct {
	env   *kube.Env
	c     client.Client
	ns    string
	store *engine.Store
	front *extauthz.Service
}

// newAttachRig starts it; the manager also watches the namespaces in also.
func newAttachRig(t *testing.T, also ...string) *attachRig {
	t.Helper()
	e := env(t)
	ns := kube.NewNamespace(t, e, "attach-")
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	impls, err := attachment.ParseImplementations(attachment.DefaultImplementations)
	if err != nil {
		t.Fatal(err)
	}
	m, err := operator.StartWith(asManager(t, e), rdb, operator.StandaloneTopology(srv.Addr()), controller.Config{Resync: time.Second,
		Gateway: gatewayapi.Config{Implementations: impls, Service: "ratelimit-service", Port: 8081,
			IstioProvider: "ratelimit-ext-authz-{namespace}"}}, append([]string{ns}, also...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	lim, err := limiter.New(rdb, limiter.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	store := &engine.Store{Namespace: ns}
	eng := &engine.Engine{Store: store}
	eng.SetLimiter(lim)
	r := &attachRig{env: e, c: e.Client, ns: ns, store: store, front: extauthz.New(eng, logr.Discard())}
	r.classes(t)
	return r
}

// asManager is e's config impersonating a user bound to exactly config/rbac/role.yaml (the
// generated ClusterRole), so the attachment tests also show that it is enough.
func asManager(t *testing.T, e *kube.Env) *rest.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("decode role.yaml: %v", err)
	}
	name := "attach-manager-" + rand.String(6)
	role.Name = name
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	for _, o := range []client.Object{&role, binding} {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	return cfg
}

// classes creates the cluster's two GatewayClasses once (they are cluster-scoped).
func (r *attachRig) classes(t *testing.T) {
	t.Helper()
	for name, ctrl := range map[string]string{egClass: "gateway.envoyproxy.io/gatewayclass-controller", istioClass: "istio.io/gateway-controller"} {
		gc := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: gwapiv1.GatewayController(ctrl)}}
		if err := r.c.Create(context.Background(), gc); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("create gatewayclass %s: %v", name, err)
		}
	}
}

func (r *attachRig) create(t *testing.T, o client.Object) {
	t.Helper()
	o.SetNamespace(r.ns)
	if err := r.c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func (r *attachRig) gateway(t *testing.T, name, class string) {
	t.Helper()
	r.create(t, &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: gwapiv1.ObjectName(class),
		Listeners:        []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}}}})
}

// route creates an HTTPRoute on gateway gw for host, with one rule per path prefix.
func (r *attachRig) route(t *testing.T, name, gw, host string, prefixes ...string) {
	t.Helper()
	hr := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name}}
	hr.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: gwapiv1.ObjectName(gw)}}
	hr.Spec.Hostnames = []gwapiv1.Hostname{gwapiv1.Hostname(host)}
	for _, p := range prefixes {
		typ, val := gwapiv1.PathMatchPathPrefix, p
		hr.Spec.Rules = append(hr.Spec.Rules, gwapiv1.HTTPRouteRule{
			Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &typ, Value: &val}}}})
	}
	r.create(t, hr)
}

// policy creates a policy of requests per minute, one counter for everyone, on a target.
func (r *attachRig) policy(t *testing.T, name string, requests int64, precedence v1alpha1.Precedence, kind, target string) {
	t.Helper()
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RateLimitPolicySpec{
		TargetRefs: []v1alpha1.TargetRef{{Group: gwapiv1.GroupName, Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(target)}},
		Precedence: precedence,
		Identity: v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
			{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}}, OnMissing: v1alpha1.MissingIdentityShared},
		Algorithm: v1alpha1.AlgorithmFixedWindow,
		Limits:    []v1alpha1.Limit{{Name: "per-minute", Requests: requests, Period: metav1.Duration{Duration: time.Minute}}},
	}}
	r.create(t, p)
}

// get reads a policy.
func (r *attachRig) get(t *testing.T, name string) *v1alpha1.RateLimitPolicy {
	t.Helper()
	var p v1alpha1.RateLimitPolicy
	if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: name}, &p); err != nil {
		t.Fatalf("get policy %s: %v", name, err)
	}
	return &p
}

// ancestorCondition is the condition typ of policy name for the ancestor named ancestor.
func (r *attachRig) ancestorCondition(t *testing.T, name, ancestor, typ string) *metav1.Condition {
	t.Helper()
	for _, a := range r.get(t, name).Status.Ancestors {
		if string(a.AncestorRef.Name) == ancestor && a.ControllerName == v1alpha1.ControllerName {
			for i := range a.Conditions {
				if a.Conditions[i].Type == typ {
					return &a.Conditions[i]
				}
			}
		}
	}
	return nil
}

// waitAncestor waits until policy name reports condition typ with status and reason on
// ancestor.
func (r *attachRig) waitAncestor(t *testing.T, name, ancestor, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, fmt.Sprintf("%s: %s %s=%s/%s", name, ancestor, typ, status, reason), func() error {
		c := r.ancestorCondition(t, name, ancestor, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// waitCondition waits until policy name's own condition typ has status and reason.
func (r *attachRig) waitCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, fmt.Sprintf("%s: %s=%s/%s", name, typ, status, reason), func() error {
		c := meta.FindStatusCondition(r.get(t, name).Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// loadSnapshot waits until the published snapshot satisfies ok and loads it into the front.
func (r *attachRig) loadSnapshot(t *testing.T, what string, ok func(*snapshot.Snapshot) bool) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, "snapshot "+what, func() error {
		var cm corev1.ConfigMap
		if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: snapshot.ConfigMapName}, &cm); err != nil {
			return err
		}
		s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
		if err != nil {
			return err
		}
		if !ok(s) {
			return fmt.Errorf("snapshot holds %+v", s.Policies)
		}
		return r.store.Load([]byte(cm.Data[snapshot.DataKey]), "test")
	})
}

// waitGoverns waits until policy is Enforced on gateway and its published entry governs
// exactly host, and loads that snapshot into the front.
func (r *attachRig) waitGoverns(t *testing.T, policy, gateway, host string) {
	t.Helper()
	r.waitAncestor(t, policy, gateway, v1alpha1.AncestorConditionEnforced, metav1.ConditionTrue, v1alpha1.AncestorReasonEnforced)
	r.loadSnapshot(t, policy+" on "+host, func(s *snapshot.Snapshot) bool {
		return slices.Equal(entryHosts(s, policy), []string{host})
	})
}

// entryHosts is the hosts of the named entry's matches, nil when absent.
func entryHosts(s *snapshot.Snapshot, name string) []string {
	for _, e := range s.Policies {
		if e.Name == name {
			var hosts []string
			for _, m := range e.Match.HTTP {
				hosts = append(hosts, m.Hosts...)
			}
			return hosts
		}
	}
	return nil
}

// check asks the ext_authz front about a request as Envoy sends it and returns the HTTP
// status the gateway would answer (200 when admitted).
func (r *attachRig) check(t *testing.T, host, path string) int {
	t.Helper()
	hm := &corev3.HeaderMap{}
	for k, v := range map[string]string{":authority": host, ":path": path, ":method": "GET", "x-api-key": "k"} {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Host: host, Path: path, Scheme: "http", Protocol: "HTTP/1.1", HeaderMap: hm}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.front.Check(ctx, req)
	if err != nil {
		t.Fatalf("Check %s%s: %v", host, path, err)
	}
	if d := resp.GetDeniedResponse(); d != nil {
		return int(d.GetStatus().GetCode())
	}
	return 200
}

// burst sends n requests and returns their statuses.
func (r *attachRig) burst(t *testing.T, n int, host, path string) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		out[i] = r.check(t, host, path)
	}
	return out
}
