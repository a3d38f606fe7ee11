package limiter

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// Callers are the identities that hold counters of a policy now, as Limiter.Callers finds
// them.
type Callers struct {
	// Identities are the callers found, each once (for a sharded policy, the identity the
	// shards split), at most the bound asked for.
	Identities []string
	// Truncated is true when the scan stopped at the bound: more callers hold counters.
	Truncated bool
	// Unreadable counts keys whose identity is stored only as a digest (an identity of over
	// keylayout.MaxEncodedLen bytes of key text), which no read can name.
	Unreadable int
}

// ErrNoIdentityInKeys is the error of listing the callers of a policy whose key template
// names no identity: every caller shares its counters.
var ErrNoIdentityInKeys = errors.New("its key template names no ${identity}: every caller shares its counters")

// scanCount is the COUNT hint of each SCAN call.
const scanCount = 1000

// shardSuffix is what a shard appends to the identity it splits (see shardSet.identities).
var shardSuffix = regexp.MustCompile(`~[0-9]+$`)

// Callers lists the identities holding state keys of p's first limit, by SCAN with a MATCH
// pattern on every primary: O(keys on the server) per call, read-only, bounded to at most max
// identities (the scan stops there). It reads keys only: an idle caller whose keys expired is
// not one.
func (l *Limiter) Callers(ctx context.Context, p *Policy, max int) (Callers, error) {
	pat, ok := p.state.IdentityPattern(keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Limit: p.Limits[0].Name})
	if !ok {
		return Callers{}, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, ErrNoIdentityInKeys)
	}
	out := Callers{}
	seen := map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pat.Match, scanCount).Iterator()
		for it.Next(ctx) {
			enc, ok := pat.Identity(it.Val())
			if !ok {
				continue
			}
			id, ok := keylayout.DecodeValue(enc)
			if !ok {
				out.Unreadable++
				continue
			}
			if p.shards != nil {
				id = shardSuffix.ReplaceAllString(id, "")
			}
			if seen[id] {
				continue
			}
			if len(out.Identities) == max {
				out.Truncated = true
				return nil
			}
			seen[id] = true
			out.Identities = append(out.Identities, id)
		}
		return it.Err()
	}
	var err error
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		err = eachPrimary(ctx, c, scan, &out)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("listing callers needs a standalone, Sentinel or Cluster client, got %T", l.rdb)
	}
	if err != nil {
		return Callers{}, fmt.Errorf("policy %s/%s: scan: %w", p.Namespace, p.Name, err)
	}
	return out, nil
}

// eachPrimary runs scan on every primary of c in turn, until one fails or out is truncated.
func eachPrimary(ctx context.Context, c *redis.ClusterClient, scan func(context.Context, *redis.Client) error, out *Callers) error {
	var mu sync.Mutex
	var primaries []*redis.Client
	if err := c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { // concurrently
		mu.Lock()
		defer mu.Unlock()
		primaries = append(primaries, n)
		return nil
	}); err != nil {
		return err
	}
	for _, n := range primaries {
		if err := scan(ctx, n); err != nil || out.Truncated {
			return err
		}
	}
	return nil
}
