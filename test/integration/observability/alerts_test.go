package observability

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// alertTests is where the promtool unit tests of the alerts are: <alert>_fires.yaml and
// <alert>_quiet.yaml for each alert, <alert> its name without RateLimit, in snake case.
var alertTests = filepath.Join("test", "integration", "observability", "testdata", "alerts")

// promtool runs promtool with args in the repository, failing the test on a non-zero exit.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := missing.Tool(t, "promtool", "run `make promtool` (Debian package prometheus)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = kube.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesCheck: promtool accepts the rule file as Prometheus loads it.
func TestAlertRulesCheck(t *testing.T) {
	out := promtool(t, "check", "rules", alertsFile)
	if want := len(alertRules(t)); !strings.Contains(out, "SUCCESS: "+strconv.Itoa(want)+" rules found") {
		t.Errorf("promtool check rules:\n%s\nwant %d rules found", out, want)
	}
}

// TestAlertRulesUnit runs every alert's promtool tests: one on series that must fire it
// (with its labels and rendered annotations), one on look-alikes that must not.
func TestAlertRulesUnit(t *testing.T) {
	for _, r := range alertRules(t) {
		base := snake(strings.TrimPrefix(r.Alert, "RateLimit"))
		for _, kind := range []string{"fires", "quiet"} {
			t.Run(r.Alert+"/"+kind, func(t *testing.T) {
				path := filepath.Join(alertTests, base+"_"+kind+".yaml")
				var file struct {
					Tests []struct {
						AlertRuleTest []struct {
							Alertname string `json:"alertname"`
							ExpAlerts []any  `json:"exp_alerts"`
						} `json:"alert_rule_test"`
					} `json:"tests"`
				}
				if err := yaml.Unmarshal(readRepo(t, path), &file); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				// The file tests this alert, and fires it or not as its name says.
				n := 0
				for _, tc := range file.Tests {
					for _, a := range tc.AlertRuleTest {
						if a.Alertname != r.Alert {
							t.Errorf("%s tests alert %s, want %s", path, a.Alertname, r.Alert)
						}
						if fires := len(a.ExpAlerts) > 0; fires != (kind == "fires") {
							t.Errorf("%s: an evaluation expects %d alerts; a %s test wants %s", path, len(a.ExpAlerts), kind,
								map[bool]string{true: "some", false: "none"}[kind == "fires"])
						}
						n++
					}
				}
				if n == 0 {
					t.Fatalf("%s evaluates no alert", path)
				}
				if out := promtool(t, "test", "rules", path); !strings.Contains(out, "SUCCESS") {
					t.Errorf("promtool test rules %s:\n%s", path, out)
				}
			})
		}
	}
}

// TestAlertRulesMetadata: every alert says how bad it is and where its runbook is, and the
// runbook is a section of docs/operations.md.
func TestAlertRulesMetadata(t *testing.T) {
	anchors := headingAnchors(string(readRepo(t, runbookFile)))
	const runbooks = "https://github.com/ratelimit-dev/ratelimit-operator/blob/main/docs/operations.md#"
	var names []string
	for _, r := range alertRules(t) {
		names = append(names, r.Alert)
		if !regexp.MustCompile(`^RateLimit[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
			t.Errorf("alert %q: name it RateLimit<CamelCase>", r.Alert)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		want := runbooks + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("%s: %s has no heading %q for its runbook_url", r.Alert, runbookFile, r.Alert)
		}
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("alert names repeat: %v", names)
	}
}

// TestAlertTestsHaveAlerts: no test file is left over from a renamed or removed alert.
func TestAlertTestsHaveAlerts(t *testing.T) {
	want := map[string]bool{}
	for _, r := range alertRules(t) {
		base := snake(strings.TrimPrefix(r.Alert, "RateLimit"))
		want[base+"_fires.yaml"], want[base+"_quiet.yaml"] = true, true
	}
	files, err := filepath.Glob(filepath.Join(kube.RepoRoot(), alertTests, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s tests no alert of %s", f, alertsFile)
		}
	}
}

// snake is CamelCase as camel_case.
func snake(s string) string {
	return strings.ToLower(regexp.MustCompile(`([a-z0-9])([A-Z])`).ReplaceAllString(s, "${1}_${2}"))
}
