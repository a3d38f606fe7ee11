package webhook

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/internal/lint"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// lintBase is a valid policy; each case below edits it.
const lintBase = `apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: %NAME%
spec:
  match:
    http:
    - pathPrefixes: ["/v1"]
  identity:
    sources:
    - type: Header
      header:
        name: X-API-Key
  algorithm: TokenBucket
  limits:
  - name: per-second
    requests: 20
    period: 1s
  failureMode: FailClosed
`

// lintCases are policies the cluster refuses or warns about for each step of admission:
// the schema's types and enums, the CEL rules, the durations guard, the validating webhook,
// and the webhook's warnings; "valid" is admitted silently.
var lintCases = map[string]func(string) string{
	"valid": func(s string) string { return s },
	"schema-type": func(s string) string {
		return strings.Replace(s, "requests: 20", `requests: "twenty"`, 1)
	},
	"schema-enum": func(s string) string {
		return strings.Replace(s, "algorithm: TokenBucket", "algorithm: LeakyBucket", 1)
	},
	"cel-rule": func(s string) string {
		return strings.Replace(s, "  failureMode: FailClosed\n", "  failureMode: FailClosed\n  concurrency:\n    max: 5\n    slotTTL: 48h\n", 1)
	},
	"duration": func(s string) string { return strings.Replace(s, "period: 1s", "period: 1y", 1) },
	"webhook-keys": func(s string) string {
		return s + "  keyLayout:\n    state: \"rl:${namespace}:${policy}:${identity}:${limit}\"\n    ttl: 1h\n"
	},
	"webhook-warning": func(s string) string {
		return strings.Replace(strings.Replace(s, `"/v1"`, `"/login"`, 1), "FailClosed", "FailOpen", 1)
	},
}

// TestLintSaysWhatTheClusterSays: every case is linted offline (internal/lint, what
// `kubectl ratelimit lint` runs) and created through the real API server with the webhooks
// (kubectl's strict field validation): both admit the same ones, refuse the others with the
// same causes (field and message), and answer the same warnings.
func TestLintSaysWhatTheClusterSays(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "lint-")
	c, warnings := kube.NewWarningClient(t, e)
	l, err := lint.New(policy.Rules{}, ns)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range lintCases {
		t.Run(name, func(t *testing.T) {
			doc := edit(strings.Replace(lintBase, "%NAME%", name, 1))
			docs, err := lint.Read(name+".yaml", strings.NewReader(doc))
			if err != nil {
				t.Fatal(err)
			}
			results, skipped := l.Lint(context.Background(), docs)
			if len(results) != 1 || skipped != 0 {
				t.Fatalf("%d results, %d skipped", len(results), skipped)
			}
			got := results[0]
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace(ns)
			_ = warnings.Take()
			createErr := c.Create(context.Background(), &u, client.FieldValidation("Strict"))
			want, lintSays := causes(t, createErr), lintCauses(got)
			t.Logf("cluster: %v\nlint:    %v", want, lintSays)
			if !slices.Equal(want, lintSays) {
				t.Fatalf("the cluster refused with %q; lint says %q", want, lintSays)
			}
			if name != "valid" && name != "webhook-warning" && len(want) == 0 {
				t.Fatalf("the cluster admitted case %s: the case tests nothing", name)
			}
			clusterWarnings := warnings.Take()
			if !sameWarnings(clusterWarnings, got.Warnings) {
				t.Fatalf("the cluster warned %q; lint warns %q", clusterWarnings, got.Warnings)
			}
			if name == "webhook-warning" && len(got.Warnings) == 0 {
				t.Fatal("no warning: the case tests nothing")
			}
		})
	}
}

// causes is the cluster's refusal as sorted "field: message" lines; none when admitted.
func causes(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("not an Invalid error with causes: %v", err)
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	sort.Strings(out)
	return out
}

// lintCauses is a lint result's errors in the form causes returns.
func lintCauses(r lint.Result) []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, e.Field+": "+e.ErrorBody())
	}
	sort.Strings(out)
	return out
}

// sameWarnings reports whether the cluster's warnings are lint's (in any order).
func sameWarnings(cluster, linted []string) bool {
	a, b := slices.Clone(cluster), slices.Clone(linted)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}
