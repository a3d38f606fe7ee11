package helm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// schemaNode is the part of a JSON schema the chart's values.schema.json uses for objects.
type schemaNode struct {
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
}

// TestSchemaCoversValues: values.schema.json and values.yaml name the same keys, and every
// object of the schema with named properties refuses any other (additionalProperties: false),
// so a typo anywhere fails. (values.yaml keys the schema lacks already fail `helm lint`.)
func TestSchemaCoversValues(t *testing.T) {
	var schema schemaNode
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var values map[string]any
	raw, err = os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	walkSchema(t, nil, &schema, values)
}

func walkSchema(t *testing.T, path []string, s *schemaNode, values map[string]any) {
	t.Helper()
	at := "/" + strings.Join(path, "/")
	if s.Properties == nil {
		return
	}
	if s.AdditionalProperties != false {
		t.Errorf("schema %s: additionalProperties is %v, want false", at, s.AdditionalProperties)
	}
	if len(path) > 0 && len(values) == 0 {
		return // an optional object, empty by default (e.g. webhook.certManager.issuerRef)
	}
	for name, p := range s.Properties {
		if len(path) == 0 && name == "global" { // Helm's, set by parent charts
			continue
		}
		v, ok := values[name]
		if !ok {
			t.Errorf("schema %s/%s has no default in values.yaml", at, name)
			continue
		}
		if sub, isMap := v.(map[string]any); isMap {
			walkSchema(t, append(path, name), p, sub)
		} else if p.Properties != nil {
			t.Errorf("values.yaml %s/%s is %T, the schema has an object", at, name, v)
		}
	}
}
