package monitoring

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// pushSweep pushes one sweep's figures for instance as the reaper does: a
// PUT of the group job="runner-reaper", and, for a sweep that exited 0, a
// PUT of the group job="runner-reaper-success" with the success time.
func pushSweep(t *testing.T, pg, instance string, start time.Time, exit, massSuspicion float64) {
	t.Helper()
	gauge := func(name string, v float64, labels prometheus.Labels) prometheus.Collector {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name, ConstLabels: labels})
		g.Set(v)
		return g
	}
	sweep := float64(start.Unix())
	require.NoError(t, push.New(pg, "runner-reaper").Grouping("instance", instance).
		Collector(gauge(metrics.PromLastSweep, sweep, nil)).
		Collector(gauge(metrics.PromExitCode, exit, prometheus.Labels{"mode": "sweep"})).
		Collector(gauge(metrics.PromMassSuspicion, massSuspicion, nil)).
		Push(), "push %s's sweep", instance)
	if exit == 0 {
		require.NoError(t, push.New(pg, "runner-reaper-success").Grouping("instance", instance).
			Collector(gauge(metrics.PromLastSuccess, sweep, nil)).
			Push(), "push %s's success", instance)
	}
}

// The shipped rules load into a real Prometheus scraping a real
// Pushgateway with honor_labels, and what they assume of the labels holds
// there: an alert fires for the instance whose sweep says so and names
// it, the success group (another job) joins its sweep group on instance
// alone, and push_time_seconds joins the sweep group on job and instance.
func TestShippedRulesOnARealPushgateway(t *testing.T) {
	pg := testenv.StartPushgateway(t)
	now := time.Now()
	pushSweep(t, pg, "shard-a", now.Add(-20*time.Second), 0, 2)
	pushSweep(t, pg, "shard-b", now.Add(-20*time.Second), 1, 0)
	prom := testenv.StartPrometheus(t, strings.TrimPrefix(pg, "http://"), files(t).chartRules)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	alerts, err := testenv.WaitPromAlerts(ctx, prom, func(a []testenv.PromAlert) bool { return len(a) > 0 })
	require.NoError(t, err)
	require.Len(t, alerts, 1, "only shard-a's mass suspicion; nothing else is due yet: %v", alerts)
	assert.Equal(t, map[string]string{"alertname": "RunnerReaperMassSuspicion", "instance": "shard-a", "severity": "warning"}, alerts[0].Labels)
	assert.Equal(t, "firing", alerts[0].State)
	assert.Equal(t, "runner-reaper shard-a: mass suspicion in 2 scope(s)", alerts[0].Annotations["summary"])

	// RunnerReaperNoSuccessfulSweep's two branches: shard-a's success is
	// 20 s old; shard-b, which never succeeded, is the one the success
	// group does not hold.
	age, err := testenv.WaitPromQuery(ctx, prom, `time() - max by (instance) (`+metrics.PromLastSuccess+`)`,
		func(s []testenv.PromSample) bool { return len(s) == 1 })
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"instance": "shard-a"}, age[0].Labels)
	assert.InDelta(t, 20, age[0].Value, 15)
	never, err := testenv.PromQuery(ctx, prom, `max by (instance) (`+metrics.PromLastSweep+`) unless on (instance) `+metrics.PromLastSuccess)
	require.NoError(t, err)
	require.Len(t, never, 1)
	assert.Equal(t, map[string]string{"instance": "shard-b"}, never[0].Labels)

	// RunnerReaperPushStale's join: one fresh push age per instance, the
	// success group left out.
	pushed, err := testenv.PromQuery(ctx, prom, `time() - max by (instance) (push_time_seconds and on (job, instance) `+metrics.PromLastSweep+`)`)
	require.NoError(t, err)
	require.Len(t, pushed, 2)
	for _, s := range pushed {
		assert.Less(t, s.Value, 60.0, "%s pushed just now", s.Labels["instance"])
	}
	joined, err := testenv.PromQuery(ctx, prom, `count(push_time_seconds and on (job, instance) `+metrics.PromLastSweep+`)`)
	require.NoError(t, err)
	require.Len(t, joined, 1)
	assert.Equal(t, 2.0, joined[0].Value, "the two sweep groups' push times, not the success group's")
}
