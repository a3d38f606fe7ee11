package envtestwebhook

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/test/kubetest"
)

// The webhook names from config/webhook/manifests.yaml, as the API server quotes them.
const (
	validatingWebhook = "vratelimitpolicy-v1alpha1.ratelimit.dev"
	defaultState      = "{rl:${namespace}/${policy}:${identity}}:${limit}"
	defaultIdem       = "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}"
	otherTagIdem      = "{idem:${namespace}/${policy}:${identity}}:${requestId}"
)

// warningLog collects the API server's warnings (HTTP Warning headers, code 299).
type warningLog struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *warningLog) HandleWarningHeaderWithContext(_ context.Context, code int, _, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings seen since the last take.
func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// newClient returns a client whose warnings land in the returned log.
func newClient(t *testing.T, e *kubetest.Env) (client.Client, *warningLog) {
	t.Helper()
	w := &warningLog{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c, w
}

// basePolicy is valid and draws no warning: per API key, TokenBucket 10/s with bursts of 20
// (horizon 2s), on /api, with no key layout so the webhook defaults it.
func basePolicy(ns, name string) *policyv1alpha1.RateLimitPolicy {
	burst := int64(20)
	return &policyv1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.RateLimitPolicySpec{
			Match: policyv1alpha1.Match{HTTP: []policyv1alpha1.HTTPMatch{{PathPrefixes: []string{"/api"}}}},
			Identity: policyv1alpha1.Identity{Sources: []policyv1alpha1.IdentitySource{
				{Type: policyv1alpha1.IdentityHeader, Header: &policyv1alpha1.HeaderSource{Name: "X-API-Key"}},
			}},
			Algorithm: policyv1alpha1.AlgorithmTokenBucket,
			Limits: []policyv1alpha1.Limit{{Name: "per-second", Requests: 10,
				Period: metav1.Duration{Duration: time.Second}, Burst: &burst}},
		},
	}
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
		if c.Field == field && containsAll(c.Message, frags) && containsAll(msg, frags) {
			return
		}
	}
	t.Fatalf("no cause on %q containing %q; got %v", field, frags, err)
}

func containsAll(s string, frags []string) bool {
	for _, f := range frags {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

// assertWarning checks that one warning contains every fragment.
func assertWarning(t *testing.T, got []string, frags ...string) {
	t.Helper()
	for _, w := range got {
		if containsAll(w, frags) {
			return
		}
	}
	t.Errorf("no warning containing %q; got %q", frags, got)
}

// assertNotFound checks that the policy was not stored.
func assertNotFound(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &policyv1alpha1.RateLimitPolicy{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("policy %s/%s: want NotFound, got %v", ns, name, err)
	}
}
