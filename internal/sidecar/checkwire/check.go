package checkwire

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/condition"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// CheckOf is the policy req names in set and the check it states, or the HTTP status and
// error refusing it (the field at fault named): what the check API decides, and what the
// usage API reads and adjusts.
func CheckOf(set *engine.Set, req *Request) (*engine.Rule, engine.Check, int, error) {
	rule := set.Rule(req.Policy)
	if rule == nil {
		return nil, engine.Check{}, http.StatusNotFound, fmt.Errorf("policy: no policy %q in namespace %q", req.Policy, set.Namespace)
	}
	cost, err := requestread.StatedCost(&rule.Entry, req.Cost)
	if err != nil {
		return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("cost: %w", err)
	}
	tier, err := tierOf(rule, req)
	if err != nil {
		return nil, engine.Check{}, http.StatusBadRequest, err
	}
	id, hasID := req.Identity, req.Identity != ""
	switch composite := len(rule.Entry.Identity.Parts) > 0; {
	case composite && req.Identity != "":
		return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("identity: policy %q has a composite identity: state its parts", req.Policy)
	case composite || len(req.Parts) > 0:
		if id, hasID, err = requestread.StatedParts(&rule.Entry, req.Parts); err != nil {
			return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("parts: %w", err)
		}
	}
	return rule, engine.Check{Identity: id, HasIdentity: hasID, Cost: cost,
		RequestID: req.RequestID, Fingerprint: req.Fingerprint, Tier: tier, Peek: req.Peek}, 0, nil
}

// tierOf is the tier req asks for: the one it names, or the one an override gives its
// caller, or the one its request attributes choose, or the rule's default tier.
func tierOf(rule *engine.Rule, req *Request) (*engine.Tier, error) {
	if req.Tier != "" {
		for _, t := range rule.AllTiers() {
			if t.Name == req.Tier {
				return t, nil
			}
		}
		return nil, fmt.Errorf("tier: policy %q has no tier %q", rule.Name(), req.Tier)
	}
	c := engine.Check{Identity: req.Identity, HasIdentity: req.Identity != ""}
	return rule.CallerTier(&c, func() (*engine.Tier, error) {
		if req.Request == nil {
			return rule.Default(), nil
		}
		a := req.Request
		h := make(http.Header, len(a.Headers))
		for k, v := range a.Headers {
			h.Set(k, v)
		}
		t, err := rule.TierFor(&condition.Request{Method: strings.ToUpper(a.Method), Host: strings.ToLower(a.Host), Path: a.Path, Header: h})
		if err != nil {
			return nil, fmt.Errorf("request: %w", err)
		}
		return t, nil
	})
}
