// Package rawhttp sends HTTP/1.1 requests written byte for byte, for the tests that need what
// Go's client refuses or rewrites: odd Host fields, several of them or none, absolute
// request targets, paths as written.
package rawhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Answer is a response as the client read it.
type Answer struct {
	// Status is the response's status code.
	Status int
	// Header is the response's header.
	Header http.Header
	// Body is the response's body.
	Body string
}

func (a Answer) String() string { return fmt.Sprintf("%d %v %q", a.Status, a.Header, a.Body) }

// Send writes lines (the request line, then header lines, each without its CRLF) to a new
// connection to addr, followed by "Connection: close" and the blank line, and reads the
// answer. Failing to connect or to read an answer fails the test.
func Send(t testing.TB, addr string, lines ...string) Answer {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, strings.Join(lines, "\r\n")+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", lines[0], err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%q: reading the body: %v", lines[0], err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}
