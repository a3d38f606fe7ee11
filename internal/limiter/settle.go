package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// opSettle replaces a reservation's cost by the cost its response stated (adjust.lua): the
// difference charged when above, given back when below (a window only while the window the
// reservation was counted in lasts).
const opSettle Op = "settle"

// Bounds of a policy's settlement time (Spec.Settle).
const (
	// MinSettle is the shortest time a reservation may wait for its settlement.
	MinSettle = time.Second
	// MaxSettle is the longest.
	MaxSettle = 24 * time.Hour
	// DefaultSettle is the time a policy gives when it says nothing.
	DefaultSettle = 10 * time.Minute
)

// SettledRecordTTL is how long a settled reservation's record stays, so that a settlement
// retried within it (its reply lost) gets the first reply back. Past it the record is gone
// and a retry finds no reservation: nothing is applied twice either way, since a
// settlement consumes its reservation. One record per request, so short.
const SettledRecordTTL = time.Minute

// ErrNoReservation is the error of a settlement that names no reservation of its caller and
// policy: never made (or made for another caller, policy or tier), expired (Spec.Settle
// after its admission), or settled more than SettledRecordTTL ago.
var ErrNoReservation = errors.New("no such reservation: never made for this caller and policy, expired, or settled over a minute ago")

// ReservationIDLength is the length of a reservation id: NewID's.
const ReservationIDLength = 32

// Settlement replaces a reservation (the cost an admission debited, recorded by Reserve)
// with the cost its response stated.
type Settlement struct {
	// Identity is the caller, as the admission's check named it.
	Identity string
	// Reservation is the id Reserve recorded the admission's cost under.
	Reservation string
	// Cost is the cost the response stated (0 to MaxAdjustAmount).
	Cost int64
}

// Settled is the answer to a settlement: what it did to each limit, and the cost the
// reservation held.
type Settled struct {
	Adjusted
	// Reserved is the cost the reservation held: Cost above it was charged, below it given
	// back.
	Reserved int64
}

// Validate says what is wrong with s, naming the field.
func (s Settlement) Validate() error {
	switch {
	case s.Cost < 0 || s.Cost > MaxAdjustAmount:
		return fmt.Errorf("cost: 0 to %d units, got %d", MaxAdjustAmount, s.Cost)
	case !IsID(s.Reservation):
		return fmt.Errorf("reservation: %d hexadecimal digits, as the admission's answer gave it", ReservationIDLength)
	}
	return nil
}

// IsID reports whether s has the shape of an id NewID makes: 32 lowercase hexadecimal
// digits.
func IsID(s string) bool {
	if len(s) != ReservationIDLength {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkSettle says what is wrong with c's settlement time, naming the field.
func checkSettle(c Spec) FieldErrors {
	var errs FieldErrors
	if c.Settle == 0 {
		return nil
	}
	if c.Settle < MinSettle || c.Settle > MaxSettle || c.Settle%time.Millisecond != 0 {
		errs.add("cost.settle.timeout", "%s is not a whole number of ms from %s to %s", c.Settle, MinSettle, MaxSettle)
	}
	if c.Shards > 1 {
		errs.add("cost.settle", "cannot be combined with hotKeys.shards: a settlement consumes its reservation and changes the counters in one call, on one hash tag")
	}
	return errs
}

// Reserve records that an admission of identity under p debited cost, since the given time
// before now (measured from before its check began), and returns the reservation's id: the
// one thing a settlement (Settle) names. The record lives p.Settle; a settlement after that
// finds none, and the reservation stands. A policy without Settle records nothing.
func (l *Limiter) Reserve(ctx context.Context, p *Policy, identity string, cost int64, since time.Duration) (string, error) {
	if p.Settle == 0 {
		return "", fmt.Errorf("policy %s/%s settles no cost", p.Namespace, p.Name)
	}
	if cost < 1 || cost > MaxAdjustAmount {
		return "", fmt.Errorf("cost: 1 to %d units, got %d", MaxAdjustAmount, cost)
	}
	id := NewID()
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s := reserveScript
	if p.Functions {
		s = s.asFunction()
	}
	args := []any{strconv.FormatInt(cost, 10), strconv.FormatInt(max(0, since.Microseconds()), 10),
		strconv.FormatInt(p.Settle.Milliseconds(), 10)}
	v, err := evalOne(ctx, l.rdb, s, []string{settleRecordKey(p.Keys(identity, "")[0], id)}, args)
	if err != nil {
		return "", fmt.Errorf("reserve on policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	if n, ok := v.(int64); !ok || n != 1 {
		return "", fmt.Errorf("script %s: reservation %s not recorded: reply %v", s.Name, id, v)
	}
	return id, nil
}

// settleRecordKey is the record of reservation id: stateKey, the first state key of the
// caller under the policy (so the same hash tag, within the policy's key scope), then
// ":settle:", then the id.
func settleRecordKey(stateKey, id string) string {
	return stateKey + ":settle:" + id
}

// Settle settles s on p atomically, in one script call that consumes the reservation s
// names: a cost above it debits the difference on every limit whether or not it fits (the
// caller goes past its limit and is denied until it refills or its window ends; a token
// bucket or GCRA empties at most); a cost below it gives the difference back, never more
// than the limit holds when full, and on a window only while the window the reservation
// was counted in lasts (by the Redis clock, from the reservation's record). A settlement
// retried with the same cost within SettledRecordTTL gets its first reply back
// (Replayed); with another cost it is refused (ErrAdjustReused); a reservation never
// recorded for this caller and policy, expired or settled long ago is ErrNoReservation.
func (l *Limiter) Settle(ctx context.Context, p *Policy, s Settlement) (Settled, error) {
	if err := s.Validate(); err != nil {
		return Settled{}, err
	}
	if p.Settle == 0 {
		return Settled{}, fmt.Errorf("policy %s/%s settles no cost", p.Namespace, p.Name)
	}
	keys := p.Keys(s.Identity, "")
	keys = append(keys, settleRecordKey(keys[0], s.Reservation))
	a := Adjustment{Op: opSettle, Identity: s.Identity, Amount: s.Cost, RequestID: s.Reservation}
	v, err := l.runAdjust(ctx, p, keys, a, SettledRecordTTL)
	if err != nil {
		if strings.Contains(err.Error(), "no such reservation") {
			return Settled{}, fmt.Errorf("reservation: %w", ErrNoReservation)
		}
		return Settled{}, err
	}
	out, reserved, err := decodeAdjusted(p, v)
	return Settled{Adjusted: out, Reserved: reserved}, err
}
