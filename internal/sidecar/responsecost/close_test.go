package responsecost_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// TestCloseBeforeEOF: a body closed before its end states no cost through Field, and done
// is called once, by the first Close; a header cost stands however early the body closes.
func TestCloseBeforeEOF(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     []string
		body  string
		src   responsecost.Source
		cost  int64
		found bool
	}{
		{"json", []string{"Content-Type", jsonType}, usageJSON("21"), total, 0, false},
		{"sse with usage read", []string{"Content-Type", sseType}, openAIStream, total, 0, false},
		{"header", []string{"Content-Type", jsonType, "X-Tokens", "42"}, usageJSON("21"), both, 42, true},
		{"invalid header", []string{"Content-Type", jsonType, "X-Tokens", "4.2"}, usageJSON("21"), both, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &outcome{}
			resp := response(header(tc.h...), strings.NewReader(tc.body))
			responsecost.Watch(resp, tc.src, o.done)
			head := make([]byte, len(tc.body)-8) // all but the end: even the SSE usage event
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatal(err)
			}
			if calls, _, _ := o.get(); calls != 0 {
				t.Fatalf("done called %d times before the body ended or closed", calls)
			}
			for range 3 {
				if err := resp.Body.Close(); err != nil {
					t.Fatal(err)
				}
				o.check(t, tc.cost, tc.found)
			}
			// Read after Close reads on from the original (a NopCloser), and calls no done.
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(head)+string(rest) != tc.body {
				t.Fatalf("read after close: %q, %v; want the rest of the body", rest, err)
			}
			o.check(t, tc.cost, tc.found)
		})
	}
}

// TestDoneAtEOF: done is called when Read returns io.EOF, before Close, and not again by
// Close.
func TestDoneAtEOF(t *testing.T) {
	o := &outcome{}
	resp := response(header("Content-Type", jsonType), strings.NewReader(usageJSON("21")))
	responsecost.Watch(resp, total, o.done)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	o.check(t, 21, true)
	if _, err := resp.Body.Read(make([]byte, 8)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after EOF: %v, want io.EOF", err)
	}
	_ = resp.Body.Close()
	o.check(t, 21, true)
}

// closeRecorder is a body whose Close fails, counting its calls.
type closeRecorder struct {
	io.Reader
	closes int
}

var errClose = errors.New("close failed")

func (c *closeRecorder) Close() error {
	c.closes++
	return errClose
}

// TestCloseOnce: the original body is closed once however often the watched one is, and
// every Close returns the original's error.
func TestCloseOnce(t *testing.T) {
	orig := &closeRecorder{Reader: strings.NewReader("x")}
	o := &outcome{}
	resp := &http.Response{Header: http.Header{}, Body: orig}
	responsecost.Watch(resp, both, o.done)
	for range 3 {
		if err := resp.Body.Close(); !errors.Is(err, errClose) {
			t.Fatalf("close: %v, want %v", err, errClose)
		}
	}
	if orig.closes != 1 {
		t.Fatalf("the original body was closed %d times, want once", orig.closes)
	}
	o.check(t, 0, false)
}

// TestReadError: a body that fails before its end states no cost through Field, even when
// its bytes held it; done waits for Close. The error passes unchanged.
func TestReadError(t *testing.T) {
	errReset := errors.New("connection reset")
	for _, tc := range []struct {
		name  string
		h     []string
		cost  int64
		found bool
	}{
		{"field", []string{"Content-Type", sseType}, 0, false},
		{"header", []string{"Content-Type", sseType, "X-Tokens", "42"}, 42, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &outcome{}
			resp := response(header(tc.h...), io.MultiReader(strings.NewReader(openAIStream), iotest.ErrReader(errReset)))
			responsecost.Watch(resp, both, o.done)
			got, err := io.ReadAll(resp.Body)
			if !errors.Is(err, errReset) || string(got) != openAIStream {
				t.Fatalf("read %d bytes, %v; want the stream, then %v", len(got), err, errReset)
			}
			if calls, _, _ := o.get(); calls != 0 {
				t.Fatalf("done called %d times on a read error; want it to wait for Close", calls)
			}
			_ = resp.Body.Close()
			o.check(t, tc.cost, tc.found)
		})
	}
}

// TestConcurrentReadClose closes the body while another goroutine reads it (as a reverse
// proxy may, when the client goes away), racing the body's end: done is called exactly
// once. Run with -race.
func TestConcurrentReadClose(t *testing.T) {
	for i := range 300 {
		pr, pw := io.Pipe()
		o := &outcome{}
		resp := response(header("Content-Type", sseType), pr)
		resp.Body = pr
		responsecost.Watch(resp, total, o.done)
		var wg sync.WaitGroup
		wg.Go(func() { // the upstream
			for j := 0; j < i%40; j++ {
				if _, err := io.WriteString(pw, "data: "+usageJSON("21")+"\n\n"); err != nil {
					return
				}
			}
			_ = pw.Close()
		})
		wg.Go(func() { // the proxy's copy
			_, _ = io.Copy(io.Discard, resp.Body)
		})
		wg.Go(func() { // the client going away
			for range i % 7 {
				_, _, _ = o.get()
			}
			_ = resp.Body.Close()
		})
		wg.Wait()
		calls, cost, found := o.get()
		if calls != 1 || (found && cost != 21) {
			t.Fatalf("run %d: done called %d times, last with (%d, %v); want once, with 21 or nothing", i, calls, cost, found)
		}
	}
}

// TestNoBodyToWatch: a nil body and a 101 response call done at once, with the header's
// cost, and keep their body; a nil response calls done(0, false).
func TestNoBodyToWatch(t *testing.T) {
	o := &outcome{}
	responsecost.Watch(&http.Response{Header: header("X-Tokens", "7")}, both, o.done)
	o.check(t, 7, true)

	conn := struct{ io.ReadWriteCloser }{}
	resp := &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{}, Body: conn}
	o = &outcome{}
	responsecost.Watch(resp, both, o.done)
	o.check(t, 0, false)
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Fatal("a 101 response's body is no longer an io.ReadWriteCloser")
	}

	o = &outcome{}
	responsecost.Watch(nil, both, o.done)
	o.check(t, 0, false)

	resp = response(http.Header{}, bytes.NewReader(nil))
	responsecost.Watch(resp, both, nil) // a nil done is no call
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
}

// brokenReader claims to have read more than it was given.
type brokenReader struct{}

func (brokenReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

// TestBrokenReader: a Read returning a count beyond its buffer passes on unchanged (no
// panic in the watch), the body states no cost, and done waits for Close.
func TestBrokenReader(t *testing.T) {
	o := &outcome{}
	resp := response(header("Content-Type", jsonType), brokenReader{})
	responsecost.Watch(resp, total, o.done)
	if n, err := resp.Body.Read(make([]byte, 4)); n != 5 || err != nil {
		t.Fatalf("read %d, %v; want the original's 5, nil", n, err)
	}
	_ = resp.Body.Close()
	o.check(t, 0, false)
}
