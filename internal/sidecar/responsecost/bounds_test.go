package responsecost_test

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// padded is a JSON object of exactly n bytes (n >= 60) that ends with usage.total_tokens 21.
func padded(n int) []byte {
	const head, tail = `{"pad":"`, `","usage":{"total_tokens":21}}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// TestJSONBodyBound: a JSON body of MaxJSONBody bytes is read; one byte more states no
// cost, whether its length is known up front or not, and passes unchanged.
func TestJSONBodyBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		n             int
		contentLength bool
		found         bool
	}{
		{"at the bound", responsecost.MaxJSONBody, false, true},
		{"at the bound, length known", responsecost.MaxJSONBody, true, true},
		{"over the bound", responsecost.MaxJSONBody + 1, false, false},
		{"over the bound, length known", responsecost.MaxJSONBody + 1, true, false},
		{"far over the bound", 3 * responsecost.MaxJSONBody, false, false},
	} {
		for _, c := range []int{0, 2} { // whole and in halves: a byte at a time is slow
			c := chunkings[c]
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				body := padded(tc.n)
				o := &outcome{}
				resp := response(header("Content-Type", jsonType), c.wrap(bytes.NewReader(body)))
				if tc.contentLength {
					resp.ContentLength = int64(len(body))
				}
				responsecost.Watch(resp, total, o.done)
				got, err := io.ReadAll(resp.Body)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("read %d bytes (%v); want the %d sent, unchanged", len(got), err, len(body))
				}
				o.check(t, 21, tc.found)
				_ = resp.Body.Close()
				o.check(t, 21, tc.found)
			})
		}
	}
}

// event is one SSE event whose data is a JSON object of exactly n bytes stating cost.
func event(n int, cost string) string {
	head, tail := `{"pad":"`, `","usage":{"total_tokens":`+cost+`}}`
	return "data: " + head + strings.Repeat("x", n-len(head)-len(tail)) + tail + "\n\n"
}

// TestSSEEventBound: an event whose data exceeds MaxEventData is dropped, and the events
// after it are still read.
func TestSSEEventBound(t *testing.T) {
	t.Parallel()
	max := responsecost.MaxEventData
	// Split over two data lines, the data is both lines and the "\n" between them.
	twoLines := "data: " + strings.Repeat("x", max/2) + "\ndata: " + strings.Repeat("y", max/2) + `"usage":{"total_tokens":5}` + "\n\n"
	for _, tc := range []struct {
		name  string
		body  string
		cost  int64
		found bool
	}{
		{"at the bound", event(max, "5"), 5, true},
		{"over the bound", event(max+1, "5"), 0, false},
		{"over the bound, then a small event", event(max+1, "5") + event(100, "21"), 21, true},
		{"a small event, then one over the bound", event(100, "21") + event(max+1, "5"), 21, true},
		{"over the bound in two lines", twoLines, 0, false},
		{"a long comment, then an event", ":" + strings.Repeat("c", 2*max) + "\n" + event(100, "21"), 21, true},
		{"a long event line, then an event", "event:" + strings.Repeat("e", 2*max) + "\n" + event(100, "21"), 21, true},
	} {
		for _, c := range []int{0, 2} { // whole and in halves: a byte at a time is slow
			c := chunkings[c]
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				watchAll(t, header("Content-Type", sseType), []byte(tc.body), c.wrap, total).check(t, tc.cost, tc.found)
			})
		}
	}
}

// endless yields n bytes of a repeated pattern, in reads of at most 32 KiB.
type endless struct {
	block  []byte // the pattern repeated, 32 KiB and one pattern long
	period int    // the pattern's length
	n, off int
}

func newEndless(pattern string, n int) *endless {
	return &endless{block: bytes.Repeat([]byte(pattern), (32<<10)/len(pattern)+2), period: len(pattern), n: n}
}

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), e.n, 32<<10)], e.block[e.off:])
	e.off = (e.off + n) % e.period
	e.n -= n
	return n, nil
}

// TestMemoryBound streams 8 MiB bodies built to be buffered (one JSON document, one SSE
// line, many SSE lines of one event, endless lines of "\r" and "\n"): the watch may
// allocate at most a few MiB for each.
func TestMemoryBound(t *testing.T) { // not parallel: it counts every allocation in the process
	const size = 8 << 20
	for _, tc := range []struct {
		name, contentType, prefix, pattern string
	}{
		{"json", jsonType, `{"usage":{"total_tokens":1},"pad":"`, "x"},
		{"sse one line", sseType, "data: ", `{"total_tokens":1}`},
		{"sse many data lines", sseType, "", "data: {\"total_tokens\":1}\n"},
		{"sse comments", sseType, "", ":\"total_tokens\"\r\n"},
		{"sse line ends", sseType, "", "\r\n\r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := io.MultiReader(strings.NewReader(tc.prefix), newEndless(tc.pattern, size))
			resp := response(header("Content-Type", tc.contentType), src)
			o := &outcome{}
			buf := make([]byte, 32<<10)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			responsecost.Watch(resp, total, o.done)
			n, err := io.CopyBuffer(writerOnly{io.Discard}, resp.Body, buf)
			runtime.ReadMemStats(&after)
			if err != nil || n != int64(len(tc.prefix)+size) {
				t.Fatalf("copied %d bytes (%v), want %d", n, err, len(tc.prefix)+size)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("watching a %d MiB body allocated %d KiB", size>>20, alloc>>10)
			if alloc > 4<<20 {
				t.Errorf("watching a %d MiB body allocated %d KiB, want at most 4 MiB", size>>20, alloc>>10)
			}
			o.check(t, 0, false)
		})
	}
}

// writerOnly hides its Writer's ReadFrom, so that io.CopyBuffer uses the buffer given.
type writerOnly struct{ io.Writer }
