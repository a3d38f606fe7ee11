// Package llmstub is an upstream that answers like an OpenAI-style chat completion API, for
// tests and the demo of costs settled from the response: it reports the tokens a call used
// in "usage", in a JSON body or, streamed as text/event-stream, in the last data event
// before "data: [DONE]".
package llmstub

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// PromptTokens is the prompt_tokens every answer reports.
const PromptTokens = 10

// Header names of a request to the stub.
const (
	// TokensHeader says how many completion tokens the answer uses (default 20).
	TokensHeader = "X-Stub-Completion-Tokens"
	// StreamHeader, "true", streams the answer as text/event-stream.
	StreamHeader = "X-Stub-Stream"
	// NoUsageHeader, "true", leaves usage out of the answer.
	NoUsageHeader = "X-Stub-No-Usage"
)

// Handler is the stub. The zero value answers at once.
type Handler struct {
	// Delay is the pause before each streamed event (and before a JSON answer).
	Delay time.Duration
	// Events is how many content events a streamed answer sends before its usage (default 4).
	Events int
	// Served counts the answers begun.
	Served atomic.Int64
	// Tokens sums the total_tokens of the answers that reported usage.
	Tokens atomic.Int64
}

// ServeHTTP answers one call.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Served.Add(1)
	completion := int64(20)
	if v := r.Header.Get(TokensHeader); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, TokensHeader+": not a whole number", http.StatusBadRequest)
			return
		}
		completion = n
	}
	usage := ""
	if r.Header.Get(NoUsageHeader) != "true" {
		usage = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`,
			PromptTokens, completion, PromptTokens+completion)
		h.Tokens.Add(PromptTokens + completion)
	}
	if r.Header.Get(StreamHeader) == "true" {
		h.stream(w, usage)
		return
	}
	time.Sleep(h.Delay)
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"}}]%s}`, usage)
}

// stream sends the answer as events, each flushed: content deltas, the usage, [DONE].
func (h *Handler) stream(w http.ResponseWriter, usage string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	send := func(data string) {
		time.Sleep(h.Delay)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		if f != nil {
			f.Flush()
		}
	}
	events := h.Events
	if events == 0 {
		events = 4
	}
	for i := range events {
		send(fmt.Sprintf(`{"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word%d "}}]}`, i))
	}
	if usage != "" {
		send(`{"id":"cmpl-1","object":"chat.completion.chunk","choices":[]` + usage + `}`)
	}
	send("[DONE]")
}
