package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/llmstub"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// tokenPolicy is a budget of tokens per year (a fixed window no test run crosses) on /api/<name>, per X-API-Key, FixedWindow,
// whose cost settles from the response's usage.total_tokens: reserve is cost.default and
// the most a request's X-Max-Tokens may reserve instead.
func tokenPolicy(name string, budget, reserve int64) *v1alpha1.RateLimitPolicy {
	return sidecartest.Policy(name, budget, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Algorithm = v1alpha1.AlgorithmFixedWindow
		s.Limits[0].Name, s.Limits[0].Period.Duration = "tokens", 8760*time.Hour // no run crosses a yearly window's end
		s.FailureMode = v1alpha1.FailureModeFailClosed
		s.Cost = &v1alpha1.Cost{Default: reserve, Header: "X-Max-Tokens", Max: &reserve,
			Settle: &v1alpha1.CostSettle{Field: "usage.total_tokens"}}
	})
}

// llmRig is the proxy in front of llmstub, and the check API on the same engine for peeks.
type llmRig struct {
	stub  *llmstub.Handler
	proxy string
	check http.Handler
}

func newLLMRig(t *testing.T, stub *llmstub.Handler, policies ...*v1alpha1.RateLimitPolicy) *llmRig {
	t.Helper()
	rig := sidecartest.Start(t, limiter.Options{}, policies...)
	upstream := httptest.NewServer(stub)
	t.Cleanup(upstream.Close)
	u, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(proxy.New(rig.Engine, u, logr.Discard()))
	t.Cleanup(front.Close)
	return &llmRig{stub: stub, proxy: front.URL, check: &httpcheck.Handler{Engine: rig.Engine}}
}

// call sends one call as identity through the proxy and reads its whole answer.
func (l *llmRig) call(t testing.TB, path, identity string, header ...string) (int, string) {
	t.Helper()
	resp, body := sidecartest.Send(t, http.MethodPost, l.proxy+path, append([]string{"X-API-Key", identity}, header...)...)
	return resp.StatusCode, body
}

// remaining is what policy's first limit holds for identity, by a peek of the check API.
func (l *llmRig) remaining(t *testing.T, policy, identity string) int64 {
	t.Helper()
	w := httptest.NewRecorder()
	l.check.ServeHTTP(w, httptest.NewRequest(http.MethodPost, httpcheck.Path,
		strings.NewReader(`{"policy":"`+policy+`","identity":"`+identity+`","peek":true}`)))
	var resp checkwire.Response
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Limits) == 0 {
		t.Fatalf("peek: %d %s (%v)", w.Code, w.Body, err)
	}
	return resp.Limits[0].Remaining
}

// TestProxySettlesTheResponsesCost: a budget of 1000 tokens, 100 reserved per call. A JSON
// answer of 30 tokens leaves 970; a streamed one of 60, passed through byte for byte,
// leaves 910; one of 500 (past its reservation) leaves 410; an answer without usage keeps
// its reservation (310); a call the budget cannot reserve for is refused and never reaches
// the stub.
func TestProxySettlesTheResponsesCost(t *testing.T) {
	l := newLLMRig(t, &llmstub.Handler{}, tokenPolicy("llm", 1000, 500))
	steps := []struct {
		what   string
		header []string
		want   int64
	}{
		{"a JSON answer of 30 tokens", []string{"X-Max-Tokens", "100", llmstub.TokensHeader, "20"}, 970},
		{"a streamed answer of 60", []string{"X-Max-Tokens", "100", llmstub.TokensHeader, "50", llmstub.StreamHeader, "true"}, 910},
		{"an answer of 500 on a reservation of 100", []string{"X-Max-Tokens", "100", llmstub.TokensHeader, "490"}, 410},
		{"an answer without usage", []string{"X-Max-Tokens", "100", llmstub.NoUsageHeader, "true"}, 310},
	}
	for _, s := range steps {
		if code, body := l.call(t, "/api/llm/v1/chat/completions", "alice", s.header...); code != http.StatusOK {
			t.Fatalf("%s: %d %s", s.what, code, body)
		}
		if got := l.remaining(t, "llm", "alice"); got != s.want {
			t.Fatalf("after %s: %d remaining, want %d", s.what, got, s.want)
		}
	}
	served := l.stub.Served.Load()
	if code, _ := l.call(t, "/api/llm/v1/chat/completions", "alice", "X-Max-Tokens", "400"); code != http.StatusTooManyRequests {
		t.Fatalf("a reservation of 400 with 310 left: %d, want 429", code)
	}
	if l.stub.Served.Load() != served || l.remaining(t, "llm", "alice") != 310 {
		t.Fatalf("the refused call reached the stub or took tokens")
	}
}

