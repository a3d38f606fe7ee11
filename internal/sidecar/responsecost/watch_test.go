package responsecost_test

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

const (
	jsonType = "application/json"
	sseType  = "text/event-stream"
)

var (
	total  = responsecost.Source{Field: "usage.total_tokens"}
	output = responsecost.Source{Field: "usage.output_tokens"}
	both   = responsecost.Source{Header: "X-Tokens", Field: "usage.total_tokens"}
)

// openAIStream is an OpenAI chat completion streamed with stream_options.include_usage:
// "usage": null on every chunk but the last.
const openAIStream = `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}

data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}

data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}

data: [DONE]

`

// anthropicStream is an Anthropic message streamed: output_tokens in message_delta.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"m1","usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: ping
data: {"type": "ping"}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`

type watchCase struct {
	name  string
	h     []string // header name, value pairs
	body  string
	src   responsecost.Source
	cost  int64
	found bool
}

// usageJSON is a JSON body whose usage.total_tokens is v.
func usageJSON(v string) string {
	return `{"id":"x","usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":` + v + `}}`
}

var jsonCases = []watchCase{
	{"json", []string{"Content-Type", jsonType}, usageJSON("21"), total, 21, true},
	{"json media type case and parameters", []string{"Content-Type", "Application/JSON; charset=UTF-8"}, usageJSON("21"), total, 21, true},
	{"+json", []string{"Content-Type", "application/vnd.api+json"}, usageJSON("21"), total, 21, true},
	{"json whitespace", []string{"Content-Type", jsonType}, "\n { \"usage\" : { \"total_tokens\" :\t21 } }\n", total, 21, true},
	{"json 21.0", []string{"Content-Type", jsonType}, usageJSON("21.0"), total, 21, true},
	{"json 2.1e1", []string{"Content-Type", jsonType}, usageJSON("2.1e1"), total, 21, true},
	{"json 2100E-2", []string{"Content-Type", jsonType}, usageJSON("2100E-2"), total, 21, true},
	{"json zero", []string{"Content-Type", jsonType}, usageJSON("0"), total, 0, true},
	{"json MaxCost", []string{"Content-Type", jsonType}, usageJSON("1099511627776"), total, responsecost.MaxCost, true},
	{"json MaxCost+1", []string{"Content-Type", jsonType}, usageJSON("1099511627777"), total, 0, false},
	{"json negative", []string{"Content-Type", jsonType}, usageJSON("-1"), total, 0, false},
	{"json fractional", []string{"Content-Type", jsonType}, usageJSON("1.5"), total, 0, false},
	{"json string", []string{"Content-Type", jsonType}, usageJSON(`"21"`), total, 0, false},
	{"json huge", []string{"Content-Type", jsonType}, usageJSON("1e300"), total, 0, false},
	{"json tiny", []string{"Content-Type", jsonType}, usageJSON("1e-300"), total, 0, false},
	{"json bool", []string{"Content-Type", jsonType}, usageJSON("true"), total, 0, false},
	{"json null", []string{"Content-Type", jsonType}, usageJSON("null"), total, 0, false},
	{"json object", []string{"Content-Type", jsonType}, usageJSON(`{"n":21}`), total, 0, false},
	{"json missing field", []string{"Content-Type", jsonType}, `{"usage":{"prompt_tokens":9}}`, total, 0, false},
	{"json path through a number", []string{"Content-Type", jsonType}, `{"usage":5,"total_tokens":21}`, total, 0, false},
	{"json array", []string{"Content-Type", jsonType}, `[` + usageJSON("21") + `]`, total, 0, false},
	{"json truncated", []string{"Content-Type", jsonType}, usageJSON("21")[:40], total, 0, false},
	{"json trailing garbage", []string{"Content-Type", jsonType}, usageJSON("21") + "x", total, 0, false},
	{"json escaped key is not matched", []string{"Content-Type", jsonType}, `{"usage":{"total\u005ftokens":21}}`, total, 0, false},
	{"json empty body", []string{"Content-Type", jsonType}, "", total, 0, false},
	{"json identity encoding", []string{"Content-Type", jsonType, "Content-Encoding", "Identity"}, usageJSON("21"), total, 21, true},
	{"json br encoding", []string{"Content-Type", jsonType, "Content-Encoding", "br"}, usageJSON("21"), total, 0, false},
	{"text/plain", []string{"Content-Type", "text/plain"}, usageJSON("21"), total, 0, false},
	{"no content type", nil, usageJSON("21"), total, 0, false},
	{"bad content type", []string{"Content-Type", "application/json/x"}, usageJSON("21"), total, 0, false},
	{"two content types", []string{"Content-Type", jsonType, "Content-Type", jsonType}, usageJSON("21"), total, 0, false},
	{"header only, none sent", []string{"Content-Type", jsonType}, usageJSON("21"), responsecost.Source{Header: "X-Tokens"}, 0, false},
}

var sseCases = []watchCase{
	{"sse openai", []string{"Content-Type", sseType}, openAIStream, total, 21, true},
	{"sse anthropic", []string{"Content-Type", "Text/Event-Stream; charset=utf-8"}, anthropicStream, output, 15, true},
	{"sse crlf", []string{"Content-Type", sseType}, strings.ReplaceAll(openAIStream, "\n", "\r\n"), total, 21, true},
	{"sse cr", []string{"Content-Type", sseType}, strings.ReplaceAll(anthropicStream, "\n", "\r"), output, 15, true},
	{"sse mixed line ends", []string{"Content-Type", sseType}, "data: {\"usage\":\r\ndata: {\"total_tokens\":21}}\r\r", total, 21, true},
	{"sse multi-line data", []string{"Content-Type", sseType}, "data: {\"usage\":\ndata:\ndata: {\"total_tokens\":\ndata: 21}}\n\n", total, 21, true},
	{"sse no space after colon", []string{"Content-Type", sseType}, "data:" + usageJSON("21") + "\n\n", total, 21, true},
	{"sse pending event at EOF", []string{"Content-Type", sseType}, "data: " + usageJSON("21"), total, 21, true},
	{"sse pending event at EOF after line end", []string{"Content-Type", sseType}, "data: " + usageJSON("21") + "\n", total, 21, true},
	{"sse BOM", []string{"Content-Type", sseType}, "\uFEFFdata: " + usageJSON("21") + "\n\n", total, 21, true},
	{"sse comments and other fields", []string{"Content-Type", sseType}, ": hi\nid: 1\nretry: 10\nevent: x\ndata: " + usageJSON("21") + "\n: bye\n\n", total, 21, true},
	{"sse last event wins", []string{"Content-Type", sseType}, "data: " + usageJSON("5") + "\n\ndata: " + usageJSON("21") + "\n\n", total, 21, true},
	{"sse later null changes nothing", []string{"Content-Type", sseType}, "data: " + usageJSON("21") + "\n\ndata: " + usageJSON("null") + "\n\n", total, 21, true},
	{"sse later invalid decides", []string{"Content-Type", sseType}, "data: " + usageJSON("21") + "\n\ndata: " + usageJSON(`"x"`) + "\n\n", total, 0, false},
	{"sse field name is case sensitive", []string{"Content-Type", sseType}, "Data: " + usageJSON("21") + "\n\n", total, 0, false},
	{"sse two spaces keep one", []string{"Content-Type", sseType}, "data:  " + usageJSON("21") + "\n\n", total, 21, true},
	{"sse only done", []string{"Content-Type", sseType}, "data: [DONE]\n\n", total, 0, false},
	{"sse non-JSON data", []string{"Content-Type", sseType}, "data: \"total_tokens\" 21\n\n", total, 0, false},
	{"sse field in event name only", []string{"Content-Type", sseType}, "event: {\"usage\":{\"total_tokens\":21}}\n\n", total, 0, false},
	{"sse empty", []string{"Content-Type", sseType}, "", total, 0, false},
	{"sse gzip", []string{"Content-Type", sseType, "Content-Encoding", "gzip"}, openAIStream, total, 0, false},
}

var headerCases = []watchCase{
	{"header", []string{"X-Tokens", "42"}, "hello", responsecost.Source{Header: "X-Tokens"}, 42, true},
	{"header name case", []string{"x-tokens", "42"}, "hello", responsecost.Source{Header: "X-TOKENS"}, 42, true},
	{"header wins over body", []string{"X-Tokens", "42", "Content-Type", jsonType}, usageJSON("21"), both, 42, true},
	{"header zero", []string{"X-Tokens", "0"}, "", both, 0, true},
	{"header leading zeros", []string{"X-Tokens", "00000000000000000042"}, "", both, 42, true},
	{"header MaxCost", []string{"X-Tokens", "1099511627776"}, "", both, responsecost.MaxCost, true},
	{"header MaxCost+1", []string{"X-Tokens", "1099511627777"}, "", both, 0, false},
	{"header negative", []string{"X-Tokens", "-1"}, "", both, 0, false},
	{"header plus", []string{"X-Tokens", "+1"}, "", both, 0, false},
	{"header fraction", []string{"X-Tokens", "1.0"}, "", both, 0, false},
	{"header empty", []string{"X-Tokens", ""}, "", both, 0, false},
	{"header huge", []string{"X-Tokens", strings.Repeat("9", 400)}, "", both, 0, false},
	{"header repeated", []string{"X-Tokens", "1", "X-Tokens", "1"}, "", both, 0, false},
	{"invalid header decides over body", []string{"X-Tokens", "x", "Content-Type", jsonType}, usageJSON("21"), both, 0, false},
	{"no header, body decides", []string{"Content-Type", jsonType}, usageJSON("21"), both, 21, true},
}

// TestWatch reads every case's body to its end, whole and in pieces, and checks the cost
// done got and that the bytes passed unchanged.
func TestWatch(t *testing.T) {
	for _, group := range [][]watchCase{jsonCases, sseCases, headerCases} {
		for _, tc := range group {
			for _, c := range chunkings {
				t.Run(tc.name+"/"+c.name, func(t *testing.T) {
					body := []byte(tc.body)
					if h := header(tc.h...); h.Get("Content-Encoding") == "gzip" {
						body = gzipped(t, body)
					}
					watchAll(t, header(tc.h...), body, c.wrap, tc.src).check(t, tc.cost, tc.found)
				})
			}
		}
	}
}

// gzipped is b compressed with gzip.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWatchGzipJSON: a gzip-encoded JSON body states no cost through Field, and passes
// unchanged.
func TestWatchGzipJSON(t *testing.T) {
	body := gzipped(t, []byte(usageJSON("21")))
	h := header("Content-Type", jsonType, "Content-Encoding", "gzip")
	watchAll(t, h, body, chunkings[0].wrap, total).check(t, 0, false)
}
