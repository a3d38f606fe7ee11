package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
)

// An Idempotency-Key must not be a free pass on any front: with 3 per minute, one key sent 50
// times was forwarded 50 times, and one key on 12 different paths was admitted 12 times.

// idempotentPolicy is scPolicy with idempotency (default maxReplays 3) on the whole site.
func idempotentPolicy(name string, requests int64) *v1alpha1.RateLimitPolicy {
	return scPolicy(name, requests, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/"}}}
		s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: time.Minute}}
	})
}

func TestProxyIdempotencyKeyIsNoFreePass(t *testing.T) {
	rig := scStart(t, limiter.Options{}, idempotentPolicy("pay", 3))
	p := newSCProxy(t, rig)
	forwarded := 0
	for range 50 {
		if resp, _ := p.get(t, "/pay", "X-API-Key", "alice", "Idempotency-Key", "same"); resp.StatusCode == http.StatusOK {
			forwarded++
		}
	}
	// The first request, its 3 replays (the default maxReplays), then the 2 left of the limit.
	if forwarded != 6 || p.hits.Load() != 6 {
		t.Errorf("one key sent 50 times: %d answered 200, upstream saw %d; want 6 (3 requests + 3 replays)", forwarded, p.hits.Load())
	}
	forwarded = 0
	for i := range 12 {
		if resp, _ := p.get(t, fmt.Sprintf("/path-%d", i), "X-API-Key", "bob", "Idempotency-Key", "same"); resp.StatusCode == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 3 {
		t.Errorf("one key on 12 different paths: %d forwarded, want 3 (the limit)", forwarded)
	}
}

func TestCheckAPIIdempotencyBindsToFingerprint(t *testing.T) {
	rig := scStart(t, limiter.Options{}, idempotentPolicy("pay", 3))
	srv := httptest.NewServer(&sidecar.CheckHandler{Engine: rig.engine})
	t.Cleanup(srv.Close)
	allowed := 0
	for i := range 12 {
		body, _ := json.Marshal(sidecar.CheckRequest{Policy: "pay", Identity: "alice", RequestID: "same",
			Fingerprint: fmt.Sprintf("POST /path-%d", i)})
		resp, err := http.Post(srv.URL+sidecar.CheckPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("one request id with 12 fingerprints: %d allowed, want 3", allowed)
	}
}

func TestEnvoyIdempotencyBindsToDescriptor(t *testing.T) {
	pol := scPolicy("rls", 3, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: "edge", Descriptors: []v1alpha1.DescriptorMatch{{Key: "path"}}}}
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}}}
		s.Idempotency = &v1alpha1.Idempotency{DescriptorKey: "request_id", TTL: metav1.Duration{Duration: time.Minute}}
	})
	rig := scStart(t, limiter.Options{}, pol)
	srv := &sidecar.EnvoyServer{Engine: rig.engine}
	over := 0
	for i := range 12 {
		resp, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
				{Key: "path", Value: fmt.Sprintf("/p%d", i)}, {Key: "user", Value: "alice"}, {Key: "request_id", Value: "same"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	if over != 9 {
		t.Errorf("one request id on 12 different descriptors: %d over the limit, want 9 (3 admitted)", over)
	}
}
