package limiter

import (
	"slices"
	"time"
)

// HotIdentity is an identity this process serves from leases, for metrics.
type HotIdentity struct {
	// Namespace and Policy name the policy.
	Namespace, Policy string
	// Identity is the identity as encoded in Redis keys (at most keylayout.MaxEncodedLen
	// bytes of printable ASCII).
	Identity string
	// Rate is its checks per second at this process, as last estimated.
	Rate float64
}

// HotIdentities returns up to n identities seen hot here within the last second, hottest
// first: a bounded view for metrics, whatever the number of identities.
func (l *Limiter) HotIdentities(n int) []HotIdentity {
	now := l.opts.Now()
	var out []HotIdentity
	l.leases.each(func(k denyKey, e *leaseEntry) {
		if now.Sub(e.seen) < time.Second {
			out = append(out, HotIdentity{Namespace: k.policy.Namespace, Policy: k.policy.Name, Identity: k.identity, Rate: e.rate})
		}
	})
	slices.SortFunc(out, func(a, b HotIdentity) int { return cmpDesc(a.Rate, b.Rate) })
	return out[:min(n, len(out))]
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