// TestProxyStreamsWhileItSettles: the proxy passes each event on as the upstream flushes
// it. The upstream sends its first event and waits for the client to have read it before
// sending the rest: a proxy that buffered the body would never deliver it.
func TestProxyStreamsWhileItSettles(t *testing.T) {
	read := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			return
		}
		_, _ = io.WriteString(w, "data: {\"usage\":{\"total_tokens\":7}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(upstream.Close)
	rig := sidecartest.Start(t, limiter.Options{}, tokenPolicy("llm", 1000, 500))
	u, _ := url.Parse(upstream.URL)
	front := httptest.NewServer(proxy.New(rig.Engine, u, logr.Discard()))
	t.Cleanup(front.Close)
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/api/llm/x", nil)
	req.Header.Set("X-API-Key", "bob")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	first := make(chan string, 1)
	br := bufio.NewReader(resp.Body)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not arrive while the upstream held the rest: the proxy buffers")
	}
	close(read)
	rest, _ := io.ReadAll(br)
	if !bytes.Contains(rest, []byte("[DONE]")) {
		t.Fatalf("the rest: %q", rest)
	}
	check := &llmRig{check: &httpcheck.Handler{Engine: rig.Engine}}
	if got := check.remaining(t, "llm", "bob"); got != 993 {
		t.Fatalf("after a streamed answer of 7: %d remaining, want 993", got)
	}
}

// budgetLoad has 64 callers at once send 3 streamed calls each through the proxy to path,
// each reserving 100 tokens and using 10 + 0 to 90 (prompt and completion); it returns the
// tokens the stub reported for the calls it answered.
func budgetLoad(t *testing.T, l *llmRig, path string) int64 {
	const callers, calls = 64, 3
	before := l.stub.Tokens.Load()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			<-start
			for range calls {
				l.call(t, path, "team", "X-Max-Tokens", "100", llmstub.StreamHeader, "true",
					llmstub.TokensHeader, strconv.Itoa(rng.IntN(91)))
			}
		}()
	}
	close(start)
	wg.Wait()
	return l.stub.Tokens.Load() - before
}

// TestProxyBudgetUnderConcurrency: a budget of 2000 tokens, 64 callers streaming at
// once, each call reserving its upper bound (100). Settled from the response, the tokens
// the upstream served never exceed the budget. Reported after the response instead (a
// policy reserving 1 and charging the rest at the end, as report-after gateways count) the
// same load, in the same run, overshoots: every call in flight was admitted on a count
// that did not include the others.
func TestProxyBudgetUnderConcurrency(t *testing.T) {
	const budget = 2000
	after := tokenPolicy("after", budget, 100)
	after.Spec.Cost.Default, after.Spec.Cost.Header = 1, ""
	l := newLLMRig(t, &llmstub.Handler{Delay: 20 * time.Millisecond}, tokenPolicy("llm", budget, 100), after)
	settled := budgetLoad(t, l, "/api/llm/v1/chat/completions")
	reported := budgetLoad(t, l, "/api/after/v1/chat/completions")
	t.Logf("budget %d tokens: reserve-then-settle served %d, report-after served %d (%+d)", budget, settled, reported, reported-budget)
	if settled > budget {
		t.Fatalf("reserve-then-settle: %d tokens served on a budget of %d", settled, budget)
	}
	if reported <= budget {
		t.Fatalf("report-after served %d within the budget of %d: the baseline did not measure the race", reported, budget)
	}
}
