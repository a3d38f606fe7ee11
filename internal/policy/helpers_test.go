package policy_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// Namespace and name of the base policy; the slot numbers in the tests depend on them.
const (
	baseNamespace = "shop"
	baseName      = "api-per-key"
)

// base is a valid, warning-free policy: per API key, 10 requests per second with bursts up
// to 20 (TokenBucket, horizon 2s), FailOpen on /api. Every case changes one thing in it.
func base() *v1alpha1.RateLimitPolicy {
	return policytest.New(baseNamespace, baseName, policytest.TypeMeta, policytest.Methods("GET"),
		policytest.Sources(policytest.Header("X-API-Key"), v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP}),
		policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.Burst(20),
		policytest.FailureMode(v1alpha1.FailureModeFailOpen))
}

// limit builds a limit; burst 0 leaves it unset.
func limit(name string, requests int64, period time.Duration, burst int64) v1alpha1.Limit {
	l := v1alpha1.Limit{Name: name, Requests: requests, Period: metav1.Duration{Duration: period}}
	if burst > 0 {
		l.Burst = &burst
	}
	return l
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// layout sets the key layout; empty strings and a zero ttl leave those fields unset.
func layout(p *v1alpha1.RateLimitPolicy, state, idem string, ttl time.Duration) {
	p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: state, Idempotency: idem}
	if ttl > 0 {
		p.Spec.KeyLayout.TTL = dur(ttl)
	}
}

// idempotent turns idempotency on with a 10m request-id TTL.
func idempotent(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: 10 * time.Minute}}
}

// assertErrors checks that errs holds an error on exactly field whose message contains every
// fragment of msgs, and that every other error is on one of also.
func assertErrors(t *testing.T, errs field.ErrorList, fieldPath string, msgs []string, also ...string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("accepted; want an error on %s containing %q", fieldPath, msgs)
	}
	allowed := map[string]bool{fieldPath: true}
	for _, a := range also {
		allowed[a] = true
	}
	found := false
	for _, e := range errs {
		if !allowed[e.Field] {
			t.Errorf("unexpected error on %s: %v", e.Field, e)
		}
		if e.Field == fieldPath && containsAll(e.Error(), msgs) {
			found = true
		}
	}
	if !found {
		t.Errorf("no error on %s containing all of %q; got:\n%s", fieldPath, msgs, list(errs))
	}
}

func containsAll(s string, frags []string) bool {
	for _, f := range frags {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

func list(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	return b.String()
}

// repoRoot is the repository's top directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// accepted are the policies Build must accept: the base with each of acceptCases, by case
// name, and every sample, by file.
func accepted(t *testing.T) map[string]*v1alpha1.RateLimitPolicy {
	t.Helper()
	out := samples(t)
	for _, tc := range acceptCases {
		p := base()
		tc.mutate(p)
		out[tc.name] = p
	}
	return out
}

// samples reads every RateLimitPolicy under config/samples into the typed object, as the
// API server would hand it to the webhook (without the CRD's schema defaults).
func samples(t *testing.T) map[string]*v1alpha1.RateLimitPolicy {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot(), "config", "samples", "policy_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples under config/samples (err %v)", err)
	}
	out := map[string]*v1alpha1.RateLimitPolicy{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		var p v1alpha1.RateLimitPolicy
		if err := yaml.UnmarshalStrict(raw, &p); err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if p.Kind != "RateLimitPolicy" || p.Name == "" {
			t.Fatalf("%s is not a named RateLimitPolicy", path)
		}
		p.Namespace = "samples"
		out[filepath.Base(path)] = &p
	}
	return out
}
