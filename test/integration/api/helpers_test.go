package api

import (
	"strings"
	"testing"
)

// set writes value at a dotted path inside obj ("spec.limits.0.requests"), creating maps on
// the way; a numeric element indexes a list.
func set(t *testing.T, obj map[string]any, path string, value any) {
	t.Helper()
	parts := strings.Split(path, ".")
	var cur any = obj
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = value
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			idx := atoi(t, p)
			if last {
				c[idx] = value
				return
			}
			cur = c[idx]
		default:
			t.Fatalf("set %s: %q is not a map or list", path, strings.Join(parts[:i], "."))
		}
	}
}

// del removes the field at a dotted path of maps.
func del(t *testing.T, obj map[string]any, path string) {
	t.Helper()
	parts := strings.Split(path, ".")
	cur := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("del %s: %s is not a map", path, p)
		}
		cur = next
	}
	delete(cur, parts[len(parts)-1])
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("list index %q is not a number", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
