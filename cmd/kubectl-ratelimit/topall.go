package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Bounds of --all: how often one part may be refused as too many requests before the
// plugin gives up, and how long it waits when the server names no time.
const (
	maxTopRetries    = 30
	defaultTopPacing = time.Second
)

// readAll asks for the overview part after part, passing each answer's continuation to the
// next request, until an answer is complete (or a server that gives no continuation
// answers), and returns the parts added up as one answer's JSON body. When the server
// refuses a request as one too many (429) it waits its Retry-After and asks again.
func (o *topOptions) readAll(ctx context.Context, client *usageClient, path string) ([]byte, error) {
	q := o.query()
	keep := defaultTopN
	if o.nSet {
		keep = o.n
	}
	var all *usage.Top
	for retries := 0; ; {
		body, err := client.get(ctx, path, q, http.StatusOK)
		if wait, ok := tooMany(err); ok && retries < maxTopRetries {
			retries++
			if err := sleepContext(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		retries = 0
		var part usage.Top
		if err := json.Unmarshal(body, &part); err != nil {
			return nil, fmt.Errorf("decoding the usage server's answer: %w", err)
		}
		all = addTop(all, &part, keep)
		if part.Complete || part.Continue == "" {
			break
		}
		q.Set("continue", part.Continue)
	}
	body, err := json.Marshal(all)
	if err != nil {
		return nil, fmt.Errorf("encoding the overview: %w", err)
	}
	return body, nil
}

// tooMany reports whether err is the server's 429, and how long it asked to wait.
func tooMany(err error) (time.Duration, bool) {
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusTooManyRequests {
		return 0, false
	}
	if !se.hasRetryAfter {
		return defaultTopPacing, true
	}
	return se.retryAfter, true
}

// addTop adds part to the parts read so far (nil: none): callers, denials and keys examined
// add up, the keyspace's size and whether it is complete are the latest part's, and the top
// callers of both are ranked together (a caller SCAN returned in two parts counted once),
// keep of them kept.
func addTop(sum, part *usage.Top, keep int) *usage.Top {
	if sum == nil {
		sum = &usage.Top{Policy: part.Policy, Tier: part.Tier, Top: []usage.TopCaller{}}
	}
	sum.Callers += part.Callers
	sum.Denied += part.Denied
	sum.Unreadable += part.Unreadable
	sum.Examined += part.Examined
	sum.Keys, sum.Complete, sum.Truncated, sum.Continue = part.Keys, part.Complete, part.Truncated, part.Continue
	if sum.Complete {
		sum.Examined = min(sum.Examined, sum.Keys)
	}
	sum.DeniedShare = 0
	if sum.Callers > 0 {
		sum.DeniedShare = float64(sum.Denied) / float64(sum.Callers)
	}
	top := append(slices.Clone(sum.Top), part.Top...)
	slices.SortStableFunc(top, func(a, b usage.TopCaller) int {
		return cmp.Or(cmp.Compare(b.Pressure(), a.Pressure()), cmp.Compare(a.IdentityHash, b.IdentityHash))
	})
	sum.Top = sum.Top[:0:0]
	seen := map[string]bool{}
	for _, c := range top {
		if !seen[c.IdentityHash] && len(sum.Top) < keep {
			seen[c.IdentityHash] = true
			sum.Top = append(sum.Top, c)
		}
	}
	return sum
}

// sleepContext waits d, or until ctx ends (its error then).
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for the usage server: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
