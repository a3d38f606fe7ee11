package sidecar

import (
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Entry is one policy of a loaded snapshot, compiled for the hot path. Immutable.
type Entry struct {
	// Spec is the policy as published.
	Spec snapshot.Policy
	// Policy is the limiter's compiled form.
	Policy *limiter.Policy
	// hosts are the lower-cased Host patterns of each HTTP match entry, parallel to Spec.Match.HTTP.
	hosts [][]string
	// fingerprint identifies Spec, so a reload can reuse an unchanged entry (and its local cap).
	fingerprint string
}

// Name is the policy's name.
func (e *Entry) Name() string { return e.Spec.Name }

func newEntry(namespace string, p snapshot.Policy) (*Entry, error) {
	compiled, err := p.Compile(namespace)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	e := &Entry{Spec: p, Policy: compiled, fingerprint: fingerprint(p)}
	for _, m := range p.Match.HTTP {
		e.hosts = append(e.hosts, lowerAll(m.Hosts))
	}
	return e, nil
}
