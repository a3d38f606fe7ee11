package httpserver_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
)

// TestServersCutSlowClients: both kinds of server end a client that trickles its headers,
// never finishes its body, or idles, and answer 431 to a header block over the limit.
func TestServersCutSlowClients(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	for name, srv := range map[string]*http.Server{
		"New": httpserver.New(echo, testLimits), "NewStreaming": httpserver.NewStreaming(echo, testLimits),
	} {
		addr := serve(t, srv)
		ended(t, send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nX-A: "), 3*tRead)
		ended(t, send(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc"), 3*tRead)

		conn := send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", name, resp, err)
		}
		ended(t, conn, testLimits.IdleTimeout+time.Second)

		huge := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", testLimits.MaxHeaderBytes+8<<10) + "\r\n\r\n"
		resp, err = http.ReadResponse(bufio.NewReader(send(t, addr, huge)), nil)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: a header block over the limit: %v %v, want 431", name, resp, err)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := httpserver.DefaultLimits().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	l := httpserver.DefaultLimits()
	l.ReadTimeout, l.MaxHeaderBytes = -time.Second, 10
	err := l.Validate()
	if err == nil || !strings.Contains(err.Error(), "read timeout: -1s is negative") || !strings.Contains(err.Error(), "max header bytes: 10") {
		t.Errorf("Validate = %v, want both problems named", err)
	}
}

func TestLimitsAtLeast(t *testing.T) {
	l := httpserver.Limits{ReadTimeout: time.Second, WriteTimeout: 0, IdleTimeout: time.Second}.AtLeast(time.Minute)
	if l.ReadTimeout != time.Minute || l.WriteTimeout != 0 || l.IdleTimeout != time.Second {
		t.Errorf("AtLeast = %+v: raises set read and write timeouts only", l)
	}
}
