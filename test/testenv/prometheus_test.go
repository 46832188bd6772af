package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/metrics"
)

// The binaries in .cache/bin are the releases the tools modules pin, so
// that what the alerts were tested against is what the docs name.
func TestPrometheusToolsAreThePinnedReleases(t *testing.T) {
	for _, tc := range []struct {
		bin, want string
	}{
		{"prometheus", "prometheus, version " + PrometheusVersion + " "},
		{"promtool", "promtool, version " + PrometheusVersion + " "},
		{"pushgateway", "pushgateway, version " + PushgatewayVersion + " "},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			bin := RequirePrometheusTool(t, tc.bin)
			out, err := exec.Command(bin, "--version").CombinedOutput()
			require.NoError(t, err, "%s --version: %s", bin, out)
			assert.Contains(t, string(out), tc.want)
		})
	}
}

// A gauge pushed with client_golang's push package, as a sweep pushes its
// figures, reaches Prometheus through a real Pushgateway with its group's
// job and instance (honor_labels), and the given rules evaluate on it: a
// recording rule doubles it, and an alert fires for the instance whose
// value is above 0 and not for the other.
func TestPrometheusScrapesThePushgatewayAndEvaluatesRules(t *testing.T) {
	pg := StartPushgateway(t)
	for instance, v := range map[string]float64{"shard-a": 3, "shard-b": 0} {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: metrics.PromMassSuspicion, Help: "scopes under mass suspicion"})
		g.Set(v)
		require.NoError(t, push.New(pg, "runner-reaper").Grouping("instance", instance).Collector(g).Push(), "push %s", instance)
	}

	rules := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: testenv
    rules:
      - record: testenv:mass_suspicion:doubled
        expr: 2 * `+metrics.PromMassSuspicion+`
      - alert: TestenvMassSuspicion
        expr: `+metrics.PromMassSuspicion+` > 0
        labels:
          severity: test
`), 0o600))
	prom := StartPrometheus(t, strings.TrimPrefix(pg, "http://"), rules)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	got, err := WaitPromQuery(ctx, prom, metrics.PromMassSuspicion, func(s []PromSample) bool { return len(s) == 2 })
	require.NoError(t, err)
	byInstance := map[string]PromSample{}
	for _, s := range got {
		byInstance[s.Labels["instance"]] = s
	}
	require.Contains(t, byInstance, "shard-a")
	assert.Equal(t, map[string]string{"__name__": metrics.PromMassSuspicion, "job": "runner-reaper", "instance": "shard-a"}, byInstance["shard-a"].Labels,
		"the group's job and instance, not the scrape's")
	assert.Equal(t, 3.0, byInstance["shard-a"].Value)
	assert.Equal(t, 0.0, byInstance["shard-b"].Value)

	pushed, err := WaitPromQuery(ctx, prom, `push_time_seconds{job="runner-reaper",instance="shard-a"}`, func(s []PromSample) bool { return len(s) == 1 })
	require.NoError(t, err, "the Pushgateway's own push_time_seconds, per group")
	assert.InDelta(t, float64(time.Now().Unix()), pushed[0].Value, 120)

	doubled, err := WaitPromQuery(ctx, prom, `testenv:mass_suspicion:doubled{instance="shard-a"}`, func(s []PromSample) bool { return len(s) == 1 })
	require.NoError(t, err, "the recording rule evaluated")
	assert.Equal(t, 6.0, doubled[0].Value)

	alerts, err := WaitPromAlerts(ctx, prom, func(a []PromAlert) bool { return len(a) > 0 && a[0].State == "firing" })
	require.NoError(t, err, "the alert fired")
	require.Len(t, alerts, 1, "shard-b's 0 fires nothing")
	assert.Equal(t, map[string]string{"alertname": "TestenvMassSuspicion", "job": "runner-reaper", "instance": "shard-a", "severity": "test"}, alerts[0].Labels)
	assert.Equal(t, "3e+00", alerts[0].Value)
}

// A query Prometheus refuses comes back as an error that says why, not as
// an empty answer a test could take for "no series".
func TestPromQuerySaysWhyPrometheusRefused(t *testing.T) {
	pg := StartPushgateway(t)
	prom := StartPrometheus(t, strings.TrimPrefix(pg, "http://"), "")
	_, err := PromQuery(context.Background(), prom, "sum(")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad_data")
}
