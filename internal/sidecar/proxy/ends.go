package proxy

import (
	"context"
	"net/http"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// endsKey is the context key of the admitted outcomes whose request's end matters: a cost
// the response settles (Outcome.Settles), a concurrency slot to give back
// (Outcome.HoldsSlot).
type endsKey struct{}

// withEnds is ctx carrying the outcomes among outs whose request's end matters, if any.
func withEnds(ctx context.Context, outs []engine.Outcome) context.Context {
	var ends []*engine.Outcome
	for i := range outs {
		if outs[i].Settles() || outs[i].HoldsSlot() {
			ends = append(ends, &outs[i])
		}
	}
	if ends == nil {
		return ctx
	}
	return context.WithValue(ctx, endsKey{}, ends)
}

// ender settles costs and gives back slots when requests end.
type ender struct {
	engine *engine.Engine
	log    logr.Logger
}

// watch has each outcome resp's request carries settled at the cost resp states, and its
// slot given back, once the body has ended or closed (the client may be gone), as it
// streams to the client unchanged. A response that states no cost leaves the reservation.
func (e ender) watch(resp *http.Response) {
	outs, _ := resp.Request.Context().Value(endsKey{}).([]*engine.Outcome)
	ctx := context.WithoutCancel(resp.Request.Context())
	for _, o := range outs {
		var src responsecost.Source // none: the end of the body only
		if o.Settles() {
			s := o.SettleSource()
			src = responsecost.Source{Header: s.Header, Field: s.Field}
		}
		responsecost.Watch(resp, src, func(cost int64, found bool) { e.end(ctx, o, cost, found) })
	}
}

// ended ends every request outcome among outs whose end matters at cost (found false: no
// cost known, the reservation stands).
func (e ender) ended(ctx context.Context, outs []*engine.Outcome, cost int64, found bool) {
	for _, o := range outs {
		e.end(ctx, o, cost, found)
	}
}

// unforwarded ends the admissions among outs of a request another policy denied: it never
// reached the upstream, so it cost nothing and holds no slot.
func (e ender) unforwarded(ctx context.Context, outs []engine.Outcome) {
	for i := range outs {
		e.end(ctx, &outs[i], 0, true)
	}
}

// end settles o at cost under a fresh settlement id (the proxy settles each response once) and gives back its slot, logging what
// failed (the reservation stands; the slot comes back when it expires).
func (e ender) end(ctx context.Context, o *engine.Outcome, cost int64, found bool) {
	if _, err := e.engine.Settle(ctx, FrontName, o, cost, found); err != nil {
		e.log.Error(err, "settlement failed: the reservation stands", "policy", o.Rule.Name(),
			"reserved", o.Reserved(), "cost", cost)
	}
	if _, err := e.engine.Release(ctx, FrontName, o); err != nil {
		e.log.Error(err, "release failed: the slot comes back when it expires", "policy", o.Rule.Name())
	}
}
