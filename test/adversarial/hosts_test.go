package adversarial

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/rawhttp"
)

// Class: a Host that gateways and upstreams read differently (issue 25, item 6). The limiter
// lower-cased it and dropped the port and one trailing dot, and matched what was left: a
// host-scoped policy did not see "shop.example.com..", "shop.example.com:443:443" or a
// percent-encoded spelling, which Go's server, Caddy and the sidecar's own proxy forward as
// written and an upstream that trims or decodes serves as shop.example.com. Such a host is
// refused 400 before any policy is matched, and the upstream never sees it.
func TestHostsUpstreamsReadDifferentlyAreRefused(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("shop", v1alpha1.AlgorithmGCRA, 1, time.Hour,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"shop.example.com"}}}
		}))
	for _, host := range []string{"shop.example.com..", ".shop.example.com", "shop..example.com", "shop.example.com:443:443",
		"shop.example.com:https", "shop%2eexample.com", "shop.example.co%6d", "shop.example.com,other.example", "*.example.com"} {
		if a := rawhttp.Send(t, r.proxyAddr(), "GET / HTTP/1.1", "Host: "+host, "X-API-Key: mallory"); a.Status != http.StatusBadRequest {
			t.Errorf("Host %q: %v, want 400", host, a)
		}
	}
	if n := r.upstream.hits.Load(); n != 0 {
		t.Errorf("the upstream was sent %d of the refused hosts", n)
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if a := rawhttp.Send(t, r.proxyAddr(), "GET / HTTP/1.1", "Host: Shop.Example.Com.:8443", "X-API-Key: mallory"); a.Status != want {
			t.Errorf("request %d to a spelling of shop.example.com afterwards: %v, want %d (nothing was debited before)", i, a, want)
		}
	}
}
