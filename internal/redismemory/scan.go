package redismemory

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// Usage is what one namespace's keys hold, as one SCAN cycle found them.
type Usage struct {
	// Keys is how many keys there are.
	Keys int64
	// Bytes is their MEMORY USAGE.
	Bytes int64
	// ForeignKeys is how many of them have no TTL: the limiter writes none such.
	ForeignKeys int64
	// ForeignBytes is their MEMORY USAGE.
	ForeignBytes int64
}

func (u *Usage) add(o Usage) {
	u.Keys += o.Keys
	u.Bytes += o.Bytes
	u.ForeignKeys += o.ForeignKeys
	u.ForeignBytes += o.ForeignBytes
}

// OtherNamespace holds keys in no namespace's scope (other applications' data sharing the
// server), and the keys of namespaces past the MaxNamespaces a cycle tracks. No namespace
// can have this name (it is no DNS label). Its keys are never foreign.
const OtherNamespace = "_other"

// sizeBatch is how many keys one pipeline sizes: it bounds how long Redis serves the
// manager in one go, between other clients' commands.
const sizeBatch = 64

// scan is one primary's SCAN cycle in progress.
type scan struct {
	cursor uint64
	usage  map[string]Usage
}

// stepResult is what one scan step did.
type stepResult struct {
	keys    int  // keys sized
	done    bool // the cycle completed: usage holds every key of the node
	missing []string
}

// step SCANs from the cursor with COUNT count, and sizes the keys returned.
func (s *scan) step(ctx context.Context, c *redis.Client, count int64, prefix string, maxNamespaces int) (stepResult, error) {
	keys, cursor, err := c.Scan(ctx, s.cursor, "", count).Result()
	if rule, ok := refused(err, RuleScan); ok {
		return stepResult{missing: []string{rule}}, nil
	}
	if err != nil {
		return stepResult{}, fmt.Errorf("SCAN: %w", err)
	}
	if s.usage == nil {
		s.usage = map[string]Usage{}
	}
	for start := 0; start < len(keys); start += sizeBatch {
		missing, err := s.size(ctx, c, keys[start:min(start+sizeBatch, len(keys))], prefix, maxNamespaces)
		if err != nil || len(missing) > 0 {
			return stepResult{missing: missing}, err
		}
	}
	s.cursor = cursor
	return stepResult{keys: len(keys), done: cursor == 0}, nil
}

// size adds keys to the cycle's usage: MEMORY USAGE and PTTL of each, pipelined. A key gone
// since SCAN is left out.
func (s *scan) size(ctx context.Context, c *redis.Client, keys []string, prefix string, maxNamespaces int) ([]string, error) {
	mem, ttl := make([]*redis.Cmd, len(keys)), make([]*redis.Cmd, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			mem[i], ttl[i] = p.Do(ctx, "MEMORY", "USAGE", k), p.Do(ctx, "PTTL", k)
		}
		return nil
	})
	if err != nil && !isRedisError(err) {
		return nil, fmt.Errorf("MEMORY USAGE, PTTL: %w", err)
	}
	var missing []string
	for i, k := range keys {
		bytes, merr := mem[i].Int64()
		pttl, terr := ttl[i].Int64()
		for _, e := range []struct {
			err  error
			rule string
		}{{merr, RuleMemoryUsage}, {terr, RulePTTL}} {
			if rule, ok := refused(e.err, e.rule); ok {
				missing = append(missing, rule)
			}
		}
		switch {
		case len(missing) > 0:
		case errors.Is(merr, redis.Nil) || pttl == -2: // expired or deleted since SCAN
		case merr != nil || terr != nil:
			return nil, fmt.Errorf("MEMORY USAGE, PTTL %q: %w", k, errors.Join(merr, terr))
		default:
			s.add(k, bytes, pttl == -1, prefix, maxNamespaces)
		}
	}
	return missingRules(missing), nil
}

// add counts one key for its namespace.
func (s *scan) add(key string, bytes int64, noTTL bool, prefix string, maxNamespaces int) {
	ns, ok := keylayout.NamespaceOf(prefix, key)
	if _, tracked := s.usage[ns]; !ok || (!tracked && len(s.usage) >= maxNamespaces) {
		ns, noTTL = OtherNamespace, false
	}
	u := s.usage[ns]
	u.add(Usage{Keys: 1, Bytes: bytes})
	if noTTL {
		u.add(Usage{ForeignKeys: 1, ForeignBytes: bytes})
	}
	s.usage[ns] = u
}
