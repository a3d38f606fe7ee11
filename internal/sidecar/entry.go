package sidecar

import (
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimit-dev/ratelimit-operator/internal/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Entry is one policy of a loaded snapshot, compiled for the hot path. Immutable.
type Entry struct {
	// Spec is the policy as published.
	Spec snapshot.Entry
	// Policy is the limiter's compiled form.
	Policy *limiter.Policy
	// hosts are the lower-cased Host patterns of each HTTP match entry, parallel to Spec.Match.HTTP.
	hosts [][]string
	// prefixes are the compiled path prefixes of each HTTP match entry, parallel to Spec.Match.HTTP.
	prefixes [][]httppath.Prefix
	// fingerprint identifies Spec, so a reload can reuse an unchanged entry (and its local cap).
	fingerprint string
	// envoyLimits are Spec.Limits as Envoy RLS reports them (envoyRateLimit), parallel to
	// Spec.Limits: built once, shared read-only by every response (marshalling does not
	// modify a message, so concurrent responses may hold the same one).
	envoyLimits []*rlsv3.RateLimitResponse_RateLimit
}

// Name is the policy's name.
func (e *Entry) Name() string { return e.Spec.Name }

func newEntry(namespace string, p snapshot.Entry) (*Entry, error) {
	compiled, err := p.Compile(namespace)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	e := &Entry{Spec: p, Policy: compiled, fingerprint: fingerprint(p)}
	for _, m := range p.Match.HTTP {
		e.hosts = append(e.hosts, lowerAll(m.Hosts))
		e.prefixes = append(e.prefixes, compilePrefixes(m.PathPrefixes))
	}
	for i := range p.Limits {
		e.envoyLimits = append(e.envoyLimits, envoyRateLimit(p.Name, &p.Limits[i]))
	}
	return e, nil
}
