package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// basePolicyYAML is a valid policy; each invalid case below breaks exactly one thing in it.
const basePolicyYAML = `
apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: base
spec:
  match:
    http:
    - pathPrefixes: ["/api"]
      methods: ["GET"]
  identity:
    sources:
    - type: Header
      header:
        name: X-API-Key
    - type: ClientIP
  algorithm: TokenBucket
  limits:
  - name: per-second
    requests: 10
    period: 1s
    burst: 20
`

func basePolicy(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(basePolicyYAML), &m); err != nil {
		t.Fatalf("decode base policy: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// invalidCase breaks the base policy one way and names the field the API server must blame.
type invalidCase struct {
	name   string
	mutate func(t *testing.T, obj map[string]any)
	field  string // exact field path of one cause in the API server's answer
	msg    string // fragment of that cause's message
}

func setTo(path string, v any) func(*testing.T, map[string]any) {
	return func(t *testing.T, obj map[string]any) { set(t, obj, path, v) }
}

var invalidCases = []invalidCase{
	{"unknown algorithm", setTo("spec.algorithm", "LeakyBucket"),
		"spec.algorithm", "Unsupported value"},
	{"no limits", setTo("spec.limits", []any{}),
		"spec.limits", "at least 1 item"},
	{"too many limits", func(t *testing.T, o map[string]any) {
		var ls []any
		for i := range 9 {
			ls = append(ls, map[string]any{"name": fmt.Sprintf("l%d", i), "requests": 1, "period": "1s"})
		}
		set(t, o, "spec.limits", ls)
	}, "spec.limits", "must have at most 8 items"},
	{"zero requests", setTo("spec.limits.0.requests", 0),
		"spec.limits[0].requests", "greater than or equal to 1"},
	{"period without unit", setTo("spec.limits.0.period", "10"),
		"spec.limits[0].period", "should match"},
	{"period under 1ms", setTo("spec.limits.0.period", "0.5ms"),
		"spec.limits[0].period", "period must be at least 1ms"},
	{"period over a year", setTo("spec.limits.0.period", "9000h"),
		"spec.limits[0].period", "at most 8760h"},
	{"limit name not a DNS label", setTo("spec.limits.0.name", "PerSecond"),
		"spec.limits[0].name", "should match"},
	{"duplicate limit names", setTo("spec.limits", []any{
		map[string]any{"name": "a", "requests": 1, "period": "1s"},
		map[string]any{"name": "a", "requests": 2, "period": "1h"},
	}), "spec.limits[1]", "Duplicate value"},
	{"burst on a window algorithm", setTo("spec.algorithm", "FixedWindow"),
		"spec.limits", "burst is only allowed when algorithm is TokenBucket or GCRA"},
	{"LocalCap without its cap", setTo("spec.failureMode", "LocalCap"),
		"spec.localCap", "localCap must be set when failureMode is LocalCap"},
	{"localCap with FailOpen", setTo("spec.localCap", map[string]any{"requests": 1, "period": "1s"}),
		"spec.localCap", "localCap must be set when failureMode is LocalCap, and only then"},
	{"unknown failure mode", setTo("spec.failureMode", "FailSometimes"),
		"spec.failureMode", "Unsupported value"},
	{"empty match", setTo("spec.match", map[string]any{}),
		"spec.match", "match needs http or envoy"},
	{"path prefix without slash", setTo("spec.match.http.0.pathPrefixes", []any{"api"}),
		"spec.match.http[0].pathPrefixes[0]", "should match"},
	{"unknown HTTP method", setTo("spec.match.http.0.methods", []any{"FETCH"}),
		"spec.match.http[0].methods[0]", "Unsupported value"},
	{"Header source without header", func(t *testing.T, o map[string]any) {
		del(t, o["spec"].(map[string]any)["identity"].(map[string]any)["sources"].([]any)[0].(map[string]any), "header")
	}, "spec.identity.sources[0].header", "header must be set when type is Header"},
	{"header member on a ClientIP source", setTo("spec.identity.sources.1.header", map[string]any{"name": "X-A"}),
		"spec.identity.sources[1].header", "and only then"},
	{"Fixed source not last", setTo("spec.identity.sources.0",
		map[string]any{"type": "Fixed", "fixed": map[string]any{"value": "all"}}),
		"spec.identity.sources", "must be the last source"},
	{"Descriptor source without envoy match", setTo("spec.identity.sources.0",
		map[string]any{"type": "Descriptor", "descriptor": map[string]any{"key": "remote_address"}}),
		"spec.identity.sources", "needs match.envoy"},
	{"no identity sources", setTo("spec.identity.sources", []any{}),
		"spec.identity.sources", "at least 1 item"},
	{"IPv4 prefix longer than 32", setTo("spec.identity.sources.1.clientIP", map[string]any{"ipv4PrefixLength": 40}),
		"spec.identity.sources[1].clientIP.ipv4PrefixLength", "less than or equal to 32"},
	{"unknown onMissing", setTo("spec.identity.onMissing", "Guess"),
		"spec.identity.onMissing", "Unsupported value"},
	{"cost max below default", setTo("spec.cost", map[string]any{"default": 5, "max": 2}),
		"spec.cost.max", "max must be at least default"},
	{"request-supplied cost without max", setTo("spec.cost", map[string]any{"header": "X-Cost"}),
		"spec.cost.max", "needs max to bound it"},
	{"settle naming nothing", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{}}),
		"spec.cost.settle", "name the response header or the JSON field"},
	{"settle field with an empty name", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{"field": "usage..total_tokens"}}),
		"spec.cost.settle.field", "should match"},
	{"settle field nine names deep", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{"field": "a.b.c.d.e.f.g.h.i"}}),
		"spec.cost.settle.field", "should match"},
	{"settle header not a token", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{"header": "X Tokens"}}),
		"spec.cost.settle.header", "should match"},
	{"settle timeout under a second", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{"header": "X-Tokens", "timeout": "999ms"}}),
		"spec.cost.settle.timeout", "between 1s and 24h"},
	{"settle timeout over a day", setTo("spec.cost", map[string]any{"default": 100, "settle": map[string]any{"header": "X-Tokens", "timeout": "25h"}}),
		"spec.cost.settle.timeout", "between 1s and 24h"},
	{"idempotency ttl under 1s", setTo("spec.idempotency", map[string]any{"ttl": "500ms"}),
		"spec.idempotency.ttl", "ttl must be between 1s and 24h"},
	{"idempotency without ttl", setTo("spec.idempotency", map[string]any{"header": "X-Request-Id"}),
		"spec.idempotency.ttl", "Required value"},
	{"key template too long", setTo("spec.keyLayout.state", strings.Repeat("k", 513)),
		"spec.keyLayout.state", "may not be more than 512"},
	{"ttl not a duration", setTo("spec.keyLayout.ttl", "forever"),
		"spec.keyLayout.ttl", "should match"},
	{"ttl of zero", setTo("spec.keyLayout", map[string]any{"ttl": "0s"}),
		"spec.keyLayout.ttl", "ttl must be at least 1ms"},
	{"envoy match without domain", setTo("spec.match.envoy", map[string]any{"descriptors": []any{}}),
		"spec.match.envoy.domain", "Required value"},
	{"unknown lease mode", setTo("spec.hotKeys", map[string]any{"leases": "Sometimes"}),
		"spec.hotKeys.leases", "Unsupported value"},
	{"zero shards", setTo("spec.hotKeys", map[string]any{"shards": 0}),
		"spec.hotKeys.shards", "greater than or equal to 1"},
	{"too many shards", setTo("spec.hotKeys", map[string]any{"shards": 17}),
		"spec.hotKeys.shards", "less than or equal to 16"},
	// Composite identities (spec.identity.parts).
	{"sources and parts", setTo("spec.identity.parts", []any{idPart(keySource), idPart(methodSource)}),
		"spec.identity", "set exactly one of sources"},
	{"neither sources nor parts", func(t *testing.T, o map[string]any) { del(t, o, "spec.identity.sources") },
		"spec.identity", "set exactly one of sources"},
	{"one part", withParts(idPart(keySource)),
		"spec.identity.parts", "should have at least 2 items"},
	{"five parts", withParts(idPart(keySource), idPart(methodSource), idPart(prefixSource), idPart(keySource), idPart(methodSource)),
		"spec.identity.parts", "must have at most 4 items"},
	{"every part Fixed", withParts(idPart(fixedSource), idPart(fixedSource)),
		"spec.identity.parts", "every part is Fixed"},
	{"Fixed not last within a part", withParts(idPart(fixedSource, keySource), idPart(methodSource)),
		"spec.identity.parts[0].sources", "must be the last source"},
	{"a part without sources", withParts(idPart(), idPart(methodSource)),
		"spec.identity.parts[0].sources", "at least 1 item"},
	{"a member on a Method source", withParts(idPart(keySource), idPart(map[string]any{"type": "Method", "header": map[string]any{"name": "X-A"}})),
		"spec.identity.parts[1].sources[0].header", "and only then"},
	{"Descriptor part without envoy match", withParts(idPart(keySource), idPart(map[string]any{"type": "Descriptor", "descriptor": map[string]any{"key": "user"}})),
		"spec.identity.parts", "needs match.envoy"},
	{"Method part on an Envoy match", func(t *testing.T, o map[string]any) {
		withParts(idPart(map[string]any{"type": "Descriptor", "descriptor": map[string]any{"key": "user"}}), idPart(methodSource))(t, o)
		set(t, o, "spec.match", map[string]any{"envoy": map[string]any{"domain": "edge"}})
	}, "spec.identity", "Method and PathPrefix need match.http or targetRefs"},
	{"PathPrefix source on an Envoy match", func(t *testing.T, o map[string]any) {
		set(t, o, "spec.identity.sources", []any{prefixSource})
		set(t, o, "spec.match", map[string]any{"envoy": map[string]any{"domain": "edge"}})
	}, "spec.identity", "Method and PathPrefix need match.http or targetRefs"},
	{"a tier named default", setTo("spec.tiers", []any{tier("default", `true`)}),
		"spec.tiers[0].name", "the name default is the tier of spec.limits"},
	{"two tiers of one name", setTo("spec.tiers", []any{tier("pro", `true`), tier("pro", `false`)}),
		"spec.tiers[1]", "Duplicate value"},
	{"a tier without a condition", setTo("spec.tiers", []any{tier("pro", "")}),
		"spec.tiers[0].when", "should be at least 1"},
	{"a tier without limits", setTo("spec.tiers", []any{map[string]any{"name": "pro", "when": "true", "limits": []any{}}}),
		"spec.tiers[0].limits", "should have at least 1"},
}

