package adversarial

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Class: one identity source spending another source's quota. A policy limits API keys and
// falls back to the client address for callers without one. A caller that sends the
// victim's address as its "API key" must not be counted as that address: otherwise anyone
// can lock out every anonymous caller behind a NAT, or a Fixed fallback's shared bucket,
// by naming it.
func TestIdentitySourcesCannotImpersonateEachOther(t *testing.T) {
	keyOrIP := newPolicy("api", v1alpha1.AlgorithmGCRA, 3, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = append(s.Identity.Sources, v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP})
	})
	r := newRig(t, limiter.Options{}, keyOrIP)
	// The test's own client connects from 127.0.0.1: that is the anonymous caller's identity.
	if got := r.count(5, http.MethodGet, "/api", "X-API-Key", "127.0.0.1"); got != 3 {
		t.Fatalf("the attacker's own key: %d forwarded, want 3", got)
	}
	if got := r.count(1, http.MethodGet, "/api"); got != 1 {
		t.Errorf("the anonymous caller at 127.0.0.1 after an attacker used its address as an API key: %d of 1 forwarded, want 1", got)
	}
}

// Class: a request that runs another method's handler than the one it was sent with. Many
// frameworks run the DELETE handler for POST + X-HTTP-Method-Override: DELETE; a policy on
// DELETE must govern such a request too.
func TestMethodOverrideIsJudgedAsTheMethodRun(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("deletes", v1alpha1.AlgorithmGCRA, 2, time.Hour,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/items"}, Methods: []v1alpha1.HTTPMethod{"DELETE"}}}
		}))
	for _, h := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		if got := r.count(3, http.MethodPost, "/items/1", "X-API-Key", "mallory-"+h, h, "delete"); got != 2 {
			t.Errorf("POST with %s: delete: %d of 3 forwarded, want 2 (the DELETE policy's limit)", h, got)
		}
	}
	if got := r.send(http.MethodPost, "/items/1", "X-API-Key", "mallory", "X-HTTP-Method-Override", "DELETE",
		"X-HTTP-Method-Override", "GET"); got != http.StatusBadRequest {
		t.Errorf("two override values: %d, want 400", got)
	}
}

// Class: a Host spelled so that a host-scoped policy does not see it. Host names are
// case-insensitive and may carry a port or a trailing dot; every spelling the upstream
// serves as shop.example.com is judged by the policy for it.
func TestHostSpellingsCannotWalkAroundALimit(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("shop", v1alpha1.AlgorithmGCRA, 2, time.Hour,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"shop.example.com"}}}
		}))
	forwarded := 0
	for _, host := range []string{"shop.example.com", "SHOP.Example.COM", "shop.example.com.", "shop.example.com:8443", "Shop.Example.Com.:80"} {
		if r.send(http.MethodGet, "/", "Host", host, "X-API-Key", "mallory") == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 2 {
		t.Errorf("5 spellings of shop.example.com: %d forwarded, want 2 (the limit)", forwarded)
	}
}

// Class: escaping a limit by presenting no identity. onMissing Skip admits such requests
// uncounted, which is what it is for, so the webhook warns; Shared and Reject count or
// refuse them. Checked here: a client dropping its header gets nothing past Reject, and is
// counted against one shared budget under Shared.
func TestNoIdentityIsNoEscape(t *testing.T) {
	shared := newPolicy("shared", v1alpha1.AlgorithmGCRA, 2, time.Hour, onPaths("/shared"),
		func(s *v1alpha1.RateLimitPolicySpec) { s.Identity.OnMissing = v1alpha1.MissingIdentityShared })
	r := newRig(t, limiter.Options{}, newPolicy("reject", v1alpha1.AlgorithmGCRA, 2, time.Hour, onPaths("/reject")), shared)
	if got := r.count(3, http.MethodGet, "/reject"); got != 0 {
		t.Errorf("Reject: %d requests without identity forwarded, want 0", got)
	}
	if got := r.count(5, http.MethodGet, "/shared"); got != 2 {
		t.Errorf("Shared: %d of 5 requests without identity forwarded, want 2 (one shared budget)", got)
	}
}
