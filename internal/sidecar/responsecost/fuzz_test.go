package responsecost_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// chunked yields its reader's bytes at most n at a time.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// fuzzSource reads a cost from X-Cost or usage.total_tokens.
var fuzzSource = responsecost.Source{Header: "X-Cost", Field: "usage.total_tokens"}

// fuzzRun watches a response with contentType, costHeader (none when "") and body, read
// chunk bytes at a time; closeAt > 0 closes it after that many bytes, else it is read to
// its end. It fails t unless the bytes read are body's (or its first closeAt), done is
// called exactly once, and a found cost is within bounds. It returns what done got.
func fuzzRun(t *testing.T, contentType, costHeader string, body []byte, chunk, closeAt int) (int64, bool) {
	t.Helper()
	h := http.Header{"Content-Type": {contentType}}
	if costHeader != "" {
		h.Set("X-Cost", costHeader)
	}
	o := &outcome{}
	resp := response(h, &chunked{r: bytes.NewReader(body), n: chunk})
	responsecost.Watch(resp, fuzzSource, o.done)
	want := body
	var got []byte
	var err error
	if closeAt > 0 && closeAt < len(body) {
		want = body[:closeAt]
		got, err = io.ReadAll(io.LimitReader(resp.Body, int64(closeAt)))
	} else {
		got, err = io.ReadAll(resp.Body)
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	_ = resp.Body.Close()
	_ = resp.Body.Close()
	calls, cost, found := o.get()
	if calls != 1 {
		t.Fatalf("done called %d times, want once", calls)
	}
	if found && (cost < 0 || cost > responsecost.MaxCost) {
		t.Fatalf("done(%d, true): out of bounds", cost)
	}
	return cost, found
}

// FuzzWatch feeds arbitrary bodies, content types and cost headers: the bytes pass
// unchanged and done is called once, whether the body is read to its end or closed early,
// and reading in small chunks finds what reading whole finds.
func FuzzWatch(f *testing.F) {
	for _, tc := range append(append(append([]watchCase{}, jsonCases...), sseCases...), headerCases...) {
		h := header(tc.h...)
		f.Add(h.Get("Content-Type"), h.Get("X-Tokens"), []byte(tc.body), uint8(3), uint16(0))
	}
	f.Add(sseType, "", []byte(openAIStream), uint8(1), uint16(100))
	f.Add("application/json; charset=\"", "7", []byte(`{"usage":{"total_tokens":1e1}}`), uint8(0), uint16(5))
	f.Fuzz(func(t *testing.T, contentType, costHeader string, body []byte, chunk uint8, closeAt uint16) {
		wholeCost, wholeFound := fuzzRun(t, contentType, costHeader, body, len(body)+1, 0)
		cost, found := fuzzRun(t, contentType, costHeader, body, int(chunk)+1, 0)
		if cost != wholeCost || found != wholeFound {
			t.Fatalf("read %d bytes at a time: done(%d, %v); read whole: done(%d, %v)", int(chunk)+1, cost, found, wholeCost, wholeFound)
		}
		fuzzRun(t, contentType, costHeader, body, int(chunk)+1, int(closeAt))
	})
}
