package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// The webhook names from config/webhook/manifests.yaml, as the API server quotes them.
const (
	validatingWebhook = "vratelimitpolicy-v1alpha1.ratelimit.dev"
	defaultState      = "{rl:${namespace}/${policy}:${identity}}:${limit}"
	defaultIdem       = "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}"
	otherTagIdem      = "{idem:${namespace}/${policy}:${identity}}:${requestId}"
)

// basePolicy is valid and draws no warning: per API key, TokenBucket 10/s with bursts of 20
// (horizon 2s), on /api, with no key layout so the webhook defaults it.
func basePolicy(ns, name string) *policyv1alpha1.RateLimitPolicy {
	return policytest.New(ns, name, policytest.Burst(20))
}

// createStored creates p through c and returns it as the API server stored it (defaulted by
// the webhook).
func createStored(t *testing.T, c client.Client, p *policyv1alpha1.RateLimitPolicy) *policyv1alpha1.RateLimitPolicy {
	t.Helper()
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatalf("create %s: %v", p.Name, err)
	}
	var stored policyv1alpha1.RateLimitPolicy
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &stored); err != nil {
		t.Fatalf("get %s: %v", p.Name, err)
	}
	return &stored
}

// assertCause checks that err is the validating webhook's Invalid answer with a cause on
// field whose message holds every fragment, and that the message the client shows names the
// webhook and the field.
func assertCause(t *testing.T, err error, field string, frags ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want the webhook to refuse it on %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `admission webhook "`+validatingWebhook+`" denied the request`) || !strings.Contains(msg, field) {
		t.Errorf("message does not name the webhook and %s: %s", field, msg)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("error carries no details: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && kube.ContainsAll(c.Message, frags) && kube.ContainsAll(msg, frags) {
			return
		}
	}
	t.Fatalf("no cause on %q containing %q; got %v", field, frags, err)
}

// assertNotFound checks that the policy was not stored.
func assertNotFound(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &policyv1alpha1.RateLimitPolicy{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("policy %s/%s: want NotFound, got %v", ns, name, err)
	}
}
