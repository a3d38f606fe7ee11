package responsecost_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// sseEvents is an OpenAI-style stream of n events: n-2 content deltas, the usage, [DONE].
func sseEvents(n int) [][]byte {
	events := make([][]byte, 0, n)
	for i := range n - 2 {
		events = append(events, fmt.Appendf(nil,
			"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d \"},\"finish_reason\":null}],\"usage\":null}\n\n", i))
	}
	events = append(events,
		[]byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":198,"total_tokens":207}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	return events
}

// eventReader yields one event per Read, as an upstream flushing each event does.
type eventReader struct {
	events [][]byte
	i, off int
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.i == len(r.events) {
		return 0, io.EOF
	}
	n := copy(p, r.events[r.i][r.off:])
	if r.off += n; r.off == len(r.events[r.i]) {
		r.i, r.off = r.i+1, 0
	}
	return n, nil
}

func (r *eventReader) Close() error { return nil }

// BenchmarkWatchSSE streams a 200-event response an event per Read through a copy loop
// like a reverse proxy's: plain, and watched for usage.total_tokens.
func BenchmarkWatchSSE(b *testing.B) {
	events := sseEvents(200)
	size := 0
	for _, e := range events {
		size += len(e)
	}
	buf := make([]byte, 32<<10)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(size))
		for b.Loop() {
			body := &eventReader{events: events}
			if _, err := io.CopyBuffer(writerOnly{io.Discard}, body, buf); err != nil {
				b.Fatal(err)
			}
			_ = body.Close()
		}
	})
	b.Run("watched", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(size))
		var cost int64
		for b.Loop() {
			resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
				Body: &eventReader{events: events}, ContentLength: -1}
			responsecost.Watch(resp, total, func(c int64, _ bool) { cost = c })
			if _, err := io.CopyBuffer(writerOnly{io.Discard}, resp.Body, buf); err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		if cost != 207 {
			b.Fatalf("cost %d, want 207", cost)
		}
	})
}
