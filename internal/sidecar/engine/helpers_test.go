package engine_test

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// mustPath is the normalized path of target.
func mustPath(t testing.TB, target string) httppath.Path {
	t.Helper()
	p, err := httppath.ParseTarget("GET", target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// names are the policy names of rules.
func names(rules []*engine.Rule) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, r.Name())
	}
	return out
}
