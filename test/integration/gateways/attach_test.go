package gateways_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	accepted = "Accepted"
	enforced = v1alpha1.AncestorConditionEnforced
)

// TestAttachHTTPRoute: a policy on an HTTPRoute governs exactly the route's hostname and
// path through the ext_authz front; editing the route's hostnames moves the limit; the
// generated SecurityPolicy (real Envoy Gateway CRD, server-side applied) points at the
// namespace's shared service, is owned by the policy, and goes with it.
func TestAttachHTTPRoute(t *testing.T) {
	r := newAttachRig(t)
	r.gateway(t, "eg", egClass)
	r.route(t, "echo", "eg", "echo.example.com", "/api")
	r.policy(t, "echo-limit", 3, "", v1alpha1.KindHTTPRoute, "echo")
	r.waitAncestor(t, "echo-limit", "eg", accepted, metav1.ConditionTrue, "Accepted")
	r.waitGoverns(t, "echo-limit", "eg", "echo.example.com")
	if got := fmt.Sprint(r.burst(t, 4, "echo.example.com", "/api/orders")); got != "[200 200 200 429]" {
		t.Errorf("route host and path: %s, want 3×200 then 429", got)
	}
	if got := r.check(t, "other.example.com", "/api/orders"); got != 200 {
		t.Errorf("another host: %d, want 200 (not the route's)", got)
	}
	if got := r.check(t, "echo.example.com", "/static"); got != 200 {
		t.Errorf("another path: %d, want 200 (not the route's)", got)
	}
	checkSecurityPolicy(t, r, "echo-limit", v1alpha1.KindHTTPRoute, "echo")

	var hr gwapiv1.HTTPRoute
	if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: "echo"}, &hr); err != nil {
		t.Fatal(err)
	}
	hr.Spec.Hostnames = []gwapiv1.Hostname{"moved.example.com"}
	if err := r.c.Update(context.Background(), &hr); err != nil {
		t.Fatalf("edit route: %v", err)
	}
	r.loadSnapshot(t, "moved to moved.example.com", func(s *snapshot.Snapshot) bool {
		return slices.Equal(entryHosts(s, "echo-limit"), []string{"moved.example.com"})
	})
	if got := r.check(t, "moved.example.com", "/api/orders"); got != 429 {
		t.Errorf("the route's new host: %d, want 429 (the same exhausted counter now governs it)", got)
	}
	if got := r.check(t, "echo.example.com", "/api/orders"); got != 200 {
		t.Errorf("the route's old host: %d, want 200 (no longer governed)", got)
	}

	if err := r.c.Delete(context.Background(), r.get(t, "echo-limit")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r, gatewayapi.SecurityPolicyGVK, gatewayapi.DataPlaneName("echo-limit"))
}

