package sidecar_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes every POST /v1/traces
// and keeps the spans with their resource's attributes.
type otlpReceiver struct {
	url  string
	mu   sync.Mutex
	got  []receivedSpan
	reqs int
}

// receivedSpan is one exported span and the attributes of the resource it came with.
type receivedSpan struct {
	span     *tracepb.Span
	resource map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve)) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reqs++
	for _, rs := range export.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = anyValue(kv.GetValue())
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.got = append(r.got, receivedSpan{span: s, resource: res})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spans is what was received so far, and the number of export requests.
func (r *otlpReceiver) spans() ([]receivedSpan, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.got...), r.reqs
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case nil:
		return ""
	default:
		return v.String()
	}
}

// The trace context and the secrets the tracing test's requests carry.
const (
	e2eTraceID  = "0af7651916cd43dd8448eb211c80319c"
	e2eParentID = "b7ad6b7169203331"
	e2eParent   = "00-" + e2eTraceID + "-" + e2eParentID + "-01"
	e2eIdentity = "alice-e2e-secret-key"
	e2eCheckID  = "carol-e2e-secret-key"
	e2eHeader   = "x-other-e2e-value"
)

// tracingEnv is the test's environment without any OTEL_* variable, plus extra.
func tracingEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// tracedSidecar runs the sidecar binary bin with env, proxying to an upstream that records
// the traceparent it receives, sends three requests through the proxy (two admitted, one
// denied) and one to the check API, then stops it with SIGTERM. It returns the traceparents
// the upstream saw.
func tracedSidecar(t *testing.T, bin string, env []string) []string {
	t.Helper()
	redis := redistest.StartServer(t)
	vol := &volume{t: t, dir: t.TempDir()}
	vol.publish(document(t, redis.Addr(), keyPolicy("orders", 2)))
	var mu sync.Mutex
	var parents []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		parents = append(parents, req.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = io.WriteString(w, "upstream")
	}))
	t.Cleanup(upstream.Close)
	proxyAddr, checkAddr, metrics := wait.FreeAddr(t), wait.FreeAddr(t), wait.FreeAddr(t)
	p := startSidecarEnv(t, bin, env, "--namespace", namespace, "--snapshot-file", vol.path(), "--upstream", upstream.URL,
		"--proxy-bind-address", proxyAddr, "--http-bind-address", checkAddr, "--grpc-bind-address", wait.FreeAddr(t),
		"--metrics-bind-address", metrics, "--drain-delay", "0s", "--shutdown-grace", "5s", "--redis-timeout", "2s",
		"--redis-addrs", redis.Addr())
	waitOK(t, p, "http://"+metrics+"/readyz")
	for i, want := range []int{200, 200, 429} {
		req, err := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/api/orders", nil)
		must(t, err)
		req.Header.Set("X-API-Key", e2eIdentity)
		req.Header.Set("X-Other", e2eHeader)
		req.Header.Set("traceparent", e2eParent)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	check, err := http.Post("http://"+checkAddr+"/v1/check", "application/json", //nolint:noctx // test
		strings.NewReader(`{"policy":"orders","identity":"`+e2eCheckID+`","requestId":"rid-e2e-1"}`))
	must(t, err)
	_ = check.Body.Close()
	if check.StatusCode != 200 {
		t.Fatalf("check API: %d", check.StatusCode)
	}
	if err := p.Stop(t, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), parents...)
}

