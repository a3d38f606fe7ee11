package responsecost_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// serve starts an upstream answering with h, and returns a GET of it, its body unread.
func serve(t *testing.T, h http.HandlerFunc) *http.Response {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestTrailerCost: a trailer is read once the body ends, and decides over the body; a
// trailer announced but not sent leaves it to the body.
func TestTrailerCost(t *testing.T) {
	for _, tc := range []struct {
		name, trailer string
		cost          int64
		found         bool
	}{
		{"trailer", "42", 42, true},
		{"invalid trailer", "42 tokens", 0, false},
		{"announced, not sent", "", 21, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := usageJSON("21")
			resp := serve(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", jsonType)
				w.Header().Set("Trailer", "X-Tokens")
				_, _ = io.WriteString(w, body)
				if tc.trailer != "" {
					w.Header().Set("X-Tokens", tc.trailer)
				}
			})
			o := &outcome{}
			responsecost.Watch(resp, both, o.done)
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != body {
				t.Fatalf("read %q, %v; want %q", got, err, body)
			}
			_ = resp.Body.Close()
			o.check(t, tc.cost, tc.found)
		})
	}
}

// proxy starts a reverse proxy to upstream that watches every response for src and sends
// what done got to costs.
func proxy(t *testing.T, upstream http.HandlerFunc, src responsecost.Source, costs chan<- [2]int64) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	target, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		ModifyResponse: func(resp *http.Response) error {
			responsecost.Watch(resp, src, func(cost int64, found bool) {
				f := int64(0)
				if found {
					f = 1
				}
				costs <- [2]int64{cost, f}
			})
			return nil
		},
	}
	p := httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

// TestReverseProxySSE streams an SSE answer through httputil.ReverseProxy, event by event:
// the client receives the upstream's bytes, and done gets the usage.
func TestReverseProxySSE(t *testing.T) {
	events := strings.SplitAfter(openAIStream, "\n\n")
	costs := make(chan [2]int64, 2)
	p := proxy(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", sseType)
		for _, e := range events {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}, total, costs)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL, nil)
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(got) != openAIStream {
		t.Fatalf("the client read %q, %v; want the upstream's stream", got, err)
	}
	select {
	case c := <-costs:
		if c != [2]int64{21, 1} {
			t.Fatalf("done(%d, %v), want done(21, true)", c[0], c[1] == 1)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("done was not called")
	}
	select {
	case c := <-costs:
		t.Fatalf("done called again with %v", c)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestReverseProxyClientGone: a client that goes away mid-stream leaves the proxy to close
// the body early: done is called once, with no cost.
func TestReverseProxyClientGone(t *testing.T) {
	costs := make(chan [2]int64, 2)
	release := make(chan struct{})
	p := proxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", sseType)
		_, _ = io.WriteString(w, "data: {\"choices\":[]}\n\n")
		w.(http.Flusher).Flush()
		select { // the usage would come later
		case <-r.Context().Done():
		case <-release:
		}
	}, total, costs)
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 8)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = resp.Body.Close()
	select {
	case c := <-costs:
		if c[1] != 0 {
			t.Fatalf("done(%d, true) for a stream cut short, want found=false", c[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("done was not called after the client went away")
	}
}
