// Package benchstore loads the benchmarks' RateLimitPolicies into a sidecar Store: compiled
// as the controller does, sealed in one snapshot naming a standalone Redis, and loaded as the
// sidecar loads a published snapshot.
package benchstore

import (
	"fmt"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Load compiles policies (defaulted already) into one sealed snapshot of namespace, each
// script listed once, and loads it into a new Store of that namespace.
func Load(namespace string, policies ...*v1alpha1.RateLimitPolicy) (*engine.Store, error) {
	s := &snapshot.Snapshot{Namespace: namespace,
		Redis: snapshot.Redis{Mode: "standalone", Addrs: []string{"127.0.0.1:6379"}}}
	scripts := map[string]bool{}
	for _, p := range policies {
		compiled, errs := (policy.Rules{}).Compile(p)
		if len(errs) > 0 {
			return nil, fmt.Errorf("compile %s: %w", p.Name, errs.ToAggregate())
		}
		e := compiled.Entry
		s.Policies = append(s.Policies, e)
		if !scripts[e.Script] {
			scripts[e.Script] = true
			s.Scripts = append(s.Scripts, snapshot.Script{Name: e.Script, SHA: e.SHA})
		}
	}
	if err := s.Seal(); err != nil {
		return nil, fmt.Errorf("seal snapshot: %w", err)
	}
	data, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot: %w", err)
	}
	store := &engine.Store{Namespace: namespace, Log: logr.Discard()}
	if err := store.Load(data, "bench"); err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	return store, nil
}
