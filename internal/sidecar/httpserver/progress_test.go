package httpserver_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
)

const (
	tRead  = 300 * time.Millisecond
	tWrite = 500 * time.Millisecond
)

var testLimits = httpserver.Limits{ReadHeaderTimeout: tRead, ReadTimeout: tRead, WriteTimeout: tWrite,
	IdleTimeout: time.Second, MaxHeaderBytes: 4 << 10}

// serve runs srv on a loopback listener until the test ends.
func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// proxyTo is a streaming server running a reverse proxy to the upstream handler h.
func proxyTo(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, _ error) {
		status := http.StatusBadGateway
		if httpserver.Stalled(r) {
			status = http.StatusRequestTimeout
		}
		w.WriteHeader(status)
	}
	return serve(t, httpserver.NewStreaming(rp, testLimits))
}

// send writes s on a new connection.
func send(t *testing.T, addr, s string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatal(err)
	}
	return conn
}

// ended reads conn until the server ends it and returns what it sent, failing when that
// takes longer than within.
func ended(t *testing.T, conn net.Conn, within time.Duration) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v (sent %q)", within, b)
	}
	return string(b)
}

func TestStreamingCutsAStalledBody(t *testing.T) {
	addr := proxyTo(t, func(_ http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	conn := send(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	if got := ended(t, conn, 3*tRead); !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("a body that stalls: %q, want 408", got)
	}
}

func TestStreamingRefusedUnreadBodyEnds(t *testing.T) {
	addr := serve(t, httpserver.NewStreaming(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest) // never reads the body
	}), testLimits))
	conn := send(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	if got := ended(t, conn, 3*tRead); !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Errorf("an unread body that stalls: %q, want the 400 and the end of the connection", got)
	}
}

// TestStreamingAllowsLongExchanges: an upstream slow to answer, a streamed answer and an
// upload that keep making progress all outlast the timeouts.
func TestStreamingAllowsLongExchanges(t *testing.T) {
	addr := proxyTo(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(tRead + tWrite + 200*time.Millisecond)
		case "/stream":
			for i := range 6 {
				_, _ = io.WriteString(w, strings.Repeat("x", i))
				http.NewResponseController(w).Flush()
				time.Sleep(tWrite / 3)
			}
		default:
			n, _ := io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, strings.Repeat("y", int(n)))
		}
	})
	for _, path := range []string{"/slow", "/stream"} {
		resp, err := http.Get("http://" + addr + path) //nolint:noctx // bounded by the server's timeouts
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || path == "/stream" && len(body) != 15 {
			t.Errorf("%s: %d %q %v", path, resp.StatusCode, body, err)
		}
	}
	pr, pw := io.Pipe()
	go func() {
		for range 10 { // 10 bytes over 3 read timeouts
			time.Sleep(tRead / 3)
			_, _ = pw.Write([]byte("z"))
		}
		_ = pw.Close()
	}()
	resp, err := http.Post("http://"+addr+"/upload", "text/plain", pr) //nolint:noctx // as above
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "yyyyyyyyyy" {
		t.Errorf("a slow upload that keeps going: %d %q", resp.StatusCode, body)
	}
}

// TestStreamingCutsAStalledReader: a client that stops reading is cut off at the write
// timeout, which releases the upstream.
func TestStreamingCutsAStalledReader(t *testing.T) {
	released := make(chan time.Time, 1)
	addr := proxyTo(t, func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 4096 { // 256 MiB, far more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		released <- time.Now()
	})
	start := time.Now()
	send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case at := <-released:
		t.Logf("released after %v", at.Sub(start))
	case <-time.After(tWrite + 10*time.Second):
		t.Fatal("a client that stopped reading held the proxy and its upstream")
	}
}

// TestStreamingKeepAliveAfterAPause: a deadline one answer set does not fail the next answer
// on the same kept-alive connection, even one that writes only its headers.
func TestStreamingKeepAliveAfterAPause(t *testing.T) {
	addr := serve(t, httpserver.NewStreaming(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_, _ = io.WriteString(w, "body")
	}), testLimits))
	conn := send(t, addr, "GET /body HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	for i, path := range []string{"/body", "/empty"} {
		if i > 0 {
			time.Sleep(tWrite + 200*time.Millisecond) // past the first answer's write deadline, within the idle timeout
			if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// TestStreamingUpgradeHasNoDeadlines: a connection the handler hijacks (a WebSocket
// through the proxy) is not cut by the read or write timeouts.
func TestStreamingUpgradeHasNoDeadlines(t *testing.T) {
	addr := proxyTo(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	})
	conn := send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	time.Sleep(tRead + tWrite + 200*time.Millisecond)
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Errorf("after a pause longer than the timeouts the upgraded connection answered %q, %v", got, err)
	}
}
