package monitoring

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// selected is what promql-names answers for one expression.
type selected struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names"`
	Error string   `json:"error"`
}

// selectedNames parses every expression with Prometheus's own parser
// (promql-names, built from tools/prometheus) and returns what each
// selects, by the same keys.
func selectedNames(t *testing.T, exprs map[string]string) map[string]selected {
	t.Helper()
	bin := testenv.RequirePrometheusTool(t, "promql-names")
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	in := make([]string, 0, len(keys))
	for _, k := range keys {
		in = append(in, exprs[k])
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "promql-names: %s", stderr.String())
	var answers []selected
	require.NoError(t, json.Unmarshal(out, &answers), "promql-names answered %s", out)
	require.Len(t, answers, len(keys))
	got := map[string]selected{}
	for i, k := range keys {
		got[k] = answers[i]
	}
	return got
}

// ruleExprs returns every expression of the chart's rules, by alert.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	var rules ruleFile
	readYAML(t, files(t).chartRules, &rules)
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["rule "+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

// Every expression of the alerts and the dashboard parses, and names only
// metrics of the contract (metrics/names.go) or the Pushgateway's own
// per-group series, and at least one of the contract's: a metric renamed
// in names.go breaks this test, not a dashboard or an alert in
// production.
func TestExpressionsSelectOnlyContractMetrics(t *testing.T) {
	allowed := append(contractNames(), pushgatewayNames()...)
	for _, tc := range []struct {
		name  string
		exprs map[string]string
	}{
		{"rules", ruleExprs(t)},
		{"dashboard", dashboardExprs(t, files(t).chartDashboard)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, tc.exprs)
			for where, s := range selectedNames(t, tc.exprs) {
				if !assert.Empty(t, s.Error, "%s does not parse: %s", where, s.Expr) {
					continue
				}
				for _, n := range s.Names {
					assert.Contains(t, allowed, n, "%s selects %q, not a metric of metrics/names.go:\n%s", where, n, s.Expr)
				}
				assert.True(t, slices.ContainsFunc(s.Names, func(n string) bool { return slices.Contains(contractNames(), n) }),
					"%s selects no metric of the contract: %v", where, s.Names)
			}
		})
	}
}

// Every metric of the contract has a panel: a figure added to the push
// without one is missing from the dashboard.
func TestDashboardShowsEveryContractMetric(t *testing.T) {
	shown := map[string]bool{}
	for _, s := range selectedNames(t, dashboardExprs(t, files(t).chartDashboard)) {
		for _, n := range s.Names {
			shown[n] = true
		}
	}
	var missing []string
	for _, n := range contractNames() {
		if !shown[n] {
			missing = append(missing, n)
		}
	}
	assert.Empty(t, missing, "metrics of metrics/names.go no dashboard panel shows: %s", strings.Join(missing, ", "))
}

// promql-names reports what it cannot parse and a selector without a
// literal name, so the two tests above cannot pass by missing them.
func TestPromqlNamesReportsWhatItCannotName(t *testing.T) {
	got := selectedNames(t, map[string]string{
		"broken":  "sum(",
		"regex":   `{__name__=~"runner_reaper_.+"}`,
		"offset":  `max(runner_reaper_sweep_actions offset 1h) or on () push_time_seconds`,
		"nothing": "vector(1)",
	})
	assert.NotEmpty(t, got["broken"].Error)
	assert.Equal(t, []string{`{__name__=~"runner_reaper_.+"}`}, got["regex"].Names)
	assert.Equal(t, []string{"push_time_seconds", "runner_reaper_sweep_actions"}, got["offset"].Names)
	assert.Empty(t, got["nothing"].Names)
}
