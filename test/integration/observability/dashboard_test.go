package observability

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *datasource              `json:"datasource"`
	GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct{ Type, UID string }

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readRepo(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels are the dashboard's panels, those of collapsed rows included.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches a Grafana label_values(<selector>, <label>) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardQueries are the PromQL of every panel target and of the variables' label_values.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	d := readDashboard(t)
	var qs []query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			qs = append(qs, query{where: fmt.Sprintf("%s panel %q target %s", dashboardFile, p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s variable %s: definition %q is not label_values(<selector>, <label>)", dashboardFile, v.Name, v.Definition)
			continue
		}
		qs = append(qs, query{where: fmt.Sprintf("%s variable %s", dashboardFile, v.Name), expr: m[1]})
	}
	return qs
}

// TestDashboardShape: a dashboard Grafana imports as it is: a fixed uid, a recent schema, a
// Prometheus data source chosen by a variable that every panel and target uses, panels
// that do not overlap, and PromQL that parses in every target.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || len(d.UID) > 40 || d.Title == "" {
		t.Errorf("uid %q, title %q: want a fixed uid of at most 40 characters and a title", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want a recent one (36 or later)", d.SchemaVersion)
	}
	checkLayout(t, d.allPanels())
	checkDatasources(t, d)
	for _, q := range dashboardQueries(t) {
		if len(parse(t, q)) == 0 {
			t.Errorf("%s: %q reads no metric", q.where, q.expr)
		}
	}
}

// checkLayout: panel ids are unique, and panels fit the 24 columns without overlapping.
func checkLayout(t *testing.T, panels []panel) {
	t.Helper()
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d repeats", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.X+g.W > 24 || g.W <= 0 || g.H <= 0 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps panel %q at (%d,%d)", p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
	}
}

// checkDatasources: a Prometheus data source variable, used by every panel and target.
func checkDatasources(t *testing.T, d dashboard) {
	t.Helper()
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("no Prometheus data source variable (templating type datasource, query prometheus)")
	}
	usesVar := func(ds *datasource) bool { return ds != nil && ds.Type == "prometheus" && ds.UID == dsVar }
	targets := 0
	for _, p := range d.allPanels() {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		if !usesVar(p.Datasource) {
			t.Errorf("panel %q: datasource %+v, want the %s variable", p.Title, p.Datasource, dsVar)
		}
		for _, tg := range p.Targets {
			targets++
			if !usesVar(tg.Datasource) {
				t.Errorf("panel %q target %s: datasource %+v, want the %s variable", p.Title, tg.RefID, tg.Datasource, dsVar)
			}
		}
	}
	if targets == 0 {
		t.Fatal("the dashboard queries nothing")
	}
}

// TestAlertQueriesParse: every alert's expression parses as PromQL and reads a metric.
func TestAlertQueriesParse(t *testing.T) {
	for _, q := range alertQueries(t) {
		if len(parse(t, q)) == 0 {
			t.Errorf("%s: %q reads no metric", q.where, q.expr)
		}
	}
}
