package gateways_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestThroughRealProxies drives the forward-auth front through real Caddy and real nginx,
// each with its shipped recipe: a burst, the headers the client gets, two routes with two
// policies, what the upstream sees, a policy edit, and Redis going away.
func TestThroughRealProxies(t *testing.T) {
	sidecar := proc.MustBuild(t, "cmd/sidecar")
	for _, p := range []struct {
		name  string
		start func(*testing.T, *rig) string
		// down is the proxy's answer when the sidecar cannot be reached.
		down int
	}{{"caddy", startCaddy, http.StatusBadGateway}, {"nginx", startNginx, http.StatusInternalServerError}} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			r := startRig(t, sidecar)
			proxy := p.start(t, r)
			scenario(t, r, proxy)
			sidecarDown(t, r, proxy, p.down)
		})
	}
}

func scenario(t *testing.T, r *rig, proxy string) {
	burst(t, r, proxy)
	routes(t, proxy)
	forgedHeaders(t, r, proxy)
	policyEdit(t, r, proxy)
	redisDown(t, r, proxy)
}

// burst: 3 admitted with the RateLimit headers, then 429 with Retry-After; the upstream
// sees the 3 only.
func burst(t *testing.T, r *rig, proxy string) {
	t.Helper()
	for i := range 3 {
		a := do(t, proxy, http.MethodGet, host, "/api/items", "alice")
		if a.status != http.StatusOK || !strings.HasPrefix(a.body, "upstream GET /api/items") {
			t.Fatalf("GET %d: %v", i, a)
		}
		if want := fmt.Sprintf(`"reads/per-minute";r=%d;t=`, 2-i); !strings.Contains(a.header.Get("RateLimit"), want) ||
			!strings.Contains(a.header.Get("RateLimit-Policy"), `"reads/per-minute";q=3;w=60`) {
			t.Errorf("GET %d: RateLimit %q, RateLimit-Policy %q; want %s…", i, a.header.Get("RateLimit"), a.header.Get("RateLimit-Policy"), want)
		}
		if got := a.header.Values("RateLimit"); len(got) != 1 {
			t.Errorf("GET %d: RateLimit sent %d times (%q): the app's own must be replaced", i, len(got), got)
		}
	}
	before := r.hits.Load()
	for range 3 {
		a := do(t, proxy, http.MethodGet, host, "/api/items", "alice")
		if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" ||
			!strings.Contains(a.header.Get("RateLimit"), `"reads/per-minute";r=0;t=`) || a.header.Get("RateLimit-Policy") == "" {
			t.Fatalf("over the limit: %v, want 429 with Retry-After and the RateLimit headers", a)
		}
	}
	if n := r.hits.Load() - before; n != 0 {
		t.Errorf("the upstream saw %d denied requests", n)
	}

}

// routes: the original method, host and path decide. POST is the other policy (2 a
// minute); another host and a path outside /api are not limited, and carry no RateLimit
// header; "//API/items" is /api/items.
func routes(t *testing.T, proxy string) {
	t.Helper()
	for i, want := range []int{200, 200, 429} {
		if a := do(t, proxy, http.MethodPost, host, "/api/items", "alice"); a.status != want {
			t.Errorf("POST %d: %v, want %d", i, a, want)
		}
	}
	for _, c := range []struct{ host, path string }{{"other.example", "/api/items"}, {host, "/public"}, {host, "/apix"}} {
		for range 4 {
			if a := do(t, proxy, http.MethodGet, c.host, c.path, "alice"); a.status != http.StatusOK || a.header.Get("RateLimit") != "" {
				t.Fatalf("GET %s%s: %v, want 200 without RateLimit", c.host, c.path, a)
			}
		}
	}
	if a := do(t, proxy, http.MethodGet, host, "//API/items", "alice"); a.status != http.StatusTooManyRequests {
		t.Errorf("GET //API/items: %v, want 429 (the same limit as /api/items)", a)
	}
}

// forgedHeaders: a client's own RateLimit headers reach neither the app nor come back as
// the sidecar's.
func forgedHeaders(t *testing.T, r *rig, proxy string) {
	t.Helper()
	forged := []string{"RateLimit", `"reads/per-minute";r=999;t=1`, "RateLimit-Policy", "forged"}
	if a := do(t, proxy, http.MethodGet, host, "/public", "alice", forged...); a.status != http.StatusOK || a.header.Get("RateLimit") != "" ||
		r.seen.Load().Get("RateLimit") != "" || r.seen.Load().Get("RateLimit-Policy") != "" {
		t.Errorf("forged RateLimit headers on an unlimited path: client got %v, app saw %v", a, *r.seen.Load())
	}
	if a := do(t, proxy, http.MethodGet, host, "/api/fresh", "carol", forged...); a.status != http.StatusOK ||
		!strings.Contains(a.header.Get("RateLimit"), `"reads/per-minute";r=2;`) || strings.Contains(r.seen.Load().Get("RateLimit"), "999") {
		t.Errorf("forged RateLimit headers on a limited path: client got %v, app saw %v", a, *r.seen.Load())
	}
}

// policyEdit: a rewritten snapshot takes effect through the proxy: GET drops to 1 a minute.
func policyEdit(t *testing.T, r *rig, proxy string) {
	t.Helper()
	r.publish(t, policies(1)...)
	n := 0
	wait.Eventually(t, 15*time.Second, "the edited policy in force", func() error {
		n++
		key := fmt.Sprint("edit-", n)
		first, second := do(t, proxy, http.MethodGet, host, "/api/items", key), do(t, proxy, http.MethodGet, host, "/api/items", key)
		if first.status != http.StatusOK || second.status != http.StatusTooManyRequests {
			return fmt.Errorf("a new caller's two GETs: %d, %d", first.status, second.status)
		}
		return nil
	})
}

// redisDown: with redis-server killed, GET (FailOpen) is admitted and POST (FailClosed)
// refused with 429.
func redisDown(t *testing.T, r *rig, proxy string) {
	t.Helper()
	r.redis.Kill()
	before := r.hits.Load()
	for i := range 3 {
		if a := do(t, proxy, http.MethodGet, host, "/api/items", fmt.Sprint("down-", i)); a.status != http.StatusOK {
			t.Errorf("FailOpen with Redis down: %v", a)
		}
		if a := do(t, proxy, http.MethodPost, host, "/api/items", fmt.Sprint("down-", i)); a.status != http.StatusTooManyRequests {
			t.Errorf("FailClosed with Redis down: %v", a)
		}
	}
	if n := r.hits.Load() - before; n != 3 {
		t.Errorf("with Redis down the upstream saw %d requests, want the 3 FailOpen ones", n)
	}
}

// sidecarDown: with the sidecar stopped the proxy refuses every request (Caddy 502, nginx
// 500), limited or not, and the upstream sees none.
func sidecarDown(t *testing.T, r *rig, proxy string, want int) {
	t.Helper()
	r.stopSidecar()
	before := r.hits.Load()
	for _, path := range []string{"/api/items", "/public"} {
		if a := do(t, proxy, http.MethodGet, host, path, "alice"); a.status != want {
			t.Errorf("GET %s with the sidecar down: %v, want %d", path, a, want)
		}
	}
	if n := r.hits.Load() - before; n != 0 {
		t.Errorf("with the sidecar down the upstream saw %d requests", n)
	}
}
