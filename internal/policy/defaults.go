package policy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
)

// DefaultTag is the hash tag of the default layout with the default key prefix: one slot
// per (namespace, policy, caller).
const DefaultTag = keylayout.DefaultPrefix + "${namespace}/${policy}:${identity}"

// Tag is the hash tag of the default layout: the key prefix, then one slot per (namespace,
// policy, caller).
func (r Rules) Tag() string { return r.Prefix() + "${namespace}/${policy}:${identity}" }

// StateKey is the state key template used when keyLayout.state is omitted.
func (r Rules) StateKey() string { return "{" + r.Tag() + "}:${limit}" }

// DefaultSlotTTL is concurrency.slotTTL when the policy leaves it out (the API's default,
// for a policy stored without it).
const DefaultSlotTTL = 5 * time.Minute

// DefaultIdempotencyKey is the idempotency key template used when keyLayout.idempotency is
// omitted, with the default key prefix (see Rules.IdempotencyKey).
func DefaultIdempotencyKey(stateKey string) string { return Rules{}.IdempotencyKey(stateKey) }

// IdempotencyKey is the idempotency key template used when keyLayout.idempotency is
// omitted: the state key's hash tag (so both share a slot) and the request id.
func (r Rules) IdempotencyKey(stateKey string) string {
	tag := r.Tag()
	if t, err := keylayout.Parse(stateKey); err == nil {
		if s, ok := t.HashTag(); ok {
			tag = s
		}
	}
	return "{" + tag + "}:idem:${requestId}"
}

// Annotations recording what Default filled in, so a later edit that changes what the
// default would be (a longer period, another algorithm) re-derives it, while a value the
// user wrote is never touched. Without them a GitOps user who never wrote a TTL would have
// every period increase refused until they wrote one.
const (
	// AnnotationDefaultedStateKey holds the state key template Default chose.
	AnnotationDefaultedStateKey = "policy.ratelimit.dev/defaulted-state-key"
	// AnnotationDefaultedTTL holds the TTL Default chose.
	AnnotationDefaultedTTL = "policy.ratelimit.dev/defaulted-ttl"
)

// Default fills in what a policy may omit: a safe key layout in its namespace's scope and a
// TTL equal to the algorithm's horizon. Values the user wrote are never changed; values Default wrote earlier
// (recorded in annotations) follow the spec. The failure mode (FailOpen), cost (1) and the
// other scalar defaults come from the CRD schema.
func (r Rules) Default(p *v1alpha1.RateLimitPolicy) {
	s := &p.Spec
	if s.KeyLayout == nil {
		s.KeyLayout = &v1alpha1.KeyLayout{}
	}
	kl := s.KeyLayout
	if owned(p, AnnotationDefaultedStateKey, kl.State) {
		kl.State = r.StateKey()
		annotate(p, AnnotationDefaultedStateKey, kl.State)
	}
	if s.Idempotency != nil && kl.Idempotency == "" {
		kl.Idempotency = r.IdempotencyKey(kl.State)
	}
	if owned(p, AnnotationDefaultedTTL, ttlString(kl.TTL)) {
		if h := limiterspec.Horizon(p.Namespace, Entry(p)); h > 0 {
			kl.TTL = &metav1.Duration{Duration: roundUp(h)}
			annotate(p, AnnotationDefaultedTTL, ttlString(kl.TTL))
		}
	}
}

// owned reports whether Default may (re)write a field: it is empty, or it still holds the
// value Default recorded. A field the user changed loses its annotation.
func owned(p *v1alpha1.RateLimitPolicy, annotation, current string) bool {
	if current == "" {
		return true
	}
	recorded, ok := p.Annotations[annotation]
	if ok && recorded == current {
		return true
	}
	delete(p.Annotations, annotation)
	return false
}

func annotate(p *v1alpha1.RateLimitPolicy, key, value string) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
}

func ttlString(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	return d.Duration.String()
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
