package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// settlesKey is the context key of the admitted outcomes whose cost the response settles.
type settlesKey struct{}

// withSettles is ctx carrying the outcomes among outs that settle from the response, if any.
func withSettles(ctx context.Context, outs []engine.Outcome) context.Context {
	var settles []*engine.Outcome
	for i := range outs {
		if outs[i].Settles() {
			settles = append(settles, &outs[i])
		}
	}
	if settles == nil {
		return ctx
	}
	return context.WithValue(ctx, settlesKey{}, settles)
}

// settler settles admissions from the upstream's responses.
type settler struct {
	engine *engine.Engine
	log    logr.Logger
}

// watch has each outcome resp's request carries settled at the cost resp states, once its
// body has ended or closed (the client may be gone), as it streams to the client unchanged.
// A response that states no cost leaves the reservation.
func (s settler) watch(resp *http.Response) {
	outs, _ := resp.Request.Context().Value(settlesKey{}).([]*engine.Outcome)
	ctx := context.WithoutCancel(resp.Request.Context())
	for _, o := range outs {
		src := o.SettleSource()
		responsecost.Watch(resp, responsecost.Source{Header: src.Header, Field: src.Field}, func(cost int64, found bool) {
			s.settle(ctx, o, cost, found)
		})
	}
}

// unforwarded settles at 0 the reservations among outs of a request that another policy
// denied: it never reached the upstream, so it cost nothing.
func (s settler) unforwarded(ctx context.Context, outs []engine.Outcome) {
	for i := range outs {
		if outs[i].Settles() {
			s.settle(ctx, &outs[i], 0, true)
		}
	}
}

// settle settles o at cost under a fresh settlement id, logging a failure (the reservation
// stands).
func (s settler) settle(ctx context.Context, o *engine.Outcome, cost int64, found bool) {
	if _, err := s.engine.Settle(ctx, FrontName, o, cost, found, settlementID()); err != nil {
		s.log.Error(err, "settlement failed: the reservation stands", "policy", o.Rule.Name(),
			"reserved", o.Reserved(), "cost", cost)
	}
}

// settlementID is a random id for one settlement: the proxy settles each response once.
func settlementID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b[:])
}
