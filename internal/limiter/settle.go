package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

const (
	// opCharge debits Amount units whether or not they fit: a settlement's cost beyond its
	// reservation. Windows count past the limit until the window ends; a token bucket or
	// GCRA spends a grant's credit first, then empties at most.
	opCharge Op = "charge"
	// opUnreserve gives back Amount units of a reservation a settlement did not use: a
	// refund, except that a window gives back only while the window the reservation was
	// counted in lasts (FixedWindow: it is current; SlidingWindow: current or previous).
	opUnreserve Op = "unreserve"
)

// SettleRecordTTL is how long a settlement's request id is remembered: a settlement retried
// within it applies once. Shorter than AdjustRecordTTL: a settlement is retried within
// seconds, and there is one per request.
const SettleRecordTTL = 10 * time.Minute

// Settlement replaces a request's reservation (the cost its admission debited) with the
// cost its response stated.
type Settlement struct {
	// Identity is the caller, as the admission's check named it.
	Identity string
	// Reserved is the cost the admission debited (1 to MaxAdjustAmount).
	Reserved int64
	// Cost is the cost the response stated (0 to MaxAdjustAmount).
	Cost int64
	// RequestID makes the settlement idempotent: retried under the same id within
	// SettleRecordTTL it applies once. Required. Its record is apart from adjustments': an
	// adjustment's id never replays a settlement's.
	RequestID string
	// Since is how long ago the reservation was taken, measured from before the admission's
	// call, so that a window gives back nothing once the window it was counted in has ended.
	Since time.Duration
}

// Validate says what is wrong with s, naming the field.
func (s Settlement) Validate() error {
	switch {
	case s.Reserved < 1 || s.Reserved > MaxAdjustAmount:
		return fmt.Errorf("reserved: 1 to %d units, got %d", MaxAdjustAmount, s.Reserved)
	case s.Cost < 0 || s.Cost > MaxAdjustAmount:
		return fmt.Errorf("cost: 0 to %d units, got %d", MaxAdjustAmount, s.Cost)
	case s.RequestID == "":
		return errors.New("requestId: required, so that a retried settlement applies once")
	case len(s.RequestID) > 256:
		return fmt.Errorf("requestId: at most 256 bytes, got %d", len(s.RequestID))
	case s.Since < 0:
		return fmt.Errorf("since: %v is before the settlement", s.Since)
	}
	return nil
}

// Settle settles s on p atomically, in one script call per hash tag, idempotent by
// s.RequestID: a cost above the reservation debits the difference on every limit whether
// or not it fits (the caller goes past its limit and is denied until it refills or its
// window ends; a token bucket or GCRA empties at most); a cost below it gives the
// difference back, never more than the limit holds when full, and on a window only while
// the window the reservation was counted in lasts. A cost equal to the reservation
// changes nothing and calls nothing: the answer has no Limits.
func (l *Limiter) Settle(ctx context.Context, p *Policy, s Settlement) (Adjusted, error) {
	if err := s.Validate(); err != nil {
		return Adjusted{}, err
	}
	c := adjustCall{Adjustment: Adjustment{Identity: s.Identity, RequestID: "settle\x00" + s.RequestID},
		recordTTL: SettleRecordTTL, ago: s.Since}
	switch d := s.Cost - s.Reserved; {
	case d > 0:
		c.Op, c.Amount = opCharge, d
	case d < 0:
		c.Op, c.Amount = opUnreserve, -d
	default:
		return Adjusted{}, nil
	}
	return l.apply(ctx, p, c)
}
