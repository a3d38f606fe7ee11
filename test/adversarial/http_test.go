package adversarial

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/rawhttp"
)

// Class: a path spelled so the limiter and the upstream disagree about which resource it
// names (issue 13, item 1). A FailClosed policy on /login held for /login only; /./login,
// //login and /x/../login went to the upstream, which served /login.
func TestPathSpellingsCannotWalkAroundALimit(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("login", v1alpha1.AlgorithmGCRA, 2, time.Hour, onPaths("/login")))
	spellings := []string{"/login", "/./login", "//login", "/x/../login", "/%6Cogin", "/LOGIN", "/login;jsessionid=1",
		"/x/..;/login", "/%2e%2e/login", "/login/", "/login/."}
	forwarded := 0
	for _, p := range spellings {
		if r.rawGet(t, p, "X-API-Key: mallory") == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 2 {
		t.Errorf("%d spellings of /login forwarded to a 2-per-hour limit, want 2", forwarded)
	}
	before := r.upstream.hits.Load()
	for _, p := range []string{"/%2Flogin", "/login%2F..", "/%5Clogin", "/login%00"} {
		if got := r.rawGet(t, p, "X-API-Key: eve"); got != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400 (upstreams disagree on what it names)", p, got)
		}
	}
	if n := r.upstream.hits.Load() - before; n != 0 {
		t.Errorf("the upstream received %d of the refused paths", n)
	}
	if last := r.upstream.last.Load(); last == nil || last.URL.EscapedPath() != "/login" {
		t.Errorf("the upstream was sent %v, want exactly the path checked, /login", last.URL)
	}
}

// rawGet sends a request line as written (Go's client would clean the path) and returns the
// status.
func (r *rig) rawGet(t *testing.T, target string, headers ...string) int {
	t.Helper()
	return rawhttp.Send(t, r.proxyAddr(), append([]string{"GET " + target + " HTTP/1.1", "Host: shop.example"}, headers...)...).Status
}

// proxyAddr is the proxy's host:port.
func (r *rig) proxyAddr() string { return strings.TrimPrefix(r.proxy.URL, "http://") }

// Class: headers the limiter and the upstream read differently (issue 13, item 9). An
// identity header sent twice was judged by its first value while an upstream may read the
// last; a lower-case "bearer" scheme yielded no identity, so onMissing decided.
func TestAmbiguousHeadersAreRefused(t *testing.T) {
	jwtID := newPolicy("jwt", v1alpha1.AlgorithmGCRA, 2, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity = v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityJWTClaim,
			JWTClaim: &v1alpha1.JWTClaimSource{Claim: "sub"}}}, OnMissing: v1alpha1.MissingIdentitySkip}
	}, onPaths("/jwt"))
	r := newRig(t, limiter.Options{}, newPolicy("key", v1alpha1.AlgorithmGCRA, 2, time.Hour, onPaths("/key")), jwtID)
	if got := r.send(http.MethodGet, "/key", "X-API-Key", "victim", "X-API-Key", "mallory"); got != http.StatusBadRequest {
		t.Errorf("an identity header sent twice: %d, want 400", got)
	}
	token := "bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJtYWxsb3J5In0.sig" // {"sub":"mallory"}, lower-case scheme
	if got := r.count(5, http.MethodGet, "/jwt", "Authorization", token); got != 2 {
		t.Errorf("a lower-case bearer token: %d of 5 forwarded, want 2 (counted, not skipped as anonymous)", got)
	}
}

// Class: a client holding sidecar connections or memory with requests it never finishes
// (issue 13, item 9: the listeners set only a header timeout). A header block over the limit
// is refused with 431, and clients that trickle their headers or never send the body they
// announced are cut off at the read timeouts, while a well-behaved client is still served.
func TestSlowAndOversizedClientsAreCutOff(t *testing.T) {
	limits := httpserver.DefaultLimits()
	limits.ReadHeaderTimeout, limits.ReadTimeout = 500*time.Millisecond, 500*time.Millisecond
	r := newRigWith(t, limiter.Options{}, limits, newPolicy("key", v1alpha1.AlgorithmGCRA, 100, time.Hour))
	if got := r.rawGet(t, "/", "X-API-Key: a", "X-Pad: "+strings.Repeat("p", 80<<10)); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("an 80 KiB header block: %d, want 431", got)
	}
	for name, partial := range map[string]string{
		"headers never finished": "GET / HTTP/1.1\r\nHost: x\r\nX-API-Key: a\r\n",
		"body never sent":        "POST / HTTP/1.1\r\nHost: x\r\nX-API-Key: a\r\nContent-Length: 1000\r\n\r\nabc",
	} {
		start := time.Now()
		if closed := r.heldOpen(t, partial, 10*time.Second); !closed {
			t.Errorf("%s: the connection was still open after 10s; want it cut at the 500ms read timeouts", name)
		} else if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: cut after %s, want about 500ms", name, took)
		}
	}
	if got := r.send(http.MethodGet, "/", "X-API-Key", "a"); got != http.StatusOK {
		t.Errorf("a normal request afterwards: %d, want 200", got)
	}
}

