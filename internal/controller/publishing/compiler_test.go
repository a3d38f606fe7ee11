package publishing

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

func compilerPolicy(gen int64, requests int64) *v1alpha1.RateLimitPolicy {
	p := policytest.New("ns", "p", policytest.Paths("/api/"), policytest.Requests(requests))
	p.UID, p.Generation = "u1", gen
	return p
}

// TestCompilerOncePerGeneration: a generation compiles once (the same entry comes back
// without recompiling), a new generation or a Forget compiles again, and the result is
// always Rules.Compile's.
func TestCompilerOncePerGeneration(t *testing.T) {
	c := &Compiler{}
	first, errs := c.Compile(compilerPolicy(1, 10))
	if len(errs) > 0 {
		t.Fatalf("build: %v", errs)
	}
	// Same generation, different spec: only a stale object could show this; the cached
	// compilation of the generation is returned (10, not 99), proving it was not compiled again.
	if again, _ := c.Compile(compilerPolicy(1, 99)); requestsOf(again) != 10 {
		t.Errorf("generation 1 compiled twice: %d requests", requestsOf(again))
	}
	next, _ := c.Compile(compilerPolicy(2, 20))
	want, _ := (policy.Rules{}).Compile(compilerPolicy(2, 20))
	if requestsOf(next) != requestsOf(want) || requestsOf(first) != 10 {
		t.Errorf("generation 2 not compiled: %+v, want %+v", next.Entry.Limits, want.Entry.Limits)
	}
	c.Compile(compilerPolicy(1, 10)) // a stale read: compiled, but does not evict generation 2
	if kept, _ := c.Compile(compilerPolicy(2, 99)); requestsOf(kept) != 20 {
		t.Errorf("a stale generation evicted the newer one: %d requests", requestsOf(kept))
	}
	c.Forget(types.NamespacedName{Namespace: "ns", Name: "p"})
	if after, _ := c.Compile(compilerPolicy(2, 99)); requestsOf(after) != 99 {
		t.Errorf("Forget kept the compilation: %d requests", requestsOf(after))
	}
}

// requestsOf is the first limit's requests of a compilation.
func requestsOf(c policy.Compiled) int64 { return c.Entry.Limits[0].Requests }
