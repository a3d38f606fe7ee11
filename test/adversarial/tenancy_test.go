package adversarial

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// Class: a tenant naming another tenant's keys (issue 14). A policy in namespace attacker
// with state "{rl:victim/payments:${identity}}:${limit}" was admitted without a warning: its
// keys were exactly victim's default keys, so one check at 1 per 8760h locked victim's
// callers out for a year, and "app:session:${identity}" overwrote an application's own keys.
// Every key template must now begin with "{rl:${namespace}/": the webhook and controller
// refuse the policy, and a sidecar refuses such an entry in a hand-edited snapshot.
func TestTenantCannotNameAnotherNamespacesKeys(t *testing.T) {
	for _, state := range []string{"{rl:victim/payments:${identity}}:${limit}", "app:session:${identity}", "{rl:global}:${limit}"} {
		p := newPolicy("payments", v1alpha1.AlgorithmFixedWindow, 1, 8760*time.Hour,
			func(s *v1alpha1.RateLimitPolicySpec) { s.KeyLayout = &v1alpha1.KeyLayout{State: state} })
		p.Namespace = "attacker"
		(policy.Rules{}).Default(p)
		_, errs := (policy.Rules{}).CompileAsIs(p)
		if msg := fmt.Sprint(errs.ToAggregate()); !strings.Contains(msg, `spec.keyLayout.state`) ||
			!strings.Contains(msg, `must begin with "{rl:${namespace}/"`) {
			t.Errorf("%s: got %q; want refused on spec.keyLayout.state with the required prefix", state, msg)
		}
	}
	// A snapshot forged for the attacker's sidecar, naming victim's keys.
	s := snapshottest.Build(t, "attacker", "127.0.0.1:6379", newPolicy("payments", v1alpha1.AlgorithmFixedWindow, 1, 8760*time.Hour))
	s.Policies[0].StateKey = "{rl:victim/payments:${identity}}:${limit}"
	store := &engine.Store{Namespace: "attacker"}
	if err := store.Load(sidecartest.Reseal(t, s), "forged"); err != nil {
		t.Fatal(err)
	}
	if set := store.Current(); set.Rule("payments") != nil || set.Refused() != 1 {
		t.Fatalf("the attacker's sidecar loaded an entry naming victim's keys")
	}
}
