package limiter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// ScanPosition is where a listing of a policy's callers stands: the primary being scanned,
// by its place among the primaries in address order (0 on standalone and Sentinel), and that
// primary's SCAN cursor. The zero value is the beginning. A position is only a place in the
// keyspace: any position a client hands back reads the same policy's keys, no others.
type ScanPosition struct {
	// Primary is the primary being scanned.
	Primary int
	// Cursor is its SCAN cursor (0: its first call).
	Cursor uint64
}

// CallersStep is what one SCAN call found of a policy's callers.
type CallersStep struct {
	// Identities are the callers whose state keys the call returned, each once in the step
	// (for a sharded policy, the identity the shards split). A later step may return one
	// again: SCAN returns a key twice when Redis resized its table in between.
	Identities []string
	// Unreadable counts keys whose identity is stored only as a digest (an identity of over
	// keylayout.MaxEncodedLen bytes of key text), which no read can name.
	Unreadable int
	// Next is where the following step starts; the zero position when Done.
	Next ScanPosition
	// Done is true when this step ended the scan of the last primary.
	Done bool
}

// ErrNoIdentityInKeys is the error of listing the callers of a policy whose key template
// names no identity: every caller shares its counters.
var ErrNoIdentityInKeys = errors.New("its key template names no ${identity}: every caller shares its counters")

// ErrScanPosition is the error of a scan position naming a primary Redis does not have (a
// made-up position, or one from before the primaries changed).
var ErrScanPosition = errors.New("no such scan position")

// shardSuffix is what a shard appends to the identity it splits (see shardSet.identities).
var shardSuffix = regexp.MustCompile(`~[0-9]+$`)

// CallersStep runs one SCAN of count keys (COUNT count, with a MATCH pattern on the state
// keys of p's first limit) at position at, and names the callers the keys it returned
// belong to. The work Redis does is about count keys examined, whatever the keyspace holds,
// so a caller bounds a listing by the steps it takes. It reads keys only: an idle caller
// whose keys expired is not one.
func (l *Limiter) CallersStep(ctx context.Context, p *Policy, at ScanPosition, count int) (CallersStep, error) {
	pat, ok := p.state.IdentityPattern(keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Limit: p.Limits[0].Name})
	if !ok {
		return CallersStep{}, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, ErrNoIdentityInKeys)
	}
	nodes, err := l.primaryClients(ctx)
	if err != nil {
		return CallersStep{}, fmt.Errorf("policy %s/%s: list the primaries: %w", p.Namespace, p.Name, err)
	}
	if at.Primary < 0 || at.Primary >= len(nodes) {
		return CallersStep{}, fmt.Errorf("primary %d of %d: %w", at.Primary, len(nodes), ErrScanPosition)
	}
	keys, cursor, err := nodes[at.Primary].Scan(ctx, at.Cursor, pat.Match, int64(max(count, 1))).Result()
	if err != nil {
		return CallersStep{}, fmt.Errorf("policy %s/%s: scan: %w", p.Namespace, p.Name, err)
	}
	step := CallersStep{Next: ScanPosition{Primary: at.Primary, Cursor: cursor}}
	if cursor == 0 {
		step.Next = ScanPosition{Primary: at.Primary + 1}
		if step.Done = step.Next.Primary == len(nodes); step.Done {
			step.Next = ScanPosition{}
		}
	}
	seen := map[string]bool{}
	for _, key := range keys {
		enc, ok := pat.Identity(key)
		if !ok {
			continue
		}
		id, ok := keylayout.DecodeValue(enc)
		if !ok {
			step.Unreadable++
			continue
		}
		if p.shards != nil {
			id = shardSuffix.ReplaceAllString(id, "")
		}
		if !seen[id] {
			seen[id] = true
			step.Identities = append(step.Identities, id)
		}
	}
	return step, nil
}

// KeyCount is how many keys Redis holds in the client's database, summed over the
// primaries. It reads INFO keyspace, not DBSIZE, so that the manager's Redis user needs no
// grant beyond the +info its memory checks have.
func (l *Limiter) KeyCount(ctx context.Context) (int64, error) {
	nodes, err := l.primaryClients(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the primaries: %w", err)
	}
	var n int64
	for _, c := range nodes {
		info, err := c.Info(ctx, "keyspace").Result()
		if err != nil {
			return 0, fmt.Errorf("info keyspace: %w", err)
		}
		keys, err := keysOf(info, c.Options().DB)
		if err != nil {
			return 0, err
		}
		n += keys
	}
	return n, nil
}

// keysOf is the keys of database db in an INFO keyspace reply ("db0:keys=12,expires=3,...");
// 0 when the database holds none (it is not listed).
func keysOf(info string, db int) (int64, error) {
	prefix := "db" + strconv.Itoa(db) + ":"
	for line := range strings.SplitSeq(info, "\n") {
		fields, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("info keyspace: %q: %w", line, err)
				}
				return n, nil
			}
		}
		return 0, fmt.Errorf("info keyspace: no keys= in %q", line)
	}
	return 0, nil
}

// PeekCalls is how many script calls one Peek of p makes: one per shard.
func (p *Policy) PeekCalls() int {
	if p.shards == nil {
		return 1
	}
	return len(p.shards.parts)
}

// primaryClients are the clients of the primaries in address order: the one client on
// standalone and Sentinel, every primary's on Cluster.
func (l *Limiter) primaryClients(ctx context.Context) ([]*redis.Client, error) {
	switch c := l.rdb.(type) {
	case *redis.Client:
		return []*redis.Client{c}, nil
	case *redis.ClusterClient:
		var mu sync.Mutex
		var nodes []*redis.Client
		if err := c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { // concurrently
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return nil
		}); err != nil {
			return nil, err
		}
		slices.SortFunc(nodes, func(a, b *redis.Client) int { return cmp.Compare(a.Options().Addr, b.Options().Addr) })
		return nodes, nil
	}
	return nil, fmt.Errorf("listing callers needs a standalone, Sentinel or Cluster client, got %T", l.rdb)
}