// Identity sources as a manifest writes them.
var (
	keySource    = map[string]any{"type": "Header", "header": map[string]any{"name": "X-API-Key"}}
	methodSource = map[string]any{"type": "Method"}
	prefixSource = map[string]any{"type": "PathPrefix"}
	fixedSource  = map[string]any{"type": "Fixed", "fixed": map[string]any{"value": "all"}}
)

// idPart is a part of a composite identity reading sources in order.
func idPart(sources ...map[string]any) map[string]any {
	list := []any{}
	for _, s := range sources {
		list = append(list, s)
	}
	return map[string]any{"sources": list}
}

// withParts replaces the base policy's sources with a composite identity of parts.
func withParts(parts ...map[string]any) func(*testing.T, map[string]any) {
	return func(t *testing.T, o map[string]any) {
		del(t, o, "spec.identity.sources")
		list := []any{}
		for _, p := range parts {
			list = append(list, p)
		}
		set(t, o, "spec.identity.parts", list)
	}
}

// tier is a tier of one limit, 100 per second, named name and selected by when.
func tier(name, when string) map[string]any {
	return map[string]any{"name": name, "when": when,
		"limits": []any{map[string]any{"name": "per-second", "requests": 100, "period": "1s"}}}
}

// TestInvalidPoliciesRejected proves each broken policy is refused by the CRD's OpenAPI schema
// or CEL rules on the real API server, with the right field path and message. The unbroken
// base policy is created first, so a case can only fail for the reason it names.
func TestInvalidPoliciesRejected(t *testing.T) {
	rejectAll(t, "t-", basePolicy, invalidCases, "policy")
}

