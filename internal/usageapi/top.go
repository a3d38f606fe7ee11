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
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// TopPath is the route of a usage overview: the callers under the most pressure.
const TopPath = "GET /v1/namespaces/{namespace}/ratelimitpolicies/{policy}/usage/top"

// Bounds of a usage overview: callers shown (n) and callers read (max).
const (
	defaultTopN, maxTopN     = 10, 100
	defaultTopMax, maxTopMax = 10_000, 100_000
	topWorkers               = 8
	topTimeout               = 30 * time.Second
)

// errNoTier is the error of an overview asked for a tier the policy does not have.
var errNoTier = errors.New("no such tier")

// topQuery is what a usage overview asks: how many callers to show and to read at most, and
// the tier to read every caller against ("": each caller's own).
type topQuery struct {
	n, max int
	tier   string
}

// top answers a usage overview (verb get, as a read): every caller holding counters of the
// policy is peeked (nothing debited) against its own tier or the one asked for, and the
// callers with the highest share of a limit used are listed by hash, with the share denied.
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
	ctx, cancel := context.WithTimeout(r.Context(), topTimeout)
	defer cancel()
	ans, err := s.overview(ctx, g, rule, q)
	if errors.Is(err, limiter.ErrNoIdentityInKeys) || errors.Is(err, errNoTier) {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		s.log.Error(err, "usage overview failed", "namespace", act.Namespace, "policy", act.Policy)
		jsonreply.Error(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.log.Info("usage overview", "user", who.GetName(), "namespace", act.Namespace, "policy", act.Policy,
		"callers", ans.Callers, "denied", ans.Denied)
	jsonreply.Write(w, http.StatusOK, ans)
}

// readTopQuery reads n, max and tier, naming a bad one.
func readTopQuery(v url.Values) (topQuery, error) {
	q := topQuery{n: defaultTopN, max: defaultTopMax, tier: v.Get("tier")}
	for name := range v {
		if name != "n" && name != "max" && name != "tier" {
			return q, fmt.Errorf("%s: unknown parameter (n, max and tier are read)", name)
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
	return q, nil
}

// overview reads every caller of rule's counters and ranks them.
func (s *Server) overview(ctx context.Context, g *engine.Engine, rule *engine.Rule, q topQuery) (usage.Top, error) {
	var asked *engine.Tier
	if q.tier != "" {
		for _, t := range rule.AllTiers() {
			if t.Name == q.tier {
				asked = t
			}
		}
		if asked == nil {
			return usage.Top{}, fmt.Errorf("tier: policy %q has no tier %q: %w", rule.Name(), q.tier, errNoTier)
		}
	}
	found, err := g.Callers(ctx, rule, q.max)
	if err != nil {
		return usage.Top{}, err
	}
	callers, err := peekAll(ctx, g, rule, asked, found.Identities)
	if err != nil {
		return usage.Top{}, err
	}
	ans := usage.Top{Policy: rule.Name(), Tier: q.tier, Callers: len(callers), Truncated: found.Truncated,
		Unreadable: found.Unreadable, Top: []usage.TopCaller{}}
	for _, c := range callers {
		if !c.Allowed {
			ans.Denied++
		}
	}
	if ans.Callers > 0 {
		ans.DeniedShare = float64(ans.Denied) / float64(ans.Callers)
	}
	slices.SortFunc(callers, func(a, b usage.TopCaller) int {
		return cmp.Or(cmp.Compare(pressure(b), pressure(a)), cmp.Compare(a.IdentityHash, b.IdentityHash))
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
	tc := usage.TopCaller{IdentityHash: snapshot.IdentityHash(id), Allowed: o.Allowed, Limits: httpcheck.UsageOf(o.State)}
	if c.Tier.Name != snapshot.DefaultTier {
		tc.Tier = c.Tier.Name
	}
	return tc, nil
}

// pressure is the highest share of a limit the caller has used.
func pressure(c usage.TopCaller) float64 {
	p := 0.0
	for _, l := range c.Limits {
		if l.Quota > 0 {
			p = max(p, float64(l.Used)/float64(l.Quota))
		}
	}
	return p
}