// TestSidecarTracing runs the real binary twice. With OTEL_EXPORTER_OTLP_ENDPOINT naming a
// real OTLP/HTTP receiver on loopback, the spans arrive by the time the process has exited
// on SIGTERM (the shutdown flushes them), under OTEL_SERVICE_NAME, front → decide → EVALSHA
// in the caller's trace, and name no identity nor header; the upstream receives the caller's
// trace id. Without any OTEL_* variable nothing is exported and the caller's traceparent
// passes through untouched.
func TestSidecarTracing(t *testing.T) {
	bin := proc.MustBuild(t, "cmd/sidecar")

	t.Run("otlp", func(t *testing.T) {
		rcv := newOTLPReceiver(t)
		parents := tracedSidecar(t, bin, tracingEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.url,
			"OTEL_SERVICE_NAME=ratelimit-e2e", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=e2e",
			"OTEL_BSP_SCHEDULE_DELAY=600000")) // only the flush on SIGTERM can deliver in time
		if len(parents) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(parents))
		}
		for _, tp := range parents {
			if !strings.HasPrefix(tp, "00-"+e2eTraceID+"-") || tp == e2eParent {
				t.Errorf("upstream traceparent %q: want the caller's trace id with the proxy's span as parent", tp)
			}
		}
		checkExported(t, rcv)
	})

	t.Run("off", func(t *testing.T) {
		rcv := newOTLPReceiver(t)
		// the receiver's address is in the environment, but not in a variable that turns
		// tracing on
		parents := tracedSidecar(t, bin, tracingEnv("RECEIVER_URL="+rcv.url, "OTEL_SERVICE_NAME=ratelimit-e2e"))
		for _, tp := range parents {
			if tp != e2eParent {
				t.Errorf("upstream traceparent %q: tracing off must pass the caller's %q through", tp, e2eParent)
			}
		}
		time.Sleep(time.Second) // bounded: the process has exited; anything in flight would have arrived
		if spans, reqs := rcv.spans(); reqs != 0 || len(spans) != 0 {
			t.Errorf("tracing off: the receiver got %d export requests, %d spans", reqs, len(spans))
		}
	})
}

// checkExported checks what the receiver got from the "otlp" run: every span under
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, none holding a secret, the proxy's in the
// caller's trace, each decide span under a front span and each EVALSHA under a decide span.
func checkExported(t *testing.T, rcv *otlpReceiver) {
	t.Helper()
	spans, _ := rcv.spans()
	count := map[string]int{}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		count[s.span.GetName()]++
		byID[string(s.span.GetSpanId())] = s.span
		if s.resource["service.name"] != "ratelimit-e2e" || s.resource["deployment.environment"] != "e2e" {
			t.Errorf("span %s resource %v: want service.name ratelimit-e2e and the OTEL_RESOURCE_ATTRIBUTES", s.span.GetName(), s.resource)
		}
		checkSpanSecrets(t, s)
	}
	if count["ratelimit.proxy"] != 3 || count["ratelimit.check"] != 1 || count["ratelimit.decide"] != 4 || count["EVALSHA"] != 4 {
		t.Fatalf("spans received %v; want 3 ratelimit.proxy, 1 ratelimit.check, 4 ratelimit.decide, 4 EVALSHA", count)
	}
	checkLinks(t, spans, byID)
}

// checkLinks checks each span's place: proxy spans in the caller's trace under its span,
// decide spans under a front span, EVALSHA spans under a decide span.
func checkLinks(t *testing.T, spans []receivedSpan, byID map[string]*tracepb.Span) {
	t.Helper()
	for _, s := range spans {
		sp, parent := s.span, byID[string(s.span.GetParentSpanId())]
		switch sp.GetName() {
		case "ratelimit.proxy":
			if tid, pid := hexID(sp.GetTraceId()), hexID(sp.GetParentSpanId()); tid != e2eTraceID || pid != e2eParentID ||
				sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("proxy span trace %s parent %s kind %v: want the caller's trace and span, server", tid, pid, sp.GetKind())
			}
		case "ratelimit.decide":
			if name := parent.GetName(); name != "ratelimit.proxy" && name != "ratelimit.check" {
				t.Errorf("decide span's parent %q: want a front span", name)
			}
		case "EVALSHA":
			if parent.GetName() != "ratelimit.decide" || sp.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("EVALSHA span parent %q kind %v", parent.GetName(), sp.GetKind())
			}
		}
	}
}

// checkSpanSecrets fails when a span's name, attributes, events or status hold an identity,
// a request id or a header value.
func checkSpanSecrets(t *testing.T, s receivedSpan) {
	t.Helper()
	values := []string{s.span.GetName(), s.span.GetStatus().GetMessage(), s.span.GetTraceState()}
	for _, kv := range s.span.GetAttributes() {
		values = append(values, kv.GetKey()+"="+anyValue(kv.GetValue()))
	}
	for _, e := range s.span.GetEvents() {
		values = append(values, e.String())
	}
	for _, v := range s.resource {
		values = append(values, v)
	}
	for _, v := range values {
		for _, secret := range []string{e2eIdentity, e2eCheckID, e2eHeader, "rid-e2e-1"} {
			if strings.Contains(v, secret) {
				t.Errorf("span %s records %q, which holds %q", s.span.GetName(), v, secret)
			}
		}
	}
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
