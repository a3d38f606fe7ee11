package sidecar_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// limitsRig is a sidecar with short HTTP timeouts and a small header limit, proxying to an
// upstream with slow, large and streaming answers.
type limitsRig struct {
	proc                  *proc.Process
	proxy, check, metrics string
	bigWriteFailed        atomic.Int64 // unix ms at which the upstream's big answer stopped being read
}

const (
	limReadHeader = time.Second
	limRead       = time.Second
	limWrite      = 2 * time.Second
	limIdle       = 2 * time.Second
	limMaxHeader  = 8 << 10
)

func startLimitsRig(t *testing.T) *limitsRig {
	t.Helper()
	srv := redistest.StartServer(t)
	vol := &volume{t: t, dir: t.TempDir()}
	vol.publish(document(t, srv.Addr(), keyPolicy("uploads", 1000)))
	r := &limitsRig{proxy: wait.FreeAddr(t), check: wait.FreeAddr(t), metrics: wait.FreeAddr(t)}
	upstream := httptest.NewServer(http.HandlerFunc(r.upstream))
	t.Cleanup(upstream.Close)
	r.proc = startSidecar(t, proc.MustBuild(t, "cmd/sidecar"), "--namespace", namespace, "--snapshot-file", vol.path(),
		"--upstream", upstream.URL, "--proxy-bind-address", r.proxy, "--http-bind-address", r.check,
		"--grpc-bind-address", "", "--metrics-bind-address", r.metrics, "--drain-delay", "0s",
		"--redis-addrs", srv.Addr(), "--redis-timeout", "2s",
		"--http-read-header-timeout", limReadHeader.String(), "--http-read-timeout", limRead.String(),
		"--http-write-timeout", limWrite.String(), "--http-idle-timeout", limIdle.String(),
		"--http-max-header-bytes", fmt.Sprint(limMaxHeader))
	waitOK(t, r.proc, "http://"+r.metrics+"/readyz")
	return r
}

func (r *limitsRig) upstream(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/api/slow": // longer than every sidecar timeout before the first byte
		time.Sleep(limWrite + limRead + 500*time.Millisecond)
	case "/api/stream": // a long answer, each part well within the write timeout
		for i := range 8 {
			_, _ = fmt.Fprintf(w, "part %d\n", i)
			http.NewResponseController(w).Flush()
			time.Sleep(limWrite / 4)
		}
		return
	case "/api/big": // far more than the socket buffers hold, for a client that never reads
		chunk := make([]byte, 64<<10)
		for range 2048 {
			if _, err := w.Write(chunk); err != nil {
				r.bigWriteFailed.Store(time.Now().UnixMilli())
				return
			}
		}
		return
	}
	n, _ := io.Copy(io.Discard, req.Body)
	_, _ = fmt.Fprintf(w, "upstream read %d bytes", n)
}

// dial opens a raw connection and writes s.
func dial(t *testing.T, addr, s string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, s)
	must(t, err)
	return conn
}

// cutBound is how soon each slow client must be cut off: every timeout above is at most 2s.
const cutBound = 3 * time.Second

