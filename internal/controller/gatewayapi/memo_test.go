package gatewayapi

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// TestResolveOncePerState: the policies of a namespace over unchanged routes are resolved
// once, whoever asks (the snapshot sync, each policy's reconcile); a new generation of a
// route or of a policy resolves again.
func TestResolveOncePerState(t *testing.T) {
	ctx := context.Background()
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 1, UID: "r1"},
		Spec: gwapiv1.HTTPRouteSpec{Hostnames: []gwapiv1.Hostname{"web.example.com"},
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
			Rules:           []gwapiv1.HTTPRouteRule{{}}}}
	p := policytest.New("ns", "p", policytest.Requests(10))
	p.Spec.Match = v1alpha1.Match{}
	p.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: gwapiv1.GroupName, Kind: v1alpha1.KindHTTPRoute, Name: "web"}}
	p.UID, p.Generation = "p1", 1
	g := &Reader{Client: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(route).Build(), Enabled: true}
	policies := []v1alpha1.RateLimitPolicy{*p}

	first, err := g.Resolve(ctx, "ns", policies)
	if err != nil || first["p"] == nil || len(first["p"].Matches) == 0 {
		t.Fatalf("Resolve = %v, %v; want p attached to web", first, err)
	}
	again, _ := g.Resolve(ctx, "ns", policies)
	if reflect.ValueOf(again).Pointer() != reflect.ValueOf(first).Pointer() {
		t.Errorf("the same state was resolved twice")
	}
	policies[0].Generation = 2
	if next, _ := g.Resolve(ctx, "ns", policies); reflect.ValueOf(next).Pointer() == reflect.ValueOf(first).Pointer() {
		t.Errorf("a new policy generation reused the old resolution")
	}
	mine, err := g.ResolveFor(ctx, &policies[0])
	if err != nil || mine == nil {
		t.Fatalf("ResolveFor = %v, %v", mine, err)
	}
	if len(mine.Ancestors) == 0 {
		t.Fatalf("ResolveFor = %+v, want ancestors", mine)
	}
	mine.Ancestors[0] = attachmentAncestorForTest()
	if shared, _ := g.Resolve(ctx, "ns", policies); shared["p"].Ancestors[0].Ref.Name == "changed" {
		t.Errorf("ResolveFor's result shares its ancestors with the memo")
	}
}

func attachmentAncestorForTest() attachment.Ancestor {
	return attachment.Ancestor{Ref: gwapiv1.ParentReference{Name: "changed"}}
}
