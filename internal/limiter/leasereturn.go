package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReturnLeases gives back, in Redis, what this process's leases hold unspent, e.g. before it
// stops; the leases end. Errors are joined; a lease whose return failed is lost (units never
// spent: under-admission, never over).
func (l *Limiter) ReturnLeases(ctx context.Context) error { return l.leases.returnAll(ctx) }

// returnAll is ReturnLeases.
func (t *localTier) returnAll(ctx context.Context) error {
	type held struct {
		p *Policy
		l *lease
	}
	var all []held
	t.each(func(k denyKey, e *leaseEntry) {
		if e.cur != nil {
			all = append(all, held{k.policy, e.cur})
			e.cur = nil
		}
	})
	var errs []error
	for _, h := range all {
		if err := t.returnLease(ctx, h.p, h.l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// returnLease runs the lease script asking for nothing: prev's unspent units go back.
func (t *localTier) returnLease(ctx context.Context, p *Policy, prev *lease) error {
	keys := leaseKeys(prev.state, t.newID(), prev)
	cctx, cancel := context.WithTimeout(ctx, t.core.callTimeout())
	defer cancel()
	v, err := t.core.evalScript(cctx, p.leaseScript, keys, p.leaseArgs(0, t.opts.Share, prev, t.core.Now()))
	if err != nil {
		return fmt.Errorf("policy %s/%s: returning a lease: %w", p.Namespace, p.Name, err)
	}
	rep, err := decodeLease(p, v, "", time.Time{})
	if err != nil {
		return err
	}
	if f := t.opts.OnLease; f != nil {
		f(p, 0, rep.returned)
	}
	return nil
}
