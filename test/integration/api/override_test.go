package api

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// baseOverrideYAML is a valid RateLimitOverride; each invalid case below breaks one thing in
// it.
const baseOverrideYAML = `
apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitOverride
metadata:
  name: base
spec:
  policyName: base
  tier: pro
  callers:
  - value: acme-key
  - value: 10.0.0.1
    source: 1
  - hash: 0123456789abcdef
  expires: "2030-01-01T00:00:00Z"
`

func baseOverride(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(baseOverrideYAML), &m); err != nil {
		t.Fatalf("decode base override: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

var invalidOverrides = []invalidCase{
	{"both tier and limits", setTo("spec.limits", []any{map[string]any{"name": "per-second", "requests": 100, "period": "1s"}}),
		"spec", "set exactly one of tier and limits"},
	{"neither tier nor limits", func(t *testing.T, obj map[string]any) { del(t, obj, "spec.tier") },
		"spec", "set exactly one of tier and limits"},
	{"no callers", setTo("spec.callers", []any{}), "spec.callers", "should have at least 1 items"},
	{"a caller with value and hash", setTo("spec.callers", []any{map[string]any{"value": "a", "hash": "0123456789abcdef"}}),
		"spec.callers[0]", "set exactly one of value and hash"},
	{"a hash that is not 16 hex digits", setTo("spec.callers", []any{map[string]any{"hash": "0123456789ABCDEF"}}),
		"spec.callers[0].hash", "should match"},
	{"a source with a hash", setTo("spec.callers", []any{map[string]any{"hash": "0123456789abcdef", "source": 1}}),
		"spec.callers[0]", "source is for value only"},
	{"a source beyond eight", setTo("spec.callers", []any{map[string]any{"value": "a", "source": 8}}),
		"spec.callers[0].source", "should be less than or equal to 7"},
	{"a tier name that is not a name", setTo("spec.tier", "Pro Plan"), "spec.tier", "should match"},
	{"no policy", setTo("spec.policyName", ""), "spec.policyName", "should be at least 1 chars long"},
}

// TestInvalidOverridesRejected proves each broken override is refused by the CRD's schema or
// CEL rules on the real API server, naming the field.
func TestInvalidOverridesRejected(t *testing.T) {
	rejectAll(t, "o-", baseOverride, invalidOverrides, "override")
}
