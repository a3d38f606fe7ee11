package gateways_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Istio's mesh config is not a Kubernetes object, so the API server cannot check
// config/gateways/istio/mesh-config.yaml; these read the field names of its messages from
// the pinned istio.io/api's mesh/v1alpha1/config.proto instead.
var (
	protoBlock = regexp.MustCompile(`^\s*(message|enum|oneof)\s+(\w+)\s*\{`)
	protoField = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+`)
)

// protoJSONFields lists the JSON names of the fields of message (at any nesting level) in a
// .proto file, including those inside its oneofs.
func protoJSONFields(path, message string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open proto: %w", err)
	}
	defer f.Close()
	var (
		stack  []string // kinds of the blocks open inside the message
		inside bool
		fields = map[string]bool{}
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if !inside {
			if m := protoBlock.FindStringSubmatch(line); m != nil && m[1] == "message" && m[2] == message {
				inside = true
			}
			continue
		}
		opens := strings.Count(line, "{")
		if m := protoBlock.FindStringSubmatch(line); m != nil {
			stack = append(stack, m[1])
			opens--
		}
		for range opens {
			stack = append(stack, "other") // an option's value
		}
		for range strings.Count(line, "}") {
			if len(stack) == 0 {
				return fields, nil
			}
			stack = stack[:len(stack)-1]
		}
		if m := protoField.FindStringSubmatch(line); m != nil && onlyOneofs(stack) {
			fields[lowerCamel(m[1])] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read proto: %w", err)
	}
	return nil, fmt.Errorf("no message %s in %s", message, path)
}

func onlyOneofs(stack []string) bool {
	for _, k := range stack {
		if k != "oneof" {
			return false
		}
	}
	return true
}

// lowerCamel is protobuf's JSON name of a field: fail_open -> failOpen.
func lowerCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// checkProtoFields fails for each key of obj that message does not declare.
func checkProtoFields(t *testing.T, message string, obj map[string]any) {
	t.Helper()
	proto := filepath.Join(modules(t)[istioModule], "mesh", "v1alpha1", "config.proto")
	fields, err := protoJSONFields(proto, message)
	if err != nil {
		t.Fatal(err)
	}
	for k := range obj {
		if !fields[k] {
			t.Errorf("mesh config: %s has no field %q (istio.io/api declares %v)", message, k, fields)
		}
	}
}

// TestProtoJSONFieldsReadsIstio: the reader finds exactly the fields of a message nested two
// deep in the pinned config.proto (so a field missing from mesh-config.yaml's check would be
// the parser's fault, not Istio's).
func TestProtoJSONFieldsReadsIstio(t *testing.T) {
	proto := filepath.Join(modules(t)[istioModule], "mesh", "v1alpha1", "config.proto")
	fields, err := protoJSONFields(proto, "EnvoyExternalAuthorizationGrpcProvider")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"service", "port", "timeout", "failOpen", "statusOnError"} {
		if !fields[want] {
			t.Errorf("fields %v lack %s", fields, want)
		}
	}
	if fields["name"] || fields["envoyExtAuthzGrpc"] {
		t.Errorf("fields %v include the enclosing ExtensionProvider's", fields)
	}
}
