package monitoring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// shippedAlerts are the alerts the runbook (docs/operating.md) documents,
// in the rules' order: one missing is a regression, one added must be
// documented and tested here too.
func shippedAlerts() []string {
	return []string{
		"RunnerReaperNoSuccessfulSweep",
		"RunnerReaperScopeSkipped",
		"RunnerReaperMassSuspicion",
		"RunnerReaperActionBoundHit",
		"RunnerReaperReapLoop",
		"RunnerReaperCandidatesPilingUp",
		"RunnerReaperRateLimited",
		"RunnerReaperPushStale",
		"RunnerReaperNoLeader",
		"RunnerReaperWatchNotLive",
	}
}

// ruleSources are the two shipped forms of the rules: the chart's rule
// file, and the component's PrometheusRule's spec written out as one.
func ruleSources(t *testing.T) map[string]string {
	l := files(t)
	return map[string]string{
		"chart rules.yaml":              l.chartRules,
		"component PrometheusRule spec": componentSpecFile(t, l),
	}
}

// Both forms pass promtool's own check, lint included (duplicate rules).
func TestRulesPassPromtoolCheck(t *testing.T) {
	for name, path := range ruleSources(t) {
		t.Run(name, func(t *testing.T) {
			out, err := promtool(t, "check", "rules", "--lint=all", "--lint-fatal", path)
			require.NoError(t, err, "promtool check rules %s:\n%s", path, out)
			assert.Contains(t, out, "SUCCESS: 10 rules found")
		})
	}
}

// unitTests returns the promtool unit test files of testdata.
func unitTests(t *testing.T) []string {
	t.Helper()
	tests, err := filepath.Glob(filepath.Join(files(t).testdata, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, tests, "no promtool unit tests in testdata")
	return tests
}

// chartRulesRef is how every unit test names the rules it tests: the
// chart's file, relative to testdata, so that `promtool test rules
// test/monitoring/testdata/*.yaml` runs them as they are.
const chartRulesRef = "  - ../../../charts/runner-reaper/files/monitoring/rules.yaml\n"

// unitTestsAgainst copies the unit tests into a temporary directory,
// pointed at the rule file rules, and returns their paths.
func unitTestsAgainst(t *testing.T, rules string) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, src := range unitTests(t) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(b), chartRulesRef), "%s must name the chart's rules.yaml once, as %q", src, chartRulesRef)
		dst := filepath.Join(dir, filepath.Base(src))
		require.NoError(t, os.WriteFile(dst, []byte(strings.Replace(string(b), chartRulesRef, "  - "+rules+"\n", 1)), 0o600))
		out = append(out, dst)
	}
	return out
}

// Each alert fires, and stays quiet, when its unit tests say: on series
// recorded as Prometheus sees a Pushgateway, at a five-minute sweep
// cadence, with several instances of which only some are failing, and
// reapers that recover. Run against both shipped forms.
func TestAlertUnitTests(t *testing.T) {
	for name, path := range ruleSources(t) {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"test", "rules"}, unitTestsAgainst(t, path)...)
			out, err := promtool(t, args...)
			require.NoError(t, err, "promtool test rules:\n%s", out)
			assert.NotContains(t, out, "FAILED")
		})
	}
}