// cutWithin asserts the server ends conn (closes it, possibly after an error answer) within cutBound.
func cutWithin(t *testing.T, what string, conn net.Conn) {
	t.Helper()
	start := time.Now()
	must(t, conn.SetReadDeadline(start.Add(cutBound)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the connection was still open after %v", what, cutBound)
		return
	}
	t.Logf("%s: cut off after %v (%v)", what, time.Since(start).Round(10*time.Millisecond), err)
}

// TestSidecarHTTPLimits drives the binary's HTTP listeners with real slow and oversized
// clients: each is cut off at its flag's timeout, a header block over the limit gets 431,
// and long proxied answers (slow to start, or streaming) are not cut.
func TestSidecarHTTPLimits(t *testing.T) {
	r := startLimitsRig(t)
	for _, addr := range []string{r.proxy, r.check, r.metrics} {
		cutWithin(t, addr+" headers never finished", dial(t, addr, "GET /api/x HTTP/1.1\r\nHost: x\r\n"))
	}
	post := "POST %s HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\nContent-Length: 100\r\n\r\n0123456789"
	cutWithin(t, "check API body never finished", dial(t, r.check, fmt.Sprintf(post, "/v1/check")))
	cutWithin(t, "proxy body never finished", dial(t, r.proxy, fmt.Sprintf(post, "/api/x")))

	conn := dial(t, r.proxy, "GET /api/x HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	cutWithin(t, "idle keep-alive connection", conn)

	for _, addr := range []string{r.proxy, r.check} {
		huge := "GET /api/x HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", limMaxHeader+8<<10) + "\r\n\r\n"
		resp, err := http.ReadResponse(bufio.NewReader(dial(t, addr, huge)), nil)
		must(t, err)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: a header block over --http-max-header-bytes answered %d, want 431", addr, resp.StatusCode)
		}
	}

	r.checkLongAnswers(t)
	r.checkStalledReader(t)
}

// checkLongAnswers: a slow-to-start answer and a streaming one outlast every timeout, and an
// upload that keeps making progress is not cut at the read timeout.
func (r *limitsRig) checkLongAnswers(t *testing.T) {
	t.Helper()
	for _, path := range []string{"/api/slow", "/api/stream"} {
		status, body, err := r.send(t, http.MethodGet, path, nil)
		if err != nil || status != 200 || (path == "/api/stream" && !strings.HasSuffix(body, "part 7\n")) {
			t.Errorf("%s outlasting the timeouts: %d %q %v", path, status, body, err)
		}
	}
	pr, pw := io.Pipe()
	go func() { // 20 bytes over 3 read timeouts, a byte every 150ms
		for range 20 {
			time.Sleep(150 * time.Millisecond)
			_, _ = pw.Write([]byte("x"))
		}
		_ = pw.Close()
	}()
	if status, body, _ := r.send(t, http.MethodPost, "/api/upload", pr); status != 200 || body != "upstream read 20 bytes" {
		t.Errorf("a slow upload that keeps going: %d %q", status, body)
	}
}

// send makes a request as API key k through the proxy and returns the status and the body
// (with the error of reading it).
func (r *limitsRig) send(t *testing.T, method, path string, body io.Reader) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.proxy+path, body)
	must(t, err)
	req.Header.Set("X-API-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(b), err
}

// checkStalledReader: a client that stops reading a large answer is cut off at the write
// timeout, and the proxy lets go of the upstream.
func (r *limitsRig) checkStalledReader(t *testing.T) {
	t.Helper()
	start := time.Now()
	conn := dial(t, r.proxy, "GET /api/big HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\n\r\n")
	deadline := start.Add(limWrite + 10*time.Second) // filling the socket buffers takes a moment
	for r.bigWriteFailed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if at := r.bigWriteFailed.Load(); at == 0 {
		t.Errorf("a client that stopped reading still held the proxy and its upstream after %v", time.Since(start))
	} else {
		t.Logf("stalled reader released the upstream after %v", time.UnixMilli(at).Sub(start).Round(10*time.Millisecond))
	}
	_ = conn.Close()
}

// TestSidecarDefaultHeaderLimit: by default a header block over 64 KiB is refused with 431
// instead of being parsed (Go's own default allows 1 MiB) and forwarded.
func TestSidecarDefaultHeaderLimit(t *testing.T) {
	r := startRig(t, true)
	for _, addr := range []string{r.proxy, r.check} {
		huge := "GET /api/x HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n"
		resp, err := http.ReadResponse(bufio.NewReader(dial(t, addr, huge)), nil)
		must(t, err)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: an 80 KiB header answered %d, want 431", addr, resp.StatusCode)
		}
	}
}