// TestAttachDefaultsOverrides: a Gateway's defaults govern the route without a policy and
// yield to a route's own policy; an overrides policy takes both routes; each policy's
// ancestor status says so, and the front enforces the winner.
func TestAttachDefaultsOverrides(t *testing.T) {
	r := newAttachRig(t)
	r.gateway(t, "eg", egClass)
	r.route(t, "a", "eg", "a.example.com", "/")
	r.route(t, "b", "eg", "b.example.com", "/")
	r.policy(t, "defaults", 2, "", v1alpha1.KindGateway, "eg")
	r.policy(t, "route-a", 5, "", v1alpha1.KindHTTPRoute, "a")
	r.waitAncestor(t, "defaults", "eg", enforced, metav1.ConditionTrue, v1alpha1.AncestorReasonEnforced)
	r.waitAncestor(t, "route-a", "eg", enforced, metav1.ConditionTrue, v1alpha1.AncestorReasonEnforced)
	r.loadSnapshot(t, "defaults on b, route-a on a", func(s *snapshot.Snapshot) bool {
		return slices.Equal(entryHosts(s, "defaults"), []string{"b.example.com"}) &&
			slices.Equal(entryHosts(s, "route-a"), []string{"a.example.com"})
	})
	if got := fmt.Sprint(r.burst(t, 3, "b.example.com", "/")); got != "[200 200 429]" {
		t.Errorf("route b under the Gateway's defaults (2/min): %s", got)
	}
	if got := fmt.Sprint(r.burst(t, 3, "a.example.com", "/")); got != "[200 200 200]" {
		t.Errorf("route a under its own policy (5/min), not the defaults: %s", got)
	}

	r.policy(t, "overrides", 1, v1alpha1.PrecedenceOverrides, v1alpha1.KindGateway, "eg")
	r.waitAncestor(t, "overrides", "eg", enforced, metav1.ConditionTrue, v1alpha1.AncestorReasonEnforced)
	r.waitAncestor(t, "route-a", "eg", enforced, metav1.ConditionFalse, v1alpha1.ReasonOverridden)
	r.waitAncestor(t, "defaults", "eg", enforced, metav1.ConditionFalse, v1alpha1.ReasonOverridden)
	r.loadSnapshot(t, "only the overrides", func(s *snapshot.Snapshot) bool {
		return len(s.Policies) == 1 && len(entryHosts(s, "overrides")) == 2
	})
	if got := fmt.Sprint(r.burst(t, 2, "a.example.com", "/x")); got != "[200 429]" {
		t.Errorf("route a under the overrides (1/min): %s", got)
	}
	// Overridden everywhere is the Gateway owner's choice: Ready, not Stalled, so GitOps
	// tools see the app team's policy healthy and the not-Ready alert stays quiet.
	r.waitCondition(t, "route-a", v1alpha1.ConditionPublished, metav1.ConditionFalse, v1alpha1.ReasonOverridden)
	r.waitCondition(t, "route-a", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonOverridden)
	if s := meta.FindStatusCondition(r.get(t, "route-a").Status.Conditions, v1alpha1.ConditionStalled); s != nil {
		t.Errorf("overridden route-a is Stalled: %+v", s)
	}
}

// TestAttachTargetNotFoundConflictIstio: a policy on a missing route is TargetNotFound and
// recovers when the route appears; a second policy on the same route is Conflicted until the
// first goes; on an Istio Gateway the controller keeps an AuthorizationPolicy (real Istio
// CRD) with the namespace's ext_authz provider, replaced along with its policy.
func TestAttachTargetNotFoundConflictIstio(t *testing.T) {
	r := newAttachRig(t)
	r.gateway(t, "mesh", istioClass)
	r.policy(t, "early", 3, "", v1alpha1.KindHTTPRoute, "late")
	r.waitAncestor(t, "early", "late", accepted, metav1.ConditionFalse, "TargetNotFound")
	r.waitCondition(t, "early", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAttached)
	r.route(t, "late", "mesh", "late.example.com", "/")
	r.waitAncestor(t, "early", "mesh", accepted, metav1.ConditionTrue, "Accepted")
	checkAuthorizationPolicy(t, r, "early", "mesh")

	r.policy(t, "second", 3, "", v1alpha1.KindHTTPRoute, "late")
	r.waitAncestor(t, "second", "mesh", accepted, metav1.ConditionFalse, "Conflicted")
	r.waitCondition(t, "second", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonConflicted)
	if err := r.c.Delete(context.Background(), r.get(t, "early")); err != nil {
		t.Fatal(err)
	}
	r.waitAncestor(t, "second", "mesh", accepted, metav1.ConditionTrue, "Accepted")
	r.waitCondition(t, "second", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	waitGone(t, r, gatewayapi.AuthorizationPolicyGVK, gatewayapi.DataPlaneName("early"))
	checkAuthorizationPolicy(t, r, "second", "mesh")

	second := r.get(t, "second")
	second.Spec.TargetRefs[0].Name = "gone"
	if err := r.c.Update(context.Background(), second); err != nil {
		t.Fatalf("retarget: %v", err)
	}
	r.waitAncestor(t, "second", "gone", accepted, metav1.ConditionFalse, "TargetNotFound")
	waitGone(t, r, gatewayapi.AuthorizationPolicyGVK, gatewayapi.DataPlaneName("second"))
}

// TestAttachKeepsForeignObjects: an AuthorizationPolicy the controller did not write, with
// the name a policy's would have, is neither taken over nor deleted.
func TestAttachKeepsForeignObjects(t *testing.T) {
	r := newAttachRig(t)
	r.gateway(t, "mesh", istioClass)
	r.route(t, "app", "mesh", "app.example.com", "/")
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(gatewayapi.AuthorizationPolicyGVK)
	foreign.SetName(gatewayapi.DataPlaneName("app"))
	foreign.Object["spec"] = map[string]any{"action": "DENY", "rules": []any{map[string]any{}}}
	r.create(t, foreign)
	r.policy(t, "app", 3, "", v1alpha1.KindHTTPRoute, "app")
	r.waitAncestor(t, "app", "mesh", accepted, metav1.ConditionTrue, "Accepted")
	wait.Consistently(t, 2*time.Second, "foreign AuthorizationPolicy untouched", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gatewayapi.AuthorizationPolicyGVK)
		if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: foreign.GetName()}, u); err != nil {
			return err
		}
		if action, _, _ := unstructured.NestedString(u.Object, "spec", "action"); action != "DENY" || len(u.GetOwnerReferences()) > 0 {
			return fmt.Errorf("taken over: action %q, owners %v", action, u.GetOwnerReferences())
		}
		return nil
	})
}

