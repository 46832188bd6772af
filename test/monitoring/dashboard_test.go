package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboard is the Grafana dashboard JSON, as much of it as the tests
// read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Datasource *datasourceRef `json:"datasource"`
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
	} `json:"targets"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasourceRef  `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
}

func readDashboard(t *testing.T, path string) dashboard {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d), "%s is not JSON", path)
	return d
}

// The panels every operator of the reaper looks for.
func wantedPanels() []string {
	return []string{
		"Last success age", "Exit code", "Last sweep age", "Last push age",
		"Mass suspicion", "Rate-limited until", "Actions by verdict and result",
		"Skipped scopes by kind", "Deferred scopes", "Streaks",
		"Requests per sweep", "Sweep duration", "Reap loops",
	}
}

// The dashboard is JSON Grafana can import as it is: a recent schema, a
// Prometheus data source variable every panel and query uses, an instance
// variable every query filters by, and panels that each have a query, a
// unique id and a place on the 24-column grid that no other panel takes.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t, files(t).chartDashboard)
	assert.Equal(t, "runner-reaper", d.UID)
	assert.NotEmpty(t, d.Title)
	assert.GreaterOrEqual(t, d.SchemaVersion, 39, "a schema Grafana 10.4 and later read without migrating")

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	require.Contains(t, vars, "datasource")
	assert.Equal(t, "datasource", vars["datasource"].Type)
	assert.JSONEq(t, `"prometheus"`, string(vars["datasource"].Query))
	require.Contains(t, vars, "instance")
	inst := vars["instance"]
	assert.Equal(t, "query", inst.Type)
	assert.Equal(t, &datasourceRef{Type: "prometheus", UID: "${datasource}"}, inst.Datasource)
	assert.True(t, inst.Multi && inst.IncludeAll, "instance: several shards, or all")
	assert.Regexp(t, `^label_values\(runner_reaper_\w+, instance\)$`, inst.Definition)

	ids := map[int]string{}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		assert.Equal(t, &datasourceRef{Type: "prometheus", UID: "${datasource}"}, p.Datasource, "%q: data source", p.Title)
		if assert.NotEmpty(t, p.Targets, "%q: no query", p.Title) {
			refs := map[string]bool{}
			for _, q := range p.Targets {
				assert.Equal(t, &datasourceRef{Type: "prometheus", UID: "${datasource}"}, q.Datasource, "%q %s: data source", p.Title, q.RefID)
				assert.NotEmpty(t, q.Expr, "%q %s: empty query", p.Title, q.RefID)
				assert.Contains(t, q.Expr, `instance=~"$instance"`, "%q %s: the instance variable filters it", p.Title, q.RefID)
				assert.False(t, refs[q.RefID], "%q: refId %s twice", p.Title, q.RefID)
				refs[q.RefID] = true
			}
		}
		g := p.GridPos
		assert.True(t, g.X >= 0 && g.W > 0 && g.X+g.W <= 24 && g.Y >= 0 && g.H > 0, "%q: gridPos %+v off the 24-column grid", p.Title, g)
	}
	assert.Subset(t, titles, wantedPanels())
	for i, a := range d.Panels {
		for _, b := range d.Panels[i+1:] {
			assert.False(t, overlap(a, b), "%q and %q overlap", a.Title, b.Title)
		}
	}
}

func overlap(a, b panel) bool {
	x := a.GridPos.X < b.GridPos.X+b.GridPos.W && b.GridPos.X < a.GridPos.X+a.GridPos.W
	y := a.GridPos.Y < b.GridPos.Y+b.GridPos.H && b.GridPos.Y < a.GridPos.Y+a.GridPos.H
	return x && y
}

// labelValues is Grafana's Prometheus variable query label_values(selector,
// label), whose selector is PromQL.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)

// dashboardExprs returns every PromQL expression of the dashboard: each
// query's, and each query variable's selector, named by where it is.
func dashboardExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	d := readDashboard(t, path)
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out[fmt.Sprintf("panel %q query %s", p.Title, q.RefID)] = q.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
		out["variable "+v.Name] = m[1]
	}
	return out
}
