package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/rls"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestRunSmall runs the whole command with tiny numbers against a real redis-server, with
// each load client, so that it keeps working between the times someone runs it for figures.
func TestRunSmall(t *testing.T) {
	t.Setenv(redistest.ServerBinEnv, redistest.RequireRedis(t)) // the binary the harness found
	missing.Tool(t, "redis-benchmark", "it comes with redis-tools (`make redis`)")
	for _, client := range []rls.Client{rls.Lean, rls.GRPCGo} {
		t.Run(string(client), func(t *testing.T) {
			c := config{callers: 4, identities: 20, duration: 300 * time.Millisecond, conns: 2, client: string(client), workers: 4,
				rows: "off,on", hot: true, hotDuration: 200 * time.Millisecond, benchCalls: 2000}
			rep, err := run(context.Background(), c)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			checkRows(t, rep)
			checkHot(t, rep.hot)
			var out bytes.Buffer
			printReport(&out, c, rep)
			for _, want := range []string{"| pipelining off |", "| pipelining on |", "| one identity over its limit", "of the " + string(client) + " client"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// checkRows wants a ceiling and two rows whose every call Redis admitted.
func checkRows(t *testing.T, rep *report) {
	t.Helper()
	if rep.ceiling.PerSec <= 0 || rep.ceiling.CPUCall <= 0 || rep.ceiling.UsecCall <= 0 {
		t.Errorf("ceiling %+v, want positive figures", rep.ceiling)
	}
	if len(rep.rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.rows))
	}
	for _, r := range rep.rows {
		if r.Calls == 0 || r.Admitted != r.Calls || r.Fallbacks != 0 || r.P99 < r.P50 {
			t.Errorf("%s: %+v, want every call admitted by Redis", r.name, r.Stats)
		}
		if r.CPU <= 0 || r.RedisCPU < 0 || r.Allocs == 0 {
			t.Errorf("%s: CPU %v, Redis CPU %v, %d B allocated per decision; want positive figures", r.name, r.CPU, r.RedisCPU, r.Allocs)
		}
	}
}

// checkHot wants every hot call denied without asking Redis.
func checkHot(t *testing.T, h *hotResult) {
	t.Helper()
	if h == nil || h.Calls == 0 || h.Denied != h.Calls {
		t.Fatalf("hot phase %+v, want every call denied", h)
	}
	if h.evalsha != 0 {
		t.Errorf("hot identity cost Redis %d EVALSHA calls within its retry-after, want 0 (deny cache)", h.evalsha)
	}
	if h.retryAfter < 11*time.Second || h.retryAfter > 12*time.Second {
		t.Errorf("hot retry-after %v, want about 12s", h.retryAfter)
	}
}

func TestParseRows(t *testing.T) {
	got, err := parseRows("off, on")
	if err != nil || len(got) != 2 || got[0] || !got[1] {
		t.Errorf(`parseRows("off, on") = %v, %v; want [false true]`, got, err)
	}
	if _, err := parseRows("sideways"); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("parseRows(sideways): %v, want an error naming it", err)
	}
}
