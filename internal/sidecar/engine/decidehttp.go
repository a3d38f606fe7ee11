package engine

import (
	"context"
	"errors"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// ErrNoSnapshot is DecideHTTP's error before the first snapshot is known: nothing can be
// decided yet, and a front answers that it is unavailable.
var ErrNoSnapshot = errors.New("no policy snapshot loaded yet")

// DecideHTTP judges a whole HTTP request for front: it matches the snapshot in force,
// reads every matched policy's check before any is decided, then decides them in name order,
// stopping at the first denial (DecideAll). No matched policy gives no outcomes: the request
// is admitted. settles says the front settles costs from the response (Check.Settles). The
// error is ErrNoSnapshot or a *requestread.BadRequestError, and nothing was debited.
func (g *Engine) DecideHTTP(ctx context.Context, front string, r *requestread.HTTPRequest, settles bool) ([]Outcome, error) {
	set, err := g.Snapshot()
	if err != nil {
		return nil, err
	}
	rules, checks, err := set.PlanHTTP(r)
	if err != nil {
		return nil, &requestread.BadRequestError{Err: err}
	}
	for i := range checks {
		checks[i].Settles = settles
	}
	return g.DecideAll(ctx, front, rules, checks), nil
}

// Snapshot is the snapshot in force, or ErrNoSnapshot before the first one is loaded (or
// when g has no store).
func (g *Engine) Snapshot() (*Set, error) {
	if g == nil || g.Store == nil {
		return nil, ErrNoSnapshot
	}
	if set := g.Store.Current(); set != nil {
		return set, nil
	}
	return nil, ErrNoSnapshot
}
