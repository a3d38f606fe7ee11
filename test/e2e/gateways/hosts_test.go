package gateways_test

import (
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/rawhttp"
)

// spelling is one way a client may name the limited site, or the app behind it: a request
// line and its Host field lines (none, one or several), as written on the wire.
type spelling struct {
	line  string
	hosts []string
}

// hostSpellings name shop.example (GET /api/items, the "reads" policy's route) every way a
// client might hope the gateway routes to the app while the limiter sees another host, plus
// hosts the gateway does not serve. other.example, which the gateways serve and no policy
// names, is left out: it is not a spelling of shop.example.
var hostSpellings = []spelling{
	{"GET /api/items HTTP/1.1", []string{"SHOP.Example"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example."}},
	{"GET /api/items HTTP/1.1", []string{"shop.example.."}},
	{"GET /api/items HTTP/1.1", []string{"shop.example:8000"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example.:80"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example:80:80"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example:abc"}},
	{"GET /api/items HTTP/1.1", []string{".shop.example"}},
	{"GET /api/items HTTP/1.1", []string{"shop%2eexample"}},
	{"GET /api/items HTTP/1.1", []string{"shop.exampl%65"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example,other.example"}},
	{"GET /api/items HTTP/1.1", []string{"shop.example\t"}},
	{"GET /api/items HTTP/1.1", []string{"*.example"}},
	{"GET /api/items HTTP/1.1", []string{"127.0.0.1"}},
	{"GET /api/items HTTP/1.1", []string{"127.0.0.1:80"}},
	{"GET /api/items HTTP/1.1", []string{"[::1]"}},
	{"GET /api/items HTTP/1.1", []string{"[::1]:80"}},
	{"GET /api/items HTTP/1.1", []string{"evil.example"}},
	{"GET /api/items HTTP/1.1", []string{"xn--shop-9ra.example"}},
	{"GET /api/items HTTP/1.1", []string{""}},
	{"GET /api/items HTTP/1.0", nil},
	{"GET /api/items HTTP/1.1", []string{"shop.example", "evil.example"}},
	{"GET /api/items HTTP/1.1", []string{"evil.example", "shop.example"}},
	{"GET http://shop.example/api/items HTTP/1.1", []string{"evil.example"}},
	{"GET http://SHOP.EXAMPLE.:80/api/items HTTP/1.1", []string{"evil.example"}},
	{"GET http://evil.example/api/items HTTP/1.1", []string{"shop.example"}},
	{"GET http://127.0.0.1/api/items HTTP/1.1", []string{"shop.example"}},
}

// TestHostSpellingsThroughRealProxies: behind real Caddy and real nginx running the shipped
// configs, no spelling of the limited host, and no host the proxy does not serve, reaches
// the app without the limit counting it (issue 25). Each request is counted by the "reads"
// policy (3 a minute for this caller, RateLimit headers on the answer), or refused before
// the app sees it (421 for a host not served, 400 for one nobody can read alike).
func TestHostSpellingsThroughRealProxies(t *testing.T) {
	sidecar := proc.MustBuild(t, "cmd/sidecar")
	for _, p := range []struct {
		name  string
		start func(*testing.T, *rig) string
	}{{"caddy", startCaddy}, {"nginx", startNginx}} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			r := startRig(t, sidecar)
			walkAround(t, r, p.start(t, r))
		})
	}
}

// walkAround sends every host spelling as one caller and fails on each the app served
// without the limit counting it; at most the limit's 3 may reach the app.
func walkAround(t *testing.T, r *rig, proxy string) {
	t.Helper()
	before := r.hits.Load()
	for _, s := range hostSpellings {
		hits := r.hits.Load()
		a := sendRaw(t, proxy, s, "X-API-Key: mallory")
		t.Logf("%q Host %q: %d, reached the app: %t, RateLimit %q", s.line, s.hosts, a.Status, r.hits.Load() > hits, a.Header.Get("RateLimit"))
		if r.hits.Load() > hits && !strings.Contains(a.Header.Get("RateLimit"), `"reads/per-minute"`) {
			t.Errorf("%q with Host %q: the app served it without the limit counting it (%v)", s.line, s.hosts, a)
		}
		if r.hits.Load() > hits && strings.Contains(*r.seenHost.Load(), "evil") {
			t.Errorf("%q with Host %q: the app was sent Host %q, a host the proxy does not serve", s.line, s.hosts, *r.seenHost.Load())
		}
	}
	if n := r.hits.Load() - before; n > 3 {
		t.Errorf("%d spellings of shop.example reached the app, want at most the limit, 3", n)
	}
}

// sendRaw sends s's request line and Host fields as they are (Go's client would refuse or
// rewrite most of them), then the extra header lines, to proxy.
func sendRaw(t *testing.T, proxy string, s spelling, extra ...string) rawhttp.Answer {
	t.Helper()
	lines := []string{s.line}
	for _, h := range s.hosts {
		lines = append(lines, "Host: "+h)
	}
	return rawhttp.Send(t, proxy, append(lines, extra...)...)
}
