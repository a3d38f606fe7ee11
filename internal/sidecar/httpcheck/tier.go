package httpcheck

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/condition"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

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