// TestAttachRefusedByAPIServer: the CRD refuses match with targetRefs, a kind other than
// Gateway, HTTPRoute and GRPCRoute, and precedence on a route target, naming the field.
func TestAttachRefusedByAPIServer(t *testing.T) {
	r := &attachRig{env: env(t), c: env(t).Client}
	r.ns = "default"
	ref := v1alpha1.TargetRef{Group: gwapiv1.GroupName, Kind: v1alpha1.KindHTTPRoute, Name: "x"}
	for name, tc := range map[string]struct {
		edit func(*v1alpha1.RateLimitPolicySpec)
		want string
	}{
		"both":       {func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP = []v1alpha1.HTTPMatch{{}} }, "exactly one of match and targetRefs"},
		"kind":       {func(s *v1alpha1.RateLimitPolicySpec) { s.TargetRefs[0].Kind = "Service" }, "spec.targetRefs[0].kind"},
		"precedence": {func(s *v1alpha1.RateLimitPolicySpec) { s.Precedence = v1alpha1.PrecedenceOverrides }, "spec.precedence"},
	} {
		p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + name, Namespace: "default"}, Spec: v1alpha1.RateLimitPolicySpec{
			TargetRefs: []v1alpha1.TargetRef{ref}, Algorithm: v1alpha1.AlgorithmFixedWindow,
			Identity: v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityClientIP}}},
			Limits:   []v1alpha1.Limit{{Name: "l", Requests: 1, Period: metav1.Duration{Duration: time.Second}}}}}
		tc.edit(&p.Spec)
		err := r.c.Create(context.Background(), p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: create error %v, want one naming %q", name, err, tc.want)
		}
	}
}

// dataPlaneObject waits for and returns the policy's object of kind gvk.
func dataPlaneObject(t *testing.T, r *attachRig, gvk schema.GroupVersionKind, policy string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	wait.Eventually(t, 30*time.Second, gvk.Kind+" of "+policy, func() error {
		return r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: gatewayapi.DataPlaneName(policy)}, u)
	})
	p := r.get(t, policy)
	refs := u.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != p.UID || refs[0].Controller == nil || !*refs[0].Controller ||
		refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		t.Errorf("%s owner references %+v: want the policy as controller, blocking deletion", gvk.Kind, refs)
	}
	return u
}

func checkSecurityPolicy(t *testing.T, r *attachRig, policy, kind, target string) {
	t.Helper()
	u := dataPlaneObject(t, r, gatewayapi.SecurityPolicyGVK, policy)
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "targetRefs")
	if got, want := fmt.Sprint(refs), fmt.Sprintf("[map[group:gateway.networking.k8s.io kind:%s name:%s]]", kind, target); got != want {
		t.Errorf("SecurityPolicy targetRefs %s, want %s", got, want)
	}
	// The API server defaults group "", kind Service and weight; no namespace: the policy's own.
	backends, _, _ := unstructured.NestedSlice(u.Object, "spec", "extAuth", "grpc", "backendRefs")
	if len(backends) != 1 {
		t.Fatalf("SecurityPolicy backendRefs %v, want one", backends)
	}
	b, _ := backends[0].(map[string]any)
	if b["name"] != "ratelimit-service" || fmt.Sprint(b["port"]) != "8081" || b["kind"] != "Service" || b["namespace"] != nil {
		t.Errorf("SecurityPolicy backendRef %v, want Service ratelimit-service:8081 of the policy's namespace", b)
	}
}

