package e2e_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// shippedRules is the chart's rule file, the one the PrometheusRule holds.
const shippedRules = "../../charts/runner-reaper/files/monitoring/rules.yaml"

// The compiled binary pushes each sweep's metrics to a real
// Pushgateway, which a real Prometheus scrapes and evaluates the shipped
// alerts over. Two shards push side by side without replacing each other;
// a degraded shard's push leaves out the last success, and the healthy
// one's alert stays quiet while the suspicious one's fires; the OTLP
// export lands in the same Prometheus under the same names; and a
// Pushgateway that is down costs a warning, never the sweep's exit status.
func TestSweepMetricsReachPrometheus(t *testing.T) {
	pgw := testenv.StartPushgateway(t)
	pu, err := url.Parse(pgw)
	require.NoError(t, err)
	rules, err := filepath.Abs(shippedRules)
	require.NoError(t, err)
	prom := testenv.StartPrometheus(t, pu.Host, rules)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Shard a: a terminal pod reaped, and a zombie newly suspect, which
	// with these settings is mass suspicion.
	a := newWorld(t, map[string]string{"REAPER_PUSHGATEWAY_URL": pgw, "REAPER_METRICS_INSTANCE": "shard-a",
		"REAPER_MASS_SUSPICION_MIN": "1", "REAPER_MASS_SUSPICION_FRACTION": "0.1"})
	a.pod("acme-dead", dead())
	a.runner("acme-zombie", "offline", false)
	a.pod("acme-zombie", testenv.Running())
	ra := a.sweep()
	ra.requireCode(t, 0)
	assert.Empty(t, ra.msg("push metrics"), "the push succeeded")

	// Shard b: GitHub fails, so the sweep is degraded (exit 3).
	b := newWorld(t, map[string]string{"REAPER_PUSHGATEWAY_URL": pgw, "REAPER_METRICS_INSTANCE": "shard-b"})
	b.sim.Fault(ghsim.Any, ghsim.Any, ghsim.Fault{Status: 500})
	rb := b.sweep()
	rb.requireCode(t, 3)

	got := func(expr string) []testenv.PromSample {
		t.Helper()
		s, err := testenv.WaitPromQuery(ctx, prom, expr, func(s []testenv.PromSample) bool { return len(s) > 0 })
		require.NoError(t, err, expr)
		return s
	}
	one := func(expr string) float64 {
		t.Helper()
		s := got(expr)
		require.Len(t, s, 1, expr)
		return s[0].Value
	}
	assert.Equal(t, 1.0, one(metrics.PromActions+`{job="runner-reaper",instance="shard-a",verdict="terminal",result="deleted"}`))
	assert.Equal(t, 1.0, one(metrics.PromActions+`{instance="shard-a",verdict="zombie",result="pending-confirmation"}`))
	assert.Equal(t, 0.0, one(metrics.PromExitCode+`{instance="shard-a",mode="sweep"}`))
	assert.Equal(t, 3.0, one(metrics.PromExitCode+`{instance="shard-b",mode="sweep"}`), "shard b did not replace shard a")
	assert.Equal(t, 1.0, one(metrics.PromScopesSkipped+`{instance="shard-b",kind="failed"}`))
	assert.Equal(t, 1.0, one(metrics.PromMassSuspicion+`{instance="shard-a"}`))
	assert.Equal(t, 1.0, one(metrics.PromSkipStreak+`{instance="shard-b"}`))
	success := one(metrics.PromLastSuccess + `{job="runner-reaper-success",instance="shard-a"}`)
	assert.InDelta(t, float64(time.Now().Unix()), success, 120)
	none, err := testenv.PromQuery(ctx, prom, metrics.PromLastSuccess+`{instance="shard-b"}`)
	require.NoError(t, err)
	assert.Empty(t, none, "a degraded sweep pushes no success")
	assert.Greater(t, one(metrics.PromGitHubRequests+`{instance="shard-a"}`), 0.0)
	assert.Greater(t, one(metrics.PromKubeRequests+`{instance="shard-a"}`), 0.0)

	// The shipped alert fires for the suspicious shard only.
	alerts, err := testenv.WaitPromAlerts(ctx, prom, func(as []testenv.PromAlert) bool {
		for _, al := range as {
			if al.Labels["alertname"] == "RunnerReaperMassSuspicion" && al.State == "firing" {
				return true
			}
		}
		return false
	})
	require.NoError(t, err)
	for _, al := range alerts {
		if al.Labels["alertname"] == "RunnerReaperMassSuspicion" {
			assert.Equal(t, "shard-a", al.Labels["instance"])
		}
	}

	// OTLP/HTTP into Prometheus's own receiver: the same names, the
	// instance from service.instance.id.
	o := newWorld(t, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": prom + "/api/v1/otlp/v1/metrics", "REAPER_METRICS_INSTANCE": "shard-otlp"})
	o.pod("acme-dead", dead())
	ro := o.sweep()
	ro.requireCode(t, 0)
	assert.Empty(t, ro.msg("push metrics"))
	assert.Equal(t, 1.0, one(metrics.PromActions+`{instance="shard-otlp",verdict="terminal",result="deleted"}`))
	assert.Equal(t, 0.0, one(metrics.PromExitCode+`{instance="shard-otlp",mode="sweep"}`))
	// The base endpoint, the signal's path joined on, and the body gzip'd.
	g := newWorld(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": prom + "/api/v1/otlp", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"REAPER_METRICS_INSTANCE": "shard-otlp-gzip"})
	g.pod("acme-dead", dead())
	rg := g.sweep()
	rg.requireCode(t, 0)
	assert.Empty(t, rg.msg("push metrics"))
	assert.Equal(t, 1.0, one(metrics.PromActions+`{instance="shard-otlp-gzip",verdict="terminal",result="deleted"}`))

	// A Pushgateway that is down: a warning, the same exit status, and the
	// work done.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	d := newWorld(t, map[string]string{"REAPER_PUSHGATEWAY_URL": closed})
	d.pod("acme-dead", dead())
	rd := d.sweep()
	rd.requireCode(t, 0)
	require.Len(t, rd.msg("push metrics"), 1)
	assert.Equal(t, "WARN", rd.msg("push metrics")[0]["level"])
	assert.False(t, d.podExists("acme-dead"), "the sweep's work is done")
}

// dead is a runner pod the OOM killer ended.
func dead() testenv.PodState {
	return testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}
}

// The whole process, the push of its metrics included, ends within
// REAPER_SWEEP_TIMEOUT: a GitHub list that hangs holds the sweep to its
// deadline, and a Pushgateway that never answers gets only what the sweep
// kept back for it. Before, the push's budget counted from the sweep's end
// and the process ran past the timeout, into a CronJob's
// activeDeadlineSeconds.
func TestProcessEndsWithinTheSweepTimeoutPushIncluded(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hang.Close()
	defer close(stop)
	const timeout = 8 * time.Second
	w := newWorld(t, map[string]string{"REAPER_PUSHGATEWAY_URL": hang.URL, "REAPER_SWEEP_TIMEOUT": timeout.String(), "REAPER_GITHUB_TIMEOUT": "30s"})
	w.pod("acme-dead", dead())
	w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Hang: time.Minute})
	defer w.sim.ClearFaults()
	r := w.sweep()
	assert.NotEqual(t, 0, r.Code, "a sweep its deadline stopped is no success")
	// The bound is the deadline itself; the second is the process's own
	// start and exit, which the timeout cannot count.
	assert.Less(t, r.Wall, timeout+time.Second, "the process ran past REAPER_SWEEP_TIMEOUT")
	assert.NotEmpty(t, append(r.msg("push metrics"), r.msg("push metrics dropped")...), "the push that could not finish says so")
}
