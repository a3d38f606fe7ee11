// Package policytest builds the RateLimitPolicy every test starts from (its name does not
// shadow internal/policy), so each test spells out
// only what it changes. It imports only the API types, so the unit tests of internal/policy,
// the webhook, the controller and the snapshot can use it without an import cycle.
package policytest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Option changes the base policy New builds.
type Option func(*v1alpha1.RateLimitPolicy)

// New is a valid policy that draws no warning: ns/name, HTTP requests under /api, the caller
// identified by the X-API-Key header, TokenBucket, one limit "per-second" of 10 requests per
// second; then each option in order. It sets no key layout, failure mode or missing-identity
// handling, so the webhook (or the controller, in memory) defaults them.
func New(ns, name string, opts ...Option) *v1alpha1.RateLimitPolicy {
	p := &v1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RateLimitPolicySpec{
			Match:     v1alpha1.Match{HTTP: []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/api"}}}},
			Identity:  v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{Header("X-API-Key")}},
			Algorithm: v1alpha1.AlgorithmTokenBucket,
			Limits: []v1alpha1.Limit{{Name: "per-second", Requests: 10,
				Period: metav1.Duration{Duration: time.Second}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// TypeMeta sets apiVersion and kind, as a manifest or an admission request carries them.
func TypeMeta(p *v1alpha1.RateLimitPolicy) {
	p.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy"}
}

// Paths matches HTTP requests under the path prefixes (and any method) instead of /api.
func Paths(prefixes ...string) Option {
	return func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: prefixes}}
	}
}

// Methods restricts the HTTP match to the methods.
func Methods(methods ...v1alpha1.HTTPMethod) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Match.HTTP[0].Methods = methods }
}

// Header is an identity source reading the named request header.
func Header(name string) v1alpha1.IdentitySource {
	return v1alpha1.IdentitySource{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: name}}
}

// Sources identifies the caller by the sources, first match wins, instead of X-API-Key.
func Sources(sources ...v1alpha1.IdentitySource) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Identity.Sources = sources }
}

// OnMissing says what happens to a request without an identity.
func OnMissing(m v1alpha1.MissingIdentityAction) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Identity.OnMissing = m }
}

// Algorithm sets the algorithm.
func Algorithm(a v1alpha1.Algorithm) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Algorithm = a }
}

// Limit replaces the limit with one of requests per period.
func Limit(name string, requests int64, period time.Duration) Option {
	return func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Limits = []v1alpha1.Limit{{Name: name, Requests: requests, Period: metav1.Duration{Duration: period}}}
	}
}

// Requests sets the first limit's requests per period.
func Requests(n int64) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Requests = n }
}

// Burst sets the first limit's burst.
func Burst(n int64) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Burst = &n }
}

// FailureMode sets what the sidecar decides when Redis cannot.
func FailureMode(m v1alpha1.FailureMode) Option {
	return func(p *v1alpha1.RateLimitPolicy) { p.Spec.FailureMode = m }
}