// heldOpen writes partial to a new connection to the proxy and reports whether the server
// closed it (after perhaps answering) within wait.
func (r *rig) heldOpen(t *testing.T, partial string, wait time.Duration) (closed bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", r.proxyAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprint(conn, partial); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			var ne net.Error
			return !errors.As(err, &ne) || !ne.Timeout()
		}
	}
}

// Class: the address chain handed to the upstream (issue 13, item 9). The proxy replaced
// X-Forwarded-For although the docs said it appended; an upstream counting hops from the
// right needs the inbound chain with the sidecar's peer appended. A chain shorter than the
// policy's trustedProxies was not written by all of them, so its leftmost entry (the
// caller's own writing) must not be the identity.
func TestForwardedForIsAppendedAndShortChainsNotTrusted(t *testing.T) {
	viaTwo := newPolicy("ip", v1alpha1.AlgorithmGCRA, 2, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityClientIP,
			ClientIP: &v1alpha1.ClientIPSource{TrustedProxies: 2}}}
	})
	r := newRig(t, limiter.Options{}, viaTwo)
	if got := r.send(http.MethodGet, "/", "X-Forwarded-For", "6.6.6.6"); got != http.StatusOK {
		t.Fatalf("first request: %d", got)
	}
	if xff := r.upstream.last.Load().Header.Get("X-Forwarded-For"); xff != "6.6.6.6, 127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q, want the inbound chain with the peer appended", xff)
	}
	// A caller forging a fresh one-hop chain each time is still the peer 127.0.0.1.
	forwarded := 1
	for i := range 4 {
		if r.send(http.MethodGet, "/", "X-Forwarded-For", fmt.Sprintf("10.9.9.%d", i)) == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 2 {
		t.Errorf("5 requests with forged one-hop chains: %d forwarded, want 2 (all counted as the peer)", forwarded)
	}
}

// Class: headers the limiter reads but the upstream never receives. A header the Connection
// header names is hop-by-hop: Go's proxy drops it. Read by the limiter, it let a client pick
// a fresh identity per request, or replay one Idempotency-Key ("nothing debited") for
// requests the upstream never saw as retries.
func TestHopByHopHeadersDoNotCount(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("pay", v1alpha1.AlgorithmGCRA, 2, time.Hour, idempotent,
		func(s *v1alpha1.RateLimitPolicySpec) { s.Identity.OnMissing = v1alpha1.MissingIdentityShared }))
	forwarded := 0
	for i := range 5 {
		if r.send(http.MethodPost, "/pay", "Connection", "X-API-Key, Idempotency-Key",
			"X-API-Key", fmt.Sprintf("fresh-%d", i), "Idempotency-Key", "same") == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 2 {
		t.Errorf("fresh hop-by-hop identities with one hop-by-hop id: %d of 5 forwarded, want 2 (one shared budget)", forwarded)
	}
}

// Class: a method the upstream serves with another method's handler. Servers answer HEAD by
// running the GET handler, so a GET policy must govern HEAD too.
func TestHeadIsJudgedAsGet(t *testing.T) {
	r := newRig(t, limiter.Options{}, newPolicy("report", v1alpha1.AlgorithmGCRA, 2, time.Hour,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/report"}, Methods: []v1alpha1.HTTPMethod{"GET"}}}
		}))
	if got := r.count(4, http.MethodHead, "/report", "X-API-Key", "mallory"); got != 2 {
		t.Errorf("HEAD on a GET policy: %d of 4 forwarded, want 2", got)
	}
}
