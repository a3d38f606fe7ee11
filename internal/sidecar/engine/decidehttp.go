package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// ErrNoSnapshot is DecideHTTP's error before the first snapshot is known: nothing can be
// decided yet, and a front answers that it is unavailable.
var ErrNoSnapshot = errors.New("no policy snapshot loaded yet")

// BadRequestError is DecideHTTP's error for a request that cannot be judged (a path that
// upstreams read differently, a header sent twice, a cost out of bounds). Nothing was
// debited; a front answers 400 with Error().
type BadRequestError struct {
	// Err names the field at fault.
	Err error
}

func (e *BadRequestError) Error() string { return e.Err.Error() }

func (e *BadRequestError) Unwrap() error { return e.Err }

// ParseTarget is the normalized path and the raw query of an HTTP request target (origin
// form "/a?q", absolute form, or "*" for OPTIONS), as every front that judges whole HTTP
// requests reads it. A refused path is a BadRequestError naming the path.
func ParseTarget(method, target string) (httppath.Path, string, error) {
	_, query, _ := strings.Cut(target, "?")
	p, err := httppath.ParseTarget(method, httppath.TargetPath(target))
	if err != nil {
		return httppath.Path{}, "", &BadRequestError{Err: fmt.Errorf("path: %w", err)}
	}
	return p, query, nil
}

// DecideHTTP judges a whole HTTP request for front: it matches the snapshot in force,
// reads every matched policy's check before any is decided, then decides them in name order,
// stopping at the first denial (DecideAll). No matched policy gives no outcomes: the request
// is admitted. settles says the front settles costs from the response (Check.Settles). The
// error is ErrNoSnapshot or a *BadRequestError, and nothing was debited.
func (g *Engine) DecideHTTP(ctx context.Context, front string, r *HTTPRequest, settles bool) ([]Outcome, error) {
	set, err := g.Snapshot()
	if err != nil {
		return nil, err
	}
	rules, checks, err := set.PlanHTTP(r)
	if err != nil {
		return nil, &BadRequestError{Err: err}
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
