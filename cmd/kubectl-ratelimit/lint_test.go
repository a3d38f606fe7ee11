package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// lintRun runs "kubectl ratelimit lint" with args and returns stdout, stderr and the status.
func lintRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"lint"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestLintFiles: a file, a folder (its own files only) and a folder with -R, checked as the
// cluster would admit them: admitted ones, refusals naming the field (an unknown field, an
// override's tier its policy lacks), a warning, other kinds skipped; exit 1 only when
// something would be refused, or with --strict when something would be warned about.
func TestLintFiles(t *testing.T) {
	out, _, code := lintRun(t, "-f", "testdata/lint/good.yaml", "-n", "shop")
	if code != 0 || !strings.Contains(out, "RateLimitPolicy shop/orders: admitted") ||
		!strings.Contains(out, "RateLimitOverride shop/orders-alice: admitted") ||
		!strings.Contains(out, "2 checked: 2 admitted, 0 refused; 1 documents of other kinds skipped") {
		t.Fatalf("good.yaml: exit %d\n%s", code, out)
	}
	out, _, code = lintRun(t, "-f", "testdata/lint")
	if code != 0 || !strings.Contains(out, "login: admitted\n  warning: spec.failureMode: FailOpen") ||
		strings.Contains(out, "nested") {
		t.Fatalf("folder without -R: exit %d\n%s", code, out)
	}
	_, errOut, code := lintRun(t, "-f", "testdata/lint", "--strict")
	if code != 1 || !strings.Contains(errOut, "1 of 3 would be admitted with warnings (--strict)") {
		t.Fatalf("--strict: exit %d\n%s", code, errOut)
	}
	out, errOut, code = lintRun(t, "-R", "-f", "testdata/lint")
	for _, want := range []string{"default/typo: refused\n  error: spec.limitz: Forbidden: unknown field",
		"default/orders-gold: refused\n  error: spec.tier: Not found: \"gold\""} {
		if !strings.Contains(out, want) {
			t.Fatalf("-R: no %q in\n%s", want, out)
		}
	}
	if code != 1 || !strings.Contains(errOut, "error: 2 of 5 would be refused") {
		t.Fatalf("-R: exit %d, stderr %q", code, errOut)
	}
}

// TestLintJSON: -o json has one result a document, with its errors.
func TestLintJSON(t *testing.T) {
	out, _, code := lintRun(t, "-R", "-f", "testdata/lint", "-o", "json")
	var got struct {
		Results []lintJSON `json:"results"`
		Skipped int        `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if code != 1 || len(got.Results) != 5 || got.Skipped != 1 {
		t.Fatalf("exit %d, %d results, %d skipped", code, len(got.Results), got.Skipped)
	}
	refused := 0
	for _, r := range got.Results {
		if !r.Admitted {
			refused++
			if len(r.Errors) == 0 {
				t.Fatalf("%s refused without a reason", r.Source)
			}
		}
	}
	if refused != 2 {
		t.Fatalf("%d refused, want 2: %+v", refused, got.Results)
	}
}

// TestLintNeedsFiles: no -f, a missing file and a bad key prefix are errors before anything
// is checked.
func TestLintNeedsFiles(t *testing.T) {
	for _, args := range [][]string{{}, {"-f", "testdata/lint/none.yaml"}, {"-f", "testdata/lint", "--key-prefix", "{x"}} {
		if _, errOut, code := lintRun(t, args...); code != 1 || errOut == "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
