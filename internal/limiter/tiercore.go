package limiter

import (
	"context"
	"time"
)

// tierCore is what the local tier (leases) needs of the core limiter: its clock (and its
// estimate of the Redis server's, for calendar windows) and call
// timeout, the breaker of a key's node, what a failed call or a bad reply does, and the two
// ways of calling a script (acknowledged by the replicas, or plain). *Limiter implements it;
// the local tier holds nothing else of the core.
type tierCore interface {
	now() time.Time // this process's clock (Options.Now)
	Now() time.Time // the Redis server's, as the limiter knows it
	learnClock(server time.Time)
	callTimeout() time.Duration
	breakerFor(ctx context.Context, key string) *breaker
	failed(ctx context.Context, b *breaker, err error)
	fallback(p *Policy, r Request, cause error, b *breaker) Decision
	badReply()
	leaseRoundTrip(ctx context.Context, s *Script, keys []string, args []any, ack time.Duration) leaseRound
	evalScript(ctx context.Context, s *Script, keys []string, args []any) (any, error)
}

var _ tierCore = (*Limiter)(nil)

func (l *Limiter) now() time.Time             { return l.opts.Now() }
func (l *Limiter) callTimeout() time.Duration { return l.opts.Timeout }

// badReply counts a reply that could not be decoded, as a call error.
func (l *Limiter) badReply() { l.stats.count(KindCall) }

// evalScript runs s once on the node owning keys (EVAL after NOSCRIPT), retrying TRYAGAIN.
func (l *Limiter) evalScript(ctx context.Context, s *Script, keys []string, args []any) (any, error) {
	return evalOne(ctx, l.rdb, s, keys, args)
}