// rejectAll creates the unbroken object base gives in a fresh namespace (prefix), then each
// case's broken copy, and checks the API server refuses it naming the case's field.
func rejectAll(t *testing.T, prefix string, base func(*testing.T) *unstructured.Unstructured, cases []invalidCase, kind string) {
	t.Helper()
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, prefix)
	unbroken := base(t)
	unbroken.SetNamespace(ns)
	if err := e.Client.Create(context.Background(), unbroken); err != nil {
		t.Fatalf("the unbroken base %s must be accepted: %v", kind, err)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := base(t)
			obj.SetNamespace(ns)
			obj.SetName(fmt.Sprintf("invalid-%d", i))
			tc.mutate(t, obj.Object)
			err := e.Client.Create(context.Background(), obj)
			if err == nil {
				t.Fatalf("API server accepted a %s with %s", kind, tc.name)
			}
			assertCause(t, err, tc.field, tc.msg)
		})
	}
}

// assertCause checks that err is an Invalid error with a cause on field whose message holds msg.
func assertCause(t *testing.T, err error, field, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("error carries no details: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	t.Fatalf("no cause on field %q containing %q; got %v", field, msg, err)
}

// TestCompositeIdentityAccepted: the API server takes a composite identity of up to four
// parts, each a fallback chain, with Method and PathPrefix on an HTTP match.
func TestCompositeIdentityAccepted(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "t-")
	obj := basePolicy(t)
	obj.SetNamespace(ns)
	withParts(idPart(keySource, fixedSource), idPart(prefixSource), idPart(methodSource),
		idPart(map[string]any{"type": "ClientIP", "clientIP": map[string]any{"ipv4PrefixLength": 24}}))(t, obj.Object)
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("a valid composite identity was refused: %v", err)
	}
}
