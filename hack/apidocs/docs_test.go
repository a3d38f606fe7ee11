// Package apidocs holds what `make docs` renders docs/api.md with: the crd-ref-docs
// configuration (config.yaml) and the Markdown templates (templates/). crd-ref-docs itself is
// pinned in hack/tools/go.mod. This package has no code, only the test that the committed page
// is current.
package apidocs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDocsUpToDate fails when the committed docs/api.md is not what `make docs` makes of the
// current API types. It runs the Makefile's own target, pointed at a temporary file, so the
// command line lives in one place.
func TestDocsUpToDate(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "api.md")
	cmd := exec.CommandContext(t.Context(), "make", "-s", "-C", root, "docs", "API_DOCS="+out)
	// Under `make test` the parent make's flags and variables would leak into this one.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") ||
			strings.HasPrefix(kv, "MAKELEVEL=")
	})
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make docs: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatalf("docs/api.md is missing: run `make docs` and commit the result: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.md is stale (first difference at line %d): run `make docs` and commit the result",
			firstDiffLine(got, want))
	}
}

// firstDiffLine returns the 1-based number of the first line where a and b differ.
func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// schema is the part of a CRD's OpenAPI schema that TestDocsMatchCRD walks.
type schema struct {
	Required   []string          `json:"required"`
	Properties map[string]schema `json:"properties"`
	Items      *schema           `json:"items"`
}

// docRow is one row of a field table in docs/api.md.
type docRow struct {
	required bool
	link     string // the section the Type cell links to, if any
}

var (
	sectionRE   = regexp.MustCompile(`^## (\w+)$`)
	cellSepRE   = regexp.MustCompile(`[^\\]\|`)
	fieldRE     = regexp.MustCompile("^`([^`]+)`$")
	localLinkRE = regexp.MustCompile(`\]\(#([a-z0-9-]+)\)`)
)

// parseFieldTables returns the field tables of docs/api.md by section (lower-cased, as the
// anchors are) and field name.
func parseFieldTables(t *testing.T, md []byte) map[string]map[string]docRow {
	t.Helper()
	tables := map[string]map[string]docRow{}
	section := ""
	for line := range strings.SplitSeq(string(md), "\n") {
		if m := sectionRE.FindStringSubmatch(line); m != nil {
			section = strings.ToLower(m[1])
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		// Split on the pipes that are not escaped: "a | b" separates, "a \| b" does not.
		var cells []string
		rest := line[1:]
		for {
			loc := cellSepRE.FindStringIndex(rest)
			if loc == nil {
				break
			}
			cells = append(cells, strings.TrimSpace(rest[:loc[0]+1]))
			rest = rest[loc[1]:]
		}
		if len(cells) != 6 { // Field | Type | Required | Default | Validation | Description
			continue
		}
		name := fieldRE.FindStringSubmatch(cells[0])
		if name == nil {
			t.Fatalf("section %s: field cell %q is not a code span", section, cells[0])
		}
		row := docRow{required: cells[2] == "Yes"}
		if m := localLinkRE.FindStringSubmatch(cells[1]); m != nil {
			row.link = m[1]
		}
		if tables[section] == nil {
			tables[section] = map[string]docRow{}
		}
		tables[section][name[1]] = row
	}
	return tables
}

// TestDocsMatchCRD walks the generated CRD's schema along the links of docs/api.md and checks
// that every schema property has a row, every row a property, and the Required column says
// what the schema's required lists say. The templates decide Required from +optional alone;
// this catches a field that controller-gen treats otherwise.
func TestDocsMatchCRD(t *testing.T) {
	root := filepath.Join("..", "..")
	md, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := &crdChecker{t: t, tables: parseFieldTables(t, md), arrays: parseArrayTypes(md), seen: map[string]bool{}}
	for _, kind := range []struct{ section, name, file string }{
		{"ratelimitpolicy", "RateLimitPolicy", "policy.ratelimit.dev_ratelimitpolicies.yaml"},
		{"ratelimitoverride", "RateLimitOverride", "policy.ratelimit.dev_ratelimitoverrides.yaml"},
		{"redisbackend", "RedisBackend", "policy.ratelimit.dev_redisbackends.yaml"},
	} {
		c.walk(kind.section, kind.name, loadCRDSchema(t, filepath.Join(root, "config", "crd", "bases", kind.file)))
	}
	for section := range c.tables {
		if !c.seen[section] && !strings.HasSuffix(section, "list") {
			t.Errorf("docs/api.md section %q is not reached from RateLimitPolicy, RateLimitOverride or RedisBackend", section)
		}
	}
}

// arrayTypeRE is the line of a named array type's section naming its element type.
var arrayTypeRE = regexp.MustCompile("^Type: `\\[\\w+\\]\\(#([a-z0-9-]+)\\) array`")

// parseArrayTypes returns, by section, the element section of each named array type (such
// as IdentitySources, of IdentitySource): a field linking to one is checked against its
// element's table.
func parseArrayTypes(md []byte) map[string]string {
	out := map[string]string{}
	section := ""
	for line := range strings.SplitSeq(string(md), "\n") {
		if m := sectionRE.FindStringSubmatch(line); m != nil {
			section = strings.ToLower(m[1])
			continue
		}
		if m := arrayTypeRE.FindStringSubmatch(line); m != nil {
			out[section] = m[1]
		}
	}
	return out
}

// loadCRDSchema returns the OpenAPI schema of the CRD's one version, v1alpha1.
func loadCRDSchema(t *testing.T, path string) schema {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("CRD versions = %+v, want v1alpha1 alone", crd.Spec.Versions)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// crdChecker compares a CRD schema with the field tables of docs/api.md.
type crdChecker struct {
	t      *testing.T
	tables map[string]map[string]docRow
	// arrays are the element sections of named array types, by section.
	arrays map[string]string
	seen   map[string]bool
}

// walk checks the object schema s against the field table of section, then the sections its
// rows link to. path names s for messages.
func (c *crdChecker) walk(section, path string, s schema) {
	if len(s.Properties) == 0 {
		return // a string enum or other scalar: its section has no field table
	}
	if elem, ok := c.arrays[section]; ok {
		c.seen[section] = true
		section = elem
	}
	rows, ok := c.tables[section]
	if !ok {
		c.t.Errorf("%s: docs/api.md has no field table for section %q", path, section)
		return
	}
	c.seen[section] = true
	for name, prop := range s.Properties {
		row, ok := rows[name]
		if !ok {
			c.t.Errorf("%s.%s: in the CRD, not in docs/api.md section %q", path, name, section)
			continue
		}
		// apiVersion and kind are listed as required, as every request must carry them; the
		// schema leaves them to the API server.
		if name != "apiVersion" && name != "kind" && row.required != slices.Contains(s.Required, name) {
			c.t.Errorf("%s.%s: docs/api.md says required=%v, the CRD says %v", path, name, row.required, !row.required)
		}
		if row.link == "" {
			continue
		}
		for prop.Items != nil {
			prop = *prop.Items
		}
		c.walk(row.link, path+"."+name, prop)
	}
	for name := range rows {
		if _, ok := s.Properties[name]; !ok {
			c.t.Errorf("%s.%s: in docs/api.md section %q, not in the CRD", path, name, section)
		}
	}
}