func checkAuthorizationPolicy(t *testing.T, r *attachRig, policy, gateway string) {
	t.Helper()
	u := dataPlaneObject(t, r, gatewayapi.AuthorizationPolicyGVK, policy)
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "targetRefs")
	action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
	provider, _, _ := unstructured.NestedString(u.Object, "spec", "provider", "name")
	want := fmt.Sprintf("[map[group:gateway.networking.k8s.io kind:Gateway name:%s]] CUSTOM ratelimit-ext-authz-%s", gateway, r.ns)
	if got := fmt.Sprint(refs, " ", action, " ", provider); got != want {
		t.Errorf("AuthorizationPolicy %s, want %s", got, want)
	}
}

// waitGone waits until the controller has deleted the object (envtest runs no garbage
// collector: this is the controller's own cleanup).
func waitGone(t *testing.T, r *attachRig, gvk schema.GroupVersionKind, name string) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, gvk.Kind+" "+name+" deleted", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := r.c.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: name}, u)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
}

// TestAttachWritesOnlyItsNamespace: a route of the policy's namespace attached to an Istio
// Gateway of another namespace reports that Gateway as its ancestor, but the controller
// writes no AuthorizationPolicy there (nor one in its own namespace, which has no Gateway to
// put it on): a policy never makes the controller write outside its namespace.
func TestAttachWritesOnlyItsNamespace(t *testing.T) {
	infraNS := kube.NewNamespace(t, env(t), "attach-infra-")
	r := newAttachRig(t, infraNS) // the manager reads the Gateway there: it is Istio's
	infra := &attachRig{env: r.env, c: r.c, ns: infraNS}
	infra.gateway(t, "shared", istioClass)
	hr := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	other := gwapiv1.Namespace(infra.ns)
	hr.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "shared", Namespace: &other}}
	hr.Spec.Hostnames = []gwapiv1.Hostname{"app.example.com"}
	r.create(t, hr)
	r.policy(t, "app", 3, "", v1alpha1.KindHTTPRoute, "app")
	r.waitAncestor(t, "app", "shared", accepted, metav1.ConditionTrue, "Accepted")
	wait.Consistently(t, 2*time.Second, "no AuthorizationPolicy anywhere", func() error {
		for _, ns := range []string{r.ns, infra.ns} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gatewayapi.AuthorizationPolicyGVK.GroupVersion().WithKind("AuthorizationPolicyList"))
			if err := r.c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("AuthorizationPolicy %s/%s written", ns, list.Items[0].GetName())
			}
		}
		return nil
	})
}

// TestAttachGRPCRoute: a policy on a GRPCRoute governs its hostname and the gRPC paths of
// its method matches, and its SecurityPolicy targets the GRPCRoute.
func TestAttachGRPCRoute(t *testing.T) {
	r := newAttachRig(t)
	r.gateway(t, "eg", egClass)
	svc := "shop.v1.Cart"
	gr := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "cart"}}
	gr.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "eg"}}
	gr.Spec.Hostnames = []gwapiv1.Hostname{"grpc.example.com"}
	gr.Spec.Rules = []gwapiv1.GRPCRouteRule{{Matches: []gwapiv1.GRPCRouteMatch{{Method: &gwapiv1.GRPCMethodMatch{Service: &svc}}}}}
	r.create(t, gr)
	r.policy(t, "cart", 2, "", v1alpha1.KindGRPCRoute, "cart")
	r.waitGoverns(t, "cart", "eg", "grpc.example.com")
	if got := fmt.Sprint(r.burst(t, 3, "grpc.example.com", "/shop.v1.Cart/Add")); got != "[200 200 429]" {
		t.Errorf("the route's service: %s, want 2×200 then 429", got)
	}
	if got := r.check(t, "grpc.example.com", "/shop.v1.Orders/List"); got != 200 {
		t.Errorf("another service: %d, want 200", got)
	}
	checkSecurityPolicy(t, r, "cart", v1alpha1.KindGRPCRoute, "cart")
}
