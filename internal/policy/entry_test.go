package policy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/golden"
)

// TestEntriesFromTheAPIAreStable holds the one conversion from the API to the wire format
// to testdata/entries-from-api.json: policies setting every field of the API that
// reaches a sidecar (testdata/full-policies.yaml), built as the controller builds them. A
// renamed API field must not change what sidecars read; a changed conversion shows here.
func TestEntriesFromTheAPIAreStable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "full-policies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []json.RawMessage
	for _, doc := range strings.Split(string(src), "\n---\n") {
		var p v1alpha1.RateLimitPolicy
		if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
			t.Fatalf("full-policies.yaml: %v", err)
		}
		built, errs := (policy.Rules{}).Compile(&p)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", p.Name, errs.ToAggregate())
		}
		entry := built.Entry
		entry.SHA = "" // the script's, which changes with its Lua, not with the conversion
		b, err := json.Marshal(entry)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
	}
	got, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "entries-from-api.json"), got, "the entries converted from the API")
}
