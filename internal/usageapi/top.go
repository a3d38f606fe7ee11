package usageapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Bounds of a usage overview: callers shown (n) and callers read (max; the Redis budget of
// budget.go stops it sooner when the server holds many keys), and its time in all.
const (
	defaultTopN, maxTopN     = 10, 100
	defaultTopMax, maxTopMax = 10_000, 100_000
	topWorkers               = 4
	topTimeout               = 10 * time.Second
)

// errNoTier is the error of an overview asked for a tier the policy does not have.
var errNoTier = errors.New("no such tier")

// topQuery is what a usage overview asks: how many callers to show and to read at most, the
// tier to read every caller against ("": each caller's own), and where to go on from.
type topQuery struct {
	n, max int
	tier   string
	at     limiter.ScanPosition
}

// top answers a usage overview (verb get, as a read): the callers holding counters of the
// policy in the part of the keyspace one overview's Redis budget covers are peeked (nothing
// debited) against their own tier or the one asked for, and the callers with the highest
// share of a limit used are listed by hash, with the share denied. Overviews are bounded per
// reader and in all (gate.go); beyond the bounds the answer is 429 with Retry-After.
func (s *Server) top(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.open(w, r, "get")
	if !ok {
		return
	}
	act, who, g := sc.act, sc.who, sc.engine
	q, err := readTopQuery(r.URL.Query())
	if err != nil {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	rule := sc.set.Rule(act.Policy)
	if rule == nil {
		jsonreply.Error(w, http.StatusNotFound, fmt.Sprintf("policy: no policy %q in namespace %q", act.Policy, act.Namespace))
		return
	}
	asked, err := tierNamed(rule, q.tier)
	if err != nil {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	done, refused := s.gate.enter(who.GetName())
	if refused != nil {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(refused.retryAfter), 10))
		jsonreply.Error(w, http.StatusTooManyRequests, "usage overview: "+refused.why)
		return
	}
	defer done()
	ctx, cancel := context.WithTimeout(r.Context(), topTimeout)
	defer cancel()
	ans, err := s.overview(ctx, g, rule, asked, q)
	if err != nil {
		s.overviewFailed(w, act, err)
		return
	}
	s.log.Info("usage overview", "user", who.GetName(), "namespace", act.Namespace, "policy", act.Policy,
		"callers", ans.Callers, "denied", ans.Denied, "complete", ans.Complete, "examined", ans.Examined, "keys", ans.Keys)
	jsonreply.Write(w, http.StatusOK, ans)
}

// overviewFailed answers an overview that could not be read: 400 for a continuation naming
// a primary Redis lacks and for a policy whose keys name no identity, else 503 (Redis could
// not be asked).
func (s *Server) overviewFailed(w http.ResponseWriter, act Action, err error) {
	switch {
	case errors.Is(err, limiter.ErrScanPosition):
		jsonreply.Error(w, http.StatusBadRequest, fmt.Sprintf("continue: %v: not a position of this server, or Redis's "+
			"primaries changed since it was given; start again without it", err))
	case errors.Is(err, limiter.ErrNoIdentityInKeys):
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
	default:
		s.log.Error(err, "usage overview failed", "namespace", act.Namespace, "policy", act.Policy)
		jsonreply.Error(w, http.StatusServiceUnavailable, err.Error())
	}
}

// readTopQuery reads n, max, tier and continue, naming a bad one.
func readTopQuery(v url.Values) (topQuery, error) {
	q := topQuery{n: defaultTopN, max: defaultTopMax, tier: v.Get("tier")}
	for name := range v {
		switch name {
		case "n", "max", "tier", "continue":
		default:
			return q, fmt.Errorf("%s: unknown parameter (n, max, tier and continue are read)", name)
		}
	}
	for _, f := range []struct {
		name  string
		to    *int
		limit int
	}{{"n", &q.n, maxTopN}, {"max", &q.max, maxTopMax}} {
		if s := v.Get(f.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > f.limit {
				return q, fmt.Errorf("%s: %q is not a whole number from 1 to %d", f.name, s, f.limit)
			}
			*f.to = n
		}
	}
	if c, ok := v["continue"]; ok {
		at, err := decodeContinuation(c[0])
		if err != nil || len(c) > 1 {
			return q, fmt.Errorf("continue: %w", errBadContinuation)
		}
		q.at = at
	}
	return q, nil
}

// tierNamed is rule's tier named name, nil for "" (each caller's own), or errNoTier.
func tierNamed(rule *engine.Rule, name string) (*engine.Tier, error) {
	if name == "" {
		return nil, nil
	}
	for _, t := range rule.AllTiers() {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("tier: policy %q has no tier %q: %w", rule.Name(), name, errNoTier)
}

// overview reads the callers of rule's counters in the part of the keyspace from q.at that
// the budget covers, against asked (nil: each caller's own tier), and ranks them.
func (s *Server) overview(ctx context.Context, g *engine.Engine, rule *engine.Rule, asked *engine.Tier, q topQuery) (usage.Top, error) {
	found, err := scanWithin(ctx, g, rule, q.at, q.max, peekMicros(rule, asked))
	if err != nil {
		return usage.Top{}, err
	}
	callers, err := peekAll(ctx, g, rule, asked, found.identities)
	if err != nil {
		return usage.Top{}, err
	}
	keys, err := g.KeyCount(ctx)
	if err != nil {
		return usage.Top{}, err
	}
	ans := usage.Top{Policy: rule.Name(), Tier: q.tier, Callers: len(callers), Complete: found.done, Truncated: !found.done,
		Examined: min(found.examined, keys), Keys: keys, Unreadable: found.unreadable, Top: []usage.TopCaller{}}
	if !found.done {
		ans.Continue = encodeContinuation(found.next)
	}
	for _, c := range callers {
		if !c.Allowed {
			ans.Denied++
		}
	}
	if ans.Callers > 0 {
		ans.DeniedShare = float64(ans.Denied) / float64(ans.Callers)
	}
	slices.SortFunc(callers, func(a, b usage.TopCaller) int {
		return cmp.Or(cmp.Compare(b.Pressure(), a.Pressure()), cmp.Compare(a.IdentityHash, b.IdentityHash))
	})
	ans.Top = append(ans.Top, callers[:min(q.n, len(callers))]...)
	return ans, nil
}

// peekAll peeks each identity at cost 1, topWorkers at a time, against asked or its own tier.
func peekAll(ctx context.Context, g *engine.Engine, rule *engine.Rule, asked *engine.Tier, ids []string) ([]usage.TopCaller, error) {
	out := make([]usage.TopCaller, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, topWorkers)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = peekCaller(ctx, g, rule, asked, id)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first: with Redis away, every peek fails alike
		}
	}
	return out, nil
}

// peekCaller peeks one identity at cost 1.
func peekCaller(ctx context.Context, g *engine.Engine, rule *engine.Rule, asked *engine.Tier, id string) (usage.TopCaller, error) {
	c := engine.Check{Identity: id, HasIdentity: true, Cost: 1, Peek: true, Tier: asked}
	if asked == nil {
		t, err := rule.CallerTier(&c, func() (*engine.Tier, error) { return rule.Default(), nil })
		if err != nil {
			return usage.TopCaller{}, err
		}
		c.Tier = t
	}
	o := g.Decide(ctx, FrontName, rule, c)
	if o.Decision.WithoutRedis() {
		return usage.TopCaller{}, fmt.Errorf("redis could not be asked: %w", o.Decision.Err)
	}
	tc := usage.TopCaller{IdentityHash: snapshot.IdentityHash(id), Allowed: o.Allowed, Limits: checkwire.UsageOf(o.State)}
	if c.Tier.Name != snapshot.DefaultTier {
		tc.Tier = c.Tier.Name
	}
	return tc, nil
}
