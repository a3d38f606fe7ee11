// Package demo runs `make demo`'s program end to end, so the main job cannot rot: a real
// control plane, redis-server, manager, sidecar and kubectl.
package demo

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// TestDemo runs the demo and checks it went through every step and exited 0.
func TestDemo(t *testing.T) {
	kubectl := manifests.Kubectl(t)
	if _, err := kube.AssetsDir(); err != nil {
		kube.Require(t, nil, err)
	}
	missing.Tool(t, "caddy", "run the tests with `make test` (hack/proxies.sh installs it)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/demo", "--kubectl", kubectl, "--namespace", "demo-test")
	cmd.Dir = kube.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"policies applied with kubectl, all Ready",
		"burst: 200 ×5 then 429",
		"plans: one policy, the default tier admitted 5 and the pro tier 10 of 12",
		"override: vip-val raised to the pro tier by a RateLimitOverride, 10 of 12 admitted",
		"calendar quota: 3 of 5 admitted, Retry-After is the time to the 1st of next month in Berlin",
		"usage: a support ServiceAccount with get on ratelimitpolicies/usage read quota-quinn's 3 of 3 used with kubectl ratelimit usage",
		"usage: a client-certificate user read the same through the API server, with no --server, CA file or token",
		"grant: kubectl ratelimit grant gave quota-quinn 2 more this month, admitted exactly twice, recorded as an Event",
		"sidecar injection: the example app's pod (label ratelimit.dev/inject=enabled, annotation ratelimit.dev/upstream-port) got the sidecar as a native sidecar proxying to its port",
		"LLM budget: tokens settled from streamed answers (120, 270, 360 used, then the 700-token overrun charged past 1000), the next call refused",
		"LLM concurrency: 2 in flight per key, the 3rd call at once refused, admitted again once they ended",
		"gateway: the same policy through real Caddy with forward auth, 200 ×5 then 429",
		"gateway API: policy attached to HTTPRoute shop, through ext_authz 200 ×3 then 429 on its host, 200 on another",
		"bad policy refused by the admission webhook",
		"cross-namespace policy refused",
		"tenancy: demo-test and demo-test-b have their own Redis users",
		"policy edit enforced by the sidecar",
		"Redis down: FailOpen admitted, FailClosed refused",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
