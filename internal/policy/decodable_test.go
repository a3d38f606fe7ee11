package policy

import (
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// TestCheckDecodableNamesEveryField: each value Go cannot decode is named by its own path,
// however deep and whichever type holds it; decodable values and nulls pass.
func TestCheckDecodableNamesEveryField(t *testing.T) {
	for _, c := range []struct {
		template any
		body     string
		want     []string // "path: fragment"
	}{
		{&v1alpha1.RateLimitPolicy{}, `{"spec":{"limits":[{"requests":20,"period":"1s"}],"keyLayout":null}}`, nil},
		{&v1alpha1.RateLimitPolicy{}, `{"spec":{"limits":[{"requests":1.5},{"period":30}]}}`,
			[]string{"spec.limits[0].requests: integer", "spec.limits[1].period: duration string"}},
		{&v1alpha1.RateLimitPolicy{}, `{"spec":{"tiers":[{"limits":[{"burst":"x"}]}],"limits":{}}}`,
			[]string{"spec.limits: an array", "spec.tiers[0].limits[0].burst: integer"}},
		{&v1alpha1.RateLimitPolicy{}, `{"metadata":{"labels":{"a":1}},"spec":"x"}`,
			[]string{"metadata.labels[a]: a string", "spec: an object"}},
		{&v1alpha1.RateLimitOverride{}, `{"spec":{"expires":"next tuesday","callers":[{"value":7}]}}`,
			[]string{"spec.callers[0].value: a string", "spec.expires: "}},
	} {
		errs := CheckDecodable([]byte(c.body), c.template)
		if len(errs) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.body, errs, c.want)
		}
		for _, w := range c.want {
			path, frag, _ := strings.Cut(w, ": ")
			found := false
			for _, e := range errs {
				found = found || (e.Field == path && strings.Contains(e.Detail, frag))
			}
			if !found {
				t.Fatalf("%s: no error on %s holding %q in %v", c.body, path, frag, errs)
			}
		}
	}
}
