package verdict_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// deniedMsg is the message of every denial log line.
const deniedMsg = "rate limit denied"

// jsonLogs collects what a logger writes, one JSON object per line.
type jsonLogs struct {
	mu    sync.Mutex
	lines []map[string]any
}

// logger is a logger at V(1) writing into l.
func (l *jsonLogs) logger(t *testing.T) logr.Logger {
	return funcr.NewJSON(func(obj string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Errorf("log line %s: %v", obj, err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, m)
	}, funcr.Options{Verbosity: 1})
}

// denials are the denial lines written so far.
func (l *jsonLogs) denials() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if m["msg"] == deniedMsg {
			out = append(out, m)
		}
	}
	return out
}

// denyingEngine is an engine without Redis whose one policy, "api", governs both /api on HTTP
// and route=api on Envoy domain edge, and fails closed: every request it governs is denied.
func denyingEngine(t *testing.T) *engine.Engine {
	p := sidecartest.Policy("api", 10, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.Envoy = &v1alpha1.EnvoyMatch{Domain: sidecartest.EnvoyDomain,
			Descriptors: []v1alpha1.DescriptorMatch{{Key: "route", Value: "api"}}}
		s.FailureMode = v1alpha1.FailureModeFailClosed
	})
	return &engine.Engine{Store: sidecartest.Store(t, p)}
}

// denyAt has the front named front deny one request, logging to log, and returns the status
// it answered (HTTP, or Envoy's code).
type denyAt func(t *testing.T, e *engine.Engine, log logr.Logger) int

var fronts = map[string]denyAt{
	envoyrls.FrontName: func(t *testing.T, e *engine.Engine, log logr.Logger) int {
		resp, err := (&envoyrls.Service{Engine: e, Log: log}).ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain: sidecartest.EnvoyDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
				{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "route", Value: "api"}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return int(resp.GetOverallCode())
	},
	extauthz.FrontName: func(t *testing.T, e *engine.Engine, log logr.Logger) int {
		resp, err := extauthz.New(e, log).Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Host: "shop.example", Path: "/api/api/x"}},
			Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 4321}}}}}}})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return int(resp.GetDeniedResponse().GetStatus().GetCode())
	},
	forwardauth.FrontName: func(_ *testing.T, e *engine.Engine, log logr.Logger) int {
		r := httptest.NewRequest(http.MethodGet, forwardauth.ForwardAuthPath, nil)
		r.RemoteAddr = "127.0.0.1:4321"
		r.Header.Set("X-Forwarded-Method", "GET")
		r.Header.Set("X-Forwarded-Uri", "/api/api/x")
		r.Header.Set("X-Forwarded-Host", "shop.example")
		r.Header.Set("X-Forwarded-For", "10.0.0.1")
		return serve(forwardauth.NewHandler(e, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, log), r)
	},
	httpcheck.FrontName: func(_ *testing.T, e *engine.Engine, log logr.Logger) int {
		r := httptest.NewRequest(http.MethodPost, httpcheck.Path, strings.NewReader(`{"policy":"api","identity":"alice"}`))
		return serve(&httpcheck.Handler{Engine: e, Log: log}, r)
	},
	proxy.FrontName: func(_ *testing.T, e *engine.Engine, log logr.Logger) int {
		upstream := &url.URL{Scheme: "http", Host: "127.0.0.1:1"} // never asked: the request is denied
		return serve(proxy.New(e, upstream, log), httptest.NewRequest(http.MethodGet, "http://shop.example/api/api/x", nil))
	},
}

func serve(h http.Handler, r *http.Request) int {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// TestEveryFrontLogsADenialOnce has each front deny one request and checks that each logs it
// once, with the same keys and values but for the front's name.
func TestEveryFrontLogsADenialOnce(t *testing.T) {
	var want map[string]any
	for _, name := range []string{envoyrls.FrontName, extauthz.FrontName, forwardauth.FrontName, httpcheck.FrontName, proxy.FrontName} {
		logs := &jsonLogs{}
		if code := fronts[name](t, denyingEngine(t), logs.logger(t)); code != http.StatusTooManyRequests &&
			code != int(rlsv3.RateLimitResponse_OVER_LIMIT) {
			t.Errorf("%s answered %d, want a denial", name, code)
		}
		lines := logs.denials()
		if len(lines) != 1 {
			t.Errorf("%s logged %d denials, want 1: %v", name, len(lines), lines)
			continue
		}
		got := maps.Clone(lines[0])
		if got["front"] != name {
			t.Errorf("%s logged front %v", name, got["front"])
		}
		delete(got, "front")
		if got["policy"] != "api" || got["result"] != "denied" || got["source"] != "FailClosed" {
			t.Errorf("%s logged %v, want policy api denied by FailClosed", name, got)
		}
		if want == nil {
			want = got
		} else if !maps.Equal(fmtMap(got), fmtMap(want)) {
			t.Errorf("%s logged %v, want the pairs every front logs: %v", name, got, want)
		}
	}
}

// fmtMap is m with its values as text, so that maps of JSON values compare.
func fmtMap(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	return out
}