// unitTestFile is a promtool unit test file, as much as the tests read.
type unitTestFile struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name        string `yaml:"name"`
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string      `yaml:"alertname"`
			EvalTime  string      `yaml:"eval_time"`
			ExpAlerts []yaml.Node `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// Every alert has unit tests where it fires and where it does not, and no
// unit test names an alert that does not exist: promtool passes an
// expectation of no alert for a name no rule has, which would prove
// nothing.
func TestEveryAlertIsTestedFiringAndQuiet(t *testing.T) {
	var rules ruleFile
	readYAML(t, files(t).chartRules, &rules)
	var names []string
	for _, r := range rules.alerts() {
		names = append(names, r.Alert)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, path := range unitTests(t) {
		var f unitTestFile
		readYAML(t, path, &f)
		for _, g := range f.Tests {
			assert.Equal(t, "15s", g.Interval, "%s: %q: series are scraped every 15 s, as a Pushgateway is", path, g.Name)
			for _, c := range g.AlertRuleTest {
				assert.Contains(t, names, c.Alertname, "%s: %q tests an alert no rule has", path, g.Name)
				if len(c.ExpAlerts) > 0 {
					fires[c.Alertname]++
				} else {
					quiet[c.Alertname]++
				}
			}
		}
	}
	for _, n := range names {
		assert.Positive(t, fires[n], "%s: no unit test where it fires", n)
		assert.Positive(t, quiet[n], "%s: no unit test where it stays quiet", n)
	}
}

// The shipped alerts are the documented ones, in one group, each with a
// severity and the annotations an on-call person reads, its runbook link
// pointing at its own section of the runbook, which must exist: GitHub
// makes a heading's anchor by lower-casing it.
func TestAlertsAreDocumentedAndLabelled(t *testing.T) {
	l := files(t)
	var rules ruleFile
	readYAML(t, l.chartRules, &rules)
	runbook, err := os.ReadFile(filepath.Join(l.root, "docs", "operating.md"))
	require.NoError(t, err)
	headings := map[string]bool{}
	for _, line := range strings.Split(string(runbook), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings[h] = true
		}
	}
	require.Len(t, rules.Groups, 1)
	assert.Equal(t, "runner-reaper", rules.Groups[0].Name)
	var names []string
	for _, r := range rules.alerts() {
		names = append(names, r.Alert)
		assert.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], "%s: severity", r.Alert)
		assert.Contains(t, r.Annotations["summary"], "{{ $labels.instance }}", "%s: the summary names the instance", r.Alert)
		assert.Contains(t, r.Annotations["description"], "{{ $labels.instance }}", "%s: the description names the instance", r.Alert)
		assert.Equal(t, "https://github.com/runner-reaper/runner-reaper/blob/main/docs/operating.md#"+strings.ToLower(r.Alert), r.Annotations["runbook_url"], "%s: runbook", r.Alert)
		assert.True(t, headings[r.Alert], "%s: docs/operating.md has no heading \"### %s\" for its runbook link", r.Alert, r.Alert)
	}
	assert.Equal(t, shippedAlerts(), names)
}

// mutation is a deliberate break of one alert: from, found once in the
// alert's expr (or its for), replaced by to.
type mutation struct {
	alert    string
	field    string // "expr" or "for"
	from, to string
	breaks   string
}

// The unit tests catch a broken alert: each mutation below is applied to
// a copy of the rules, and promtool test rules must fail on that alert.
// Each one is a mistake the tests are there to catch, in both directions:
// an alert that no longer fires, and one that fires when it should not.
func TestAlertUnitTestsCatchBrokenAlerts(t *testing.T) {
	mutations := []mutation{
		{"RunnerReaperNoSuccessfulSweep", "expr", "(runner_reaper_last_success_timestamp_seconds) > 600", "(runner_reaper_last_success_timestamp_seconds) > 6000", "a stale success never fires"},
		{"RunnerReaperNoSuccessfulSweep", "expr", "(runner_reaper_last_success_timestamp_seconds) > 600", "(runner_reaper_last_success_timestamp_seconds) > 60", "fires before ten minutes"},
		{"RunnerReaperNoSuccessfulSweep", "expr", "[1h])) > 600", "[1h])) > 6000", "a reaper that never succeeded never fires"},
		{"RunnerReaperNoSuccessfulSweep", "expr", "unless on (instance)", "unless on (instance, job)", "a healthy reaper fires: its success group has another job"},
		{"RunnerReaperNoSuccessfulSweep", "for", "2m", "0s", "a sweep in flight fires"},
		{"RunnerReaperScopeSkipped", "expr", ">= 10", ">= 11", "ten skips in a row do not fire"},
		{"RunnerReaperScopeSkipped", "expr", ">= 10", ">= 9", "nine skips in a row fire"},
		{"RunnerReaperMassSuspicion", "expr", "> 0", "> 2", "two scopes do not fire"},
		{"RunnerReaperMassSuspicion", "expr", "> 0", ">= 0", "no mass suspicion fires"},
		{"RunnerReaperActionBoundHit", "expr", ">= 5", ">= 6", "five in a row do not fire"},
		{"RunnerReaperActionBoundHit", "expr", ">= 5", ">= 4", "four in a row fire"},
		{"RunnerReaperReapLoop", "expr", "(runner_reaper_reap_loop_actions) > 0", "(runner_reaper_reap_loop_actions) > 5", "a loop of five does not fire"},
		{"RunnerReaperReapLoop", "expr", "max by (instance, group, fingerprint)", "max by (instance)", "two looping groups are one alert"},
		{"RunnerReaperCandidatesPilingUp", "expr", ">= 5", ">= 6", "a count of 5 growing does not fire"},
		{"RunnerReaperCandidatesPilingUp", "expr", ">= 5", ">= 4", "a count below the floor fires"},
		{"RunnerReaperCandidatesPilingUp", "expr", "})\n  >\n", "})\n  >=\n", "a steady count fires"},
		{"RunnerReaperCandidatesPilingUp", "expr", "\n      and on (instance)\n      max by (instance) (runner_reaper_last_sweep_timestamp_seconds offset 1h)", "", "a count without an hour of history fires"},
		{"RunnerReaperCandidatesPilingUp", "for", "30m", "20m", "fires after 20 minutes of growth"},
		{"RunnerReaperRateLimited", "expr", "> 0", "> 3600", "a limited reaper does not fire"},
		{"RunnerReaperRateLimited", "for", "30m", "20m", "fires after 20 minutes"},
		{"RunnerReaperPushStale", "expr", "> 900", "> 9000", "a stopped reaper does not fire"},
		{"RunnerReaperPushStale", "expr", "> 900", "> 800", "fires before 15 minutes"},
		{"RunnerReaperPushStale", "expr", " and on (job, instance) runner_reaper_last_sweep_timestamp_seconds", "", "another job's old group fires"},
		{"RunnerReaperNoSuccessfulSweep", "for", "2m", "30s", "a failover fires before the new leader's first sweep"},
		{"RunnerReaperNoLeader", "expr", "(runner_reaper_leader) < 1", "(runner_reaper_leader) < 0", "replicas all standing by do not fire"},
		{"RunnerReaperNoLeader", "expr", "max_over_time(runner_reaper_leader[1h])", "runner_reaper_leader", "replicas that are gone do not fire"},
		{"RunnerReaperNoLeader", "expr", "unless on (instance)\n  runner_reaper_leader", "unless on (instance)\n  vector(1)", "a reaper with a leader fires"},
		{"RunnerReaperNoLeader", "for", "5m", "2m", "a gap of three minutes fires"},
		{"RunnerReaperWatchNotLive", "expr", "== 0", "== 2", "a watch not live does not fire"},
		{"RunnerReaperWatchNotLive", "expr", "min by (instance, pod, resource)", "min by (instance, resource)", "the alert does not name the replica"},
		{"RunnerReaperWatchNotLive", "for", "5m", "2m", "a relist of three minutes fires"},
	}
	for _, a := range shippedAlerts() {
		// The simplest break of all: the alert never fires.
		mutations = append(mutations, mutation{a, "expr", "", "vector(1) < 0", "never fires"})
	}
	var rules ruleFile
	readYAML(t, files(t).chartRules, &rules)
	for _, m := range mutations {
		t.Run(m.alert+"/"+m.breaks, func(t *testing.T) {
			t.Parallel()
			broken := mutate(t, rules, m)
			args := append([]string{"test", "rules"}, unitTestsAgainst(t, broken)...)
			out, err := promtool(t, args...)
			require.Error(t, err, "promtool test rules passed with %s broken (%s)", m.alert, m.breaks)
			assert.Contains(t, out, "alertname: "+m.alert+",", "the failure is %s's:\n%s", m.alert, out)
		})
	}
}

// mutate writes a copy of rules with m applied and returns its path. An
// empty from replaces the whole field.
func mutate(t *testing.T, rules ruleFile, m mutation) string {
	t.Helper()
	var out ruleFile
	b, err := yaml.Marshal(rules)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &out)) // a deep copy
	found := false
	for gi := range out.Groups {
		for ri := range out.Groups[gi].Rules {
			r := &out.Groups[gi].Rules[ri]
			if r.Alert != m.alert {
				continue
			}
			found = true
			field := map[string]*string{"expr": &r.Expr, "for": &r.For}[m.field]
			require.NotNil(t, field, "mutation field %q", m.field)
			if m.from == "" {
				*field = m.to
				continue
			}
			require.Equal(t, 1, strings.Count(*field, m.from), "%s's %s must hold %q once:\n%s", m.alert, m.field, m.from, *field)
			*field = strings.Replace(*field, m.from, m.to, 1)
		}
	}
	require.True(t, found, "no alert %s", m.alert)
	b, err = yaml.Marshal(out)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "broken-rules.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}
