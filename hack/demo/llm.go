package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

//go:embed demo-llm.yaml
var demoLLM []byte

// llmAnswer answers /llm as an OpenAI-style streamed chat completion: four content events
// 150 ms apart (a slow call), then the usage, total_tokens being X-Demo-Tokens (default 100),
// then [DONE].
func llmAnswer(w http.ResponseWriter, r *http.Request) {
	tokens, err := strconv.Atoi(r.Header.Get("X-Demo-Tokens"))
	if err != nil {
		tokens = 100
	}
	w.Header().Set("Content-Type", "text/event-stream")
	f, _ := w.(http.Flusher)
	for i := range 4 {
		time.Sleep(150 * time.Millisecond)
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"word%d \"}}]}\n\n", i)
		if f != nil {
			f.Flush()
		}
	}
	_, _ = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
		tokens-10, tokens)
}

// llm applies demo-llm and shows both halves of it: a token budget spent by what the
// answers report rather than what the calls reserved (and the call that overran it
// charged), then 3 calls of one key at once against a limit of 2 in flight.
func (d *demo) llm(ctx context.Context) error {
	d.step("LLM route: kubectl apply demo-llm, 1000 tokens a day settled from each streamed answer's usage, 2 calls in flight per key")
	if out, err := d.kubectl(ctx, demoLLM, "apply", "-n", d.opts.namespace, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply demo-llm: %w\n%s", err, out)
	}
	if err := d.waitForPolicy(ctx, "/llm", "demo-llm/tokens"); err != nil {
		return err
	}
	if err := d.llmBudget(ctx); err != nil {
		return err
	}
	return d.llmInFlight(ctx)
}

// llmBudget spends lena's budget: 3 calls reserving 300 each whose answers report 120, 150
// and 90 tokens (360 used, not 900), then one reporting 700 (charged past the budget: a peek
// reads all 1000 used), then a refused call. After each call a peek of the check API reads
// the tokens used.
func (d *demo) llmBudget(ctx context.Context) error {
	var used []int64
	for _, tokens := range []int{120, 150, 90, 700} {
		a, err := d.send(ctx, http.MethodPost, "/llm/v1/chat/completions", "X-API-Key", "lena", "X-Demo-Tokens", strconv.Itoa(tokens))
		if err != nil {
			return err
		}
		if a.code != http.StatusOK {
			return fmt.Errorf("a call reporting %d tokens: %s, want 200", tokens, a)
		}
		n, err := d.tokensUsed(ctx, "lena")
		if err != nil {
			return err
		}
		used = append(used, n)
	}
	last, err := d.send(ctx, http.MethodPost, "/llm/v1/chat/completions", "X-API-Key", "lena", "X-Max-Tokens", "100")
	if err != nil {
		return err
	}
	d.say("4 streamed calls as lena, each reserving 300 tokens, answers reporting 120, 150, 90 and 700: tokens used after each %v of 1000", used)
	d.say("a 5th call reserving 100: %s", last)
	if !slices.Equal(used, []int64{120, 270, 360, 1000}) || last.code != http.StatusTooManyRequests {
		return fmt.Errorf("demo-llm: used %v then %s, want 120, 270, 360, 1000 then a 429", used, last)
	}
	d.done("LLM budget: tokens settled from streamed answers (120, 270, 360 used, then the 700-token overrun charged past 1000), the next call refused")
	return nil
}

// tokensUsed is what lena (identity) has used of demo-llm's tokens, by a peek of the
// sidecar's check API (which debits nothing).
func (d *demo) tokensUsed(ctx context.Context, identity string) (int64, error) {
	resp, err := d.checkAPI(ctx, `{"policy":"demo-llm","identity":"`+identity+`","peek":true}`)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var peek struct {
		Limits []struct {
			Used int64 `json:"used"`
		} `json:"limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&peek); err != nil || len(peek.Limits) == 0 {
		return 0, fmt.Errorf("peek of demo-llm: %d, %w", resp.StatusCode, err)
	}
	return peek.Limits[0].Used, nil
}

// llmInFlight sends 3 calls of max at once (each answer takes 600 ms): 2 admitted, the third
// refused by the in-flight limit; once they end, the next call is admitted.
func (d *demo) llmInFlight(ctx context.Context) error {
	codes := make([]answer, 3)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 100 * time.Millisecond) // in order, while the first still streams
			codes[i], _ = d.send(ctx, http.MethodPost, "/llm/v1/chat/completions", "X-API-Key", "max", "X-Max-Tokens", "10", "X-Demo-Tokens", "10")
		}()
	}
	wg.Wait()
	after, err := d.send(ctx, http.MethodPost, "/llm/v1/chat/completions", "X-API-Key", "max", "X-Max-Tokens", "10", "X-Demo-Tokens", "10")
	if err != nil {
		return err
	}
	d.say("3 calls as max at once: %d, %d, %d (%s); after they ended: %d", codes[0].code, codes[1].code, codes[2].code, codes[2].body, after.code)
	if codes[0].code != http.StatusOK || codes[1].code != http.StatusOK || codes[2].code != http.StatusTooManyRequests || after.code != http.StatusOK {
		return fmt.Errorf("demo-llm in flight: %v then %s, want 200, 200, 429, then 200", codes, after)
	}
	d.done("LLM concurrency: 2 in flight per key, the 3rd call at once refused, admitted again once they ended")
	return nil
}
