package gateways_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestBrokenManifestsRejected is the control for TestManifestsAcceptedByAPIServer: each
// shipped object, broken in one field, is refused by the API server, so the installed CRDs
// really validate what the gateways would read (an unknown field, a bad enum value, a
// violated CEL rule, a wrong type).
func TestBrokenManifestsRejected(t *testing.T) {
	e := env(t)
	ensureNamespace(t, e.Client, appNamespace, nil)
	ensureNamespace(t, e.Client, "istio-system", nil)
	for _, c := range []struct {
		name, dir, kind, objName string
		path                     []string
		value                    any
		wantInError              string
	}{
		{"SecurityPolicy with an unknown field under extAuth", envoyGatewayDir, "SecurityPolicy", "ratelimit",
			[]string{"spec", "extAuth", "grpcc"}, map[string]any{}, "grpcc"},
		{"SecurityPolicy with extAuth neither grpc nor http", envoyGatewayDir, "SecurityPolicy", "ratelimit",
			[]string{"spec", "extAuth", "grpc"}, nil, "extAuth"},
		{"AuthorizationPolicy with action BOGUS", istioDir, "AuthorizationPolicy", "ratelimit",
			[]string{"spec", "action"}, "BOGUS", "BOGUS"},
		{"Middleware with a numeric forwardAuth address", traefikDir, "Middleware", "ratelimit",
			[]string{"spec", "forwardAuth", "address"}, int64(8082), "address"},
		{"HTTPRoute with an invalid hostname", envoyGatewayDir, "HTTPRoute", "echo",
			[]string{"spec", "hostnames"}, []any{"not a host!"}, "hostnames"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := render(t, c.dir).find(c.kind, c.objName)
			if u == nil {
				t.Fatalf("%s renders no %s %s", c.dir, c.kind, c.objName)
			}
			if err := dryRunApply(t, e.Client, u); err != nil {
				t.Fatalf("the unbroken %s is refused: %v", c.kind, err)
			}
			broken := u.DeepCopy()
			setPath(t, broken, c.path, c.value)
			err := dryRunApply(t, e.Client, broken)
			if err == nil || !strings.Contains(err.Error(), c.wantInError) {
				t.Fatalf("broken %s (%s = %v): got %v, want a refusal naming %q", c.kind, strings.Join(c.path, "."), c.value, err, c.wantInError)
			}
			t.Logf("refused as it should be: %v", err)
		})
	}
}

// setPath sets (or, for a nil value, removes) the field at path.
func setPath(t *testing.T, u *unstructured.Unstructured, path []string, value any) {
	t.Helper()
	if value == nil {
		unstructured.RemoveNestedField(u.Object, path...)
		return
	}
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatalf("set %v: %v", path, err)
	}
}
