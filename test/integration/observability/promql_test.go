package observability

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// The files under test, relative to the repository.
var (
	alertsFile    = filepath.Join("charts", "ratelimit-operator", "files", "alerts.yaml")
	dashboardFile = filepath.Join("charts", "ratelimit-operator", "files", "dashboard.json")
	runbookFile   = filepath.Join("docs", "operations.md")
)

// query is one PromQL expression and where it comes from, for messages.
type query struct{ where, expr string }

// selector is a metric a query reads, with the labels its matchers name and the values its
// equality matchers want.
type selector struct {
	where, metric string
	labels        map[string]string // label -> value ("" for a matcher other than =)
}

// grafanaVars stand for the dashboard's variables, so its queries parse as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$namespace", ".*")

// parse parses q.expr as PromQL, Grafana variables replaced, and returns its selectors.
func parse(t *testing.T, q query) []selector {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(q.expr))
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", q.where, q.expr, err)
		return nil
	}
	var out []selector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{where: q.where, metric: vs.Name, labels: map[string]string{}}
		for _, m := range vs.LabelMatchers {
			switch {
			case m.Name == "__name__":
			case m.Type == labels.MatchEqual:
				s.labels[m.Name] = m.Value
			default:
				s.labels[m.Name] = ""
			}
		}
		if s.metric == "" {
			t.Errorf("%s: %q selects by matchers only; name the metric", q.where, q.expr)
		}
		out = append(out, s)
		return nil
	})
	return out
}

// rule is one alerting rule of alerts.yaml.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules reads alerts.yaml.
func alertRules(t *testing.T) []rule {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(readRepo(t, alertsFile), &file); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []rule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s holds no rules", alertsFile)
	}
	return rules
}

// alertQueries are the expressions of alerts.yaml.
func alertQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, r := range alertRules(t) {
		qs = append(qs, query{where: alertsFile + " " + r.Alert, expr: r.Expr})
	}
	return qs
}

func readRepo(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kube.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`).ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// headingAnchors are the anchors of the Markdown headings of doc.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(doc, "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchors[githubAnchor(strings.TrimLeft(h, "#"))] = true
		}
	}
	return anchors
}
