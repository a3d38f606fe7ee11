package responsecost_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// outcome records the calls of a done callback.
type outcome struct {
	mu    sync.Mutex
	calls int
	cost  int64
	found bool
}

func (o *outcome) done(cost int64, found bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	o.cost, o.found = cost, found
}

func (o *outcome) get() (calls int, cost int64, found bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls, o.cost, o.found
}

// check fails t unless done was called exactly once, with cost and found.
func (o *outcome) check(t *testing.T, cost int64, found bool) {
	t.Helper()
	calls, gotCost, gotFound := o.get()
	if calls != 1 {
		t.Fatalf("done called %d times, want once", calls)
	}
	if gotFound != found || (found && gotCost != cost) {
		t.Fatalf("done(%d, %v), want done(%d, %v)", gotCost, gotFound, cost, found)
	}
}

// chunkings are the ways a body arrives: whole, a byte at a time, in halves, and with the
// last bytes together with io.EOF.
var chunkings = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"onebyte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"dataerr", iotest.DataErrReader},
}

// header is an http.Header of name, value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// response is a 200 response with h and body, of unknown length.
func response(h http.Header, body io.Reader) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(body), ContentLength: -1}
}

// watchAll watches a response with h and body (read through wrap) for src, reads its body
// to the end and closes it; it fails t unless the bytes read are body's.
func watchAll(t *testing.T, h http.Header, body []byte, wrap func(io.Reader) io.Reader, src responsecost.Source) *outcome {
	t.Helper()
	o := &outcome{}
	resp := response(h, wrap(bytes.NewReader(body)))
	responsecost.Watch(resp, src, o.done)
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("the watched body yielded %d bytes that differ from the %d sent", len(got), len(body))
	}
	return o
}
