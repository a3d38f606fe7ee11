package api

import (
	"context"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestSamplesAccepted creates every policy under config/samples on the real API server and
// reads it back through the typed client, so a sample that the CRD schema, a CEL rule or the
// Go types would refuse fails here.
func TestSamplesAccepted(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "t-")
	algorithms := map[policyv1alpha1.Algorithm]bool{}
	var multiLimit, idempotent, localCap bool
	for _, path := range kube.SamplePaths(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			obj := kube.ReadObject(t, path)
			obj.SetNamespace(ns)
			if err := e.Client.Create(context.Background(), obj); err != nil {
				t.Fatalf("API server refused sample %s: %v", path, err)
			}
			var got policyv1alpha1.RateLimitPolicy
			if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
				t.Fatalf("read back: %v", err)
			}
			spec := got.Spec
			algorithms[spec.Algorithm] = true
			multiLimit = multiLimit || len(spec.Limits) > 1
			idempotent = idempotent || spec.Idempotency != nil
			localCap = localCap || (spec.FailureMode == policyv1alpha1.FailureModeLocalCap && spec.LocalCap != nil)
		})
	}
	for _, a := range []policyv1alpha1.Algorithm{policyv1alpha1.AlgorithmTokenBucket,
		policyv1alpha1.AlgorithmSlidingWindow, policyv1alpha1.AlgorithmFixedWindow, policyv1alpha1.AlgorithmGCRA} {
		if !algorithms[a] {
			t.Errorf("no accepted sample uses algorithm %s", a)
		}
	}
	if !multiLimit || !idempotent || !localCap {
		t.Errorf("samples must cover multi-limit (%v), idempotency (%v) and LocalCap (%v)", multiLimit, idempotent, localCap)
	}
}

// TestServerDefaults checks the defaults the CRD schema applies, so a policy that omits them
// is stored complete even without the webhook.
func TestServerDefaults(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "t-")
	obj := basePolicy(t)
	obj.SetNamespace(ns)
	set(t, obj.Object, "spec.identity.sources", []any{
		map[string]any{"type": "ClientIP", "clientIP": map[string]any{}},
		map[string]any{"type": "JWTClaim", "jwtClaim": map[string]any{"claim": "sub"}},
	})
	set(t, obj.Object, "spec.cost", map[string]any{})
	set(t, obj.Object, "spec.idempotency", map[string]any{"ttl": "10m"})
	set(t, obj.Object, "spec.hotKeys", map[string]any{})
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	var got policyv1alpha1.RateLimitPolicy
	if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	s := got.Spec
	checks := []struct {
		field     string
		got, want any
	}{
		{"spec.failureMode", s.FailureMode, policyv1alpha1.FailureModeFailOpen},
		{"spec.identity.onMissing", s.Identity.OnMissing, policyv1alpha1.MissingIdentityShared},
		{"spec.identity.sources[0].clientIP.ipv4PrefixLength", s.Identity.Sources[0].ClientIP.IPv4PrefixLength, int32(32)},
		{"spec.identity.sources[0].clientIP.ipv6PrefixLength", s.Identity.Sources[0].ClientIP.IPv6PrefixLength, int32(64)},
		{"spec.identity.sources[1].jwtClaim.header", s.Identity.Sources[1].JWTClaim.Header, "Authorization"},
		{"spec.cost.default", s.Cost.Default, int64(1)},
		{"spec.idempotency.header", s.Idempotency.Header, "Idempotency-Key"},
		{"spec.hotKeys.leases", s.HotKeys.Leases, policyv1alpha1.LeaseModeOff},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s defaulted to %v, want %v", c.field, c.got, c.want)
		}
	}
}
