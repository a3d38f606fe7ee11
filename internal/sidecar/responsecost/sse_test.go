package responsecost

import (
	"bytes"
	"strings"
	"testing"
)

// refEvents is the data of every event in stream, by a direct reading of the HTML
// standard's "Event stream interpretation" (with the pending event dispatched at the end,
// as Watch does), for streams whose events are all within MaxEventData.
func refEvents(stream string) []string {
	stream = strings.TrimPrefix(stream, bom)
	stream = strings.ReplaceAll(stream, "\r\n", "\n")
	stream = strings.ReplaceAll(stream, "\r", "\n")
	var events []string
	var data strings.Builder
	dispatch := func() {
		if d := data.String(); d != "" {
			events = append(events, strings.TrimSuffix(d, "\n"))
		}
		data.Reset()
	}
	lines := strings.Split(stream, "\n")
	for _, line := range lines {
		if line == "" {
			dispatch()
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		if name == "data" {
			data.WriteString(strings.TrimPrefix(value, " ") + "\n")
		}
	}
	dispatch()
	return events
}

// parse is the data of every event the parser hands on, stream written in chunks of size
// n (the last one shorter).
func parse(stream string, n int) []string {
	var events []string
	p := newSSEParser(func(data []byte) { events = append(events, string(data)) })
	b := []byte(stream)
	for len(b) > 0 {
		k := min(n, len(b))
		p.write(b[:k])
		b = b[k:]
	}
	p.end()
	return events
}

// sseSeeds are event streams for TestSSEParser and FuzzSSEParser.
var sseSeeds = []string{
	"", "\n", "\r\n\r\n", "data", "data\n\n", "data:\n\n", "data: \n\n", "data:  x\n\n", "data: x",
	"data: a\ndata: b\n\n", "data: a\r\ndata: b\r\n\r\n", "data: a\rdata: b\r\r", "data: a\r\n\rdata: b",
	": comment\ndata: x\n\n", "event: e\nid: 1\nretry: 5\ndata: x\n\n", "Data: x\n\n", "data : x\n\n",
	" data: x\n\n", "\uFEFFdata: x\n\n", "\uFEFF\uFEFFdata: x\n\n", "x\uFEFFdata: x\n\n", "\uFEFF\ndata: x",
	"data: x\n\uFEFFdata: y\n\n", "data:data: x\n\n", "datadata: x\n\n", "dat\na: x\n\n", "data: [DONE]\n\n",
	"data: x\n\ndata: y\n\ndata: z", "\r", "\r\r\n\n", "data:\r", "data: é\n\n",
}

// TestSSEParser compares the parser's events with the reference's, the stream written
// whole and a byte at a time.
func TestSSEParser(t *testing.T) {
	for _, stream := range append(sseSeeds, openAIStreamForTest) {
		want := refEvents(stream)
		for _, n := range []int{len(stream) + 1, 1, 2, 3} {
			if got := parse(stream, n); !equalEvents(got, want) {
				t.Errorf("%q in chunks of %d: events %q, want %q", stream, n, got, want)
			}
		}
	}
}

const openAIStreamForTest = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}\n\n" +
	"data: [DONE]\n\n"

func equalEvents(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzSSEParser compares the parser with the reference on arbitrary streams, written in
// arbitrary chunks.
func FuzzSSEParser(f *testing.F) {
	for _, s := range sseSeeds {
		f.Add(s, uint8(1))
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, stream string, chunk uint8) {
		want := refEvents(stream)
		if got := parse(stream, int(chunk)+1); !equalEvents(got, want) {
			t.Fatalf("%q in chunks of %d: events %q, want %q", stream, int(chunk)+1, got, want)
		}
	})
}

// TestSSEParserKeepsNoBigBuffer: after a big event, the parser lets its buffer go.
func TestSSEParserKeepsNoBigBuffer(t *testing.T) {
	p := newSSEParser(func([]byte) {})
	p.write([]byte("data: " + strings.Repeat("x", 2*keepDataCap) + "\n\n"))
	if cap(p.data) > keepDataCap {
		t.Fatalf("the parser keeps a %d-byte buffer after the event, want at most %d", cap(p.data), keepDataCap)
	}
	p.write(bytes.Repeat([]byte("data: x\n\n"), 100))
	if cap(p.data) == 0 {
		t.Fatal("the parser keeps no buffer between small events")
	}
}
