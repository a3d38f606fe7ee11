package engine

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// PlanHTTP matches r and reads every matched rule's check (identity, cost and request id)
// before any is decided, so a bad host or an ambiguous header fails the request without
// debiting anything. checks is parallel to rules, as DecideAll takes them.
func (s *Set) PlanHTTP(r *requestread.HTTPRequest) (rules []*Rule, checks []Check, err error) {
	host, err := requestread.CanonicalHost(r.Host)
	if err != nil {
		return nil, nil, err
	}
	overrides, err := requestread.MethodOverrides(r.Header)
	if err != nil {
		return nil, nil, err
	}
	rules = s.matchHTTP(host, r.Path, r.Method, overrides)
	method := requestread.UpperASCII(r.Method)
	if len(overrides) > 0 {
		method = overrides[0] // the method the upstream will run
	}
	fp := requestread.HTTPFingerprint(strings.Join(append([]string{strings.ToUpper(r.Method)}, overrides...), " "), host, r.Path.String(), r.Query)
	view := requestread.View{Host: host, Path: r.Path, Sent: requestread.UpperASCII(r.Method), Overrides: overrides}
	checks = make([]Check, len(rules))
	for i, rule := range rules {
		c, err := rule.httpCheck(r.Header, r.Peer, &view)
		if err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", rule.Name(), err)
		}
		if c.RequestID != "" {
			c.Fingerprint = fp
		}
		if c.Tier, err = rule.httpTier(&c, r, method, host); err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", rule.Name(), err)
		}
		checks[i] = c
	}
	return rules, checks, nil
}

// HTTPCheck reads r's check of an HTTP request from its headers and its peer address:
// identity, cost and request id (package requestread). Every header it reads is read once,
// so a header sent twice refuses the request (requestread.ErrRepeatedHeader) whatever it is
// used for. The Method and PathPrefix sources yield nothing here (they read the request
// line); PlanHTTP reads them.
func (r *Rule) HTTPCheck(h http.Header, peer string) (Check, error) {
	return r.httpCheck(h, peer, nil)
}

// httpCheck is HTTPCheck with the request line v for the Method and PathPrefix sources.
func (r *Rule) httpCheck(h http.Header, peer string, v *requestread.View) (Check, error) {
	cost, err := requestread.HTTPCost(&r.Entry, h)
	if err != nil {
		return Check{}, err
	}
	id, ok, err := requestread.HTTPIdentity(&r.Entry, h, peer, v, r)
	if err != nil {
		return Check{}, err
	}
	rid, err := requestread.HTTPRequestID(&r.Entry, h)
	if err != nil {
		return Check{}, err
	}
	return Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: rid}, nil
}

// DescriptorCheck is r's check of one Envoy descriptor of domain: identity and request id
// from its entries, and the cost the caller stated (0 means the policy's default).
func (r *Rule) DescriptorCheck(domain string, entries []requestread.DescriptorEntry, stated int64) (Check, error) {
	cost, err := requestread.StatedCost(&r.Entry, stated)
	if err != nil {
		return Check{}, err
	}
	id, ok := requestread.DescriptorIdentity(&r.Entry, entries)
	c := Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: requestread.DescriptorRequestID(&r.Entry, entries)}
	if c.Tier, err = r.descriptorTier(&c, entries); err != nil {
		return Check{}, err
	}
	if c.RequestID != "" {
		c.Fingerprint = requestread.DescriptorFingerprint(domain, entries)
	}
	return c, nil
}
