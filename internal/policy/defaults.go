package policy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// DefaultTag is the hash tag of the default layout: one slot per (namespace, policy, caller).
const DefaultTag = "rl:${namespace}/${policy}:${identity}"

// DefaultStateKey is the state key template used when keyLayout.state is omitted.
func DefaultStateKey(a v1alpha1.Algorithm) string {
	key := "{" + DefaultTag + "}:${limit}"
	if a == v1alpha1.AlgorithmSlidingWindow {
		key += ":${slot}"
	}
	return key
}

// DefaultIdempotencyKey is the idempotency key template used when keyLayout.idempotency is
// omitted: the state key's hash tag (so both share a slot) and the request id.
func DefaultIdempotencyKey(stateKey string) string {
	tag := DefaultTag
	if t, err := keylayout.Parse(stateKey); err == nil {
		if s, ok := t.HashTag(); ok {
			tag = s
		}
	}
	return "{" + tag + "}:idem:${requestId}"
}

// Default fills in what a policy may omit: a safe key layout and a TTL equal to the
// algorithm's horizon. Fields the user set are never changed. The failure mode (FailOpen),
// cost (1) and the other scalar defaults come from the CRD schema.
func Default(p *v1alpha1.RateLimitPolicy) {
	s := &p.Spec
	if s.KeyLayout == nil {
		s.KeyLayout = &v1alpha1.KeyLayout{}
	}
	kl := s.KeyLayout
	if kl.State == "" {
		kl.State = DefaultStateKey(s.Algorithm)
	}
	if s.Idempotency != nil && kl.Idempotency == "" {
		kl.Idempotency = DefaultIdempotencyKey(kl.State)
	}
	if kl.TTL == nil {
		if h := limiter.Horizon(limiter.Algorithm(s.Algorithm), limits(s.Limits)); h > 0 {
			kl.TTL = &metav1.Duration{Duration: roundUp(h)}
		}
	}
}

// roundUp rounds a TTL up to a whole second (or millisecond below one second), so the
// defaulted value reads well in YAML.
func roundUp(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1) / unit * unit
}
