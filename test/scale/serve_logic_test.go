package scale_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The serve rows' settings: sizes among the CronJob's, rates in percent,
// minutes, the confirmation asked for; a bad value is refused, naming it.
func TestParseServeSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		sizes []int
		want  serveSettings
		err   string
	}{{
		name:  "defaults among the sizes",
		sizes: []int{1000, 10000, 50000},
		want:  serveSettings{sizes: []int{10000}, churn: []float64{0.1, 1, 10}, minutes: 3, confirmAfter: 5 * time.Minute},
	}, {
		name:  "defaults none among the sizes",
		sizes: []int{1000},
		want:  serveSettings{churn: []float64{0.1, 1, 10}, minutes: 3, confirmAfter: 5 * time.Minute},
	}, {
		name:  "asked",
		env:   map[string]string{"BENCH_SERVE_SIZES": "1000", "BENCH_SERVE_CHURN": "1,10", "BENCH_SERVE_MINUTES": "1", "BENCH_SERVE_CONFIRM_AFTER": "1m"},
		sizes: []int{1000, 10000},
		want:  serveSettings{sizes: []int{1000}, churn: []float64{1, 10}, minutes: 1, confirmAfter: time.Minute, set: true},
	}, {
		name:  "none",
		env:   map[string]string{"BENCH_SERVE_SIZES": "none"},
		sizes: []int{10000},
		want:  serveSettings{churn: []float64{0.1, 1, 10}, minutes: 3, confirmAfter: 5 * time.Minute},
	}, {
		name:  "a size the CronJob rows do not build",
		env:   map[string]string{"BENCH_SERVE_SIZES": "20000"},
		sizes: []int{10000},
		err:   "20000 is not among BENCH_SIZES",
	}, {
		name: "a churn of nothing", env: map[string]string{"BENCH_SERVE_CHURN": "0"},
		sizes: []int{10000}, err: "BENCH_SERVE_CHURN",
	}, {
		name: "a churn above the fleet", env: map[string]string{"BENCH_SERVE_CHURN": "101"},
		sizes: []int{10000}, err: "BENCH_SERVE_CHURN",
	}, {
		name: "no minutes", env: map[string]string{"BENCH_SERVE_MINUTES": "0"},
		sizes: []int{10000}, err: "BENCH_SERVE_MINUTES",
	}, {
		name: "a confirmation that is no duration", env: map[string]string{"BENCH_SERVE_CONFIRM_AFTER": "5"},
		sizes: []int{10000}, err: "BENCH_SERVE_CONFIRM_AFTER",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"BENCH_SERVE_SIZES", "BENCH_SERVE_CHURN", "BENCH_SERVE_MINUTES", "BENCH_SERVE_CONFIRM_AFTER"} {
				t.Setenv(k, tc.env[k])
			}
			if _, ok := tc.env["BENCH_SERVE_SIZES"]; !ok {
				unsetenv(t, "BENCH_SERVE_SIZES")
			}
			got, err := parseServeSettings(tc.sizes)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The GOGC row comes at the largest serve size only, and only with 1%
// among the rates.
func TestServeCases(t *testing.T) {
	st := serveSettings{sizes: []int{10000, 100000}, churn: []float64{0.1, 1, 10}}
	assert.Equal(t, []serveCase{{churn: 0.1}, {churn: 1}, {churn: 10}}, st.cases(10000))
	assert.Equal(t, []serveCase{{churn: 0.1}, {churn: 1}, {churn: 10}, {churn: 1, gogc: "10"}}, st.cases(100000))
	st.churn = []float64{10}
	assert.Equal(t, []serveCase{{churn: 10}}, st.cases(100000))
}

// Each measured minute gets the sweeps that ended in it; one summary
// without kube_bytes leaves the minute's bytes unknown.
func TestFillMinutes(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := func(v int64) *int64 { return &v }
	r := serveRow{minutes: []serveMinute{
		{from: t0, to: t0.Add(time.Minute)},
		{from: t0.Add(time.Minute), to: t0.Add(2 * time.Minute)},
	}}
	r.fillMinutes([]serveSummary{
		{Time: t0.Add(-time.Second), KubeBytes: n(1000), GitHub: 100}, // before: the first sweep
		{Time: t0.Add(10 * time.Second), KubeBytes: n(10), GitHub: 3},
		{Time: t0.Add(50 * time.Second), KubeBytes: n(20), GitHub: 4},
		{Time: t0.Add(time.Minute), GitHub: 5}, // the second minute's, no bytes
	})
	assert.Equal(t, serveMinute{from: t0, to: t0.Add(time.Minute), kubeBytes: 30, github: 7, bytesKnown: true, sweeps: 2}, r.minutes[0])
	assert.Equal(t, serveMinute{from: t0.Add(time.Minute), to: t0.Add(2 * time.Minute), github: 5, sweeps: 1}, r.minutes[1])
	_, ok := r.bytesPerMinute()
	assert.False(t, ok, "a minute's bytes unknown, the row's are")
	gh, ok := r.githubPerMinute()
	assert.True(t, ok)
	assert.InDelta(t, 6, gh, 1e-9)
}

// The goals, judged on each row; what could not be measured is said, not
// passed.
func TestServeRowVerdict(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good := serveRow{
		fullRead: 2e9, goal: 7 * time.Minute, zombie: 3 * time.Minute, hwm: 100 << 20, cgroupPeak: 120 << 20,
		minutes: []serveMinute{{from: t0, to: t0.Add(time.Minute), cpu: 500 * time.Millisecond, kubeBytes: 1e6, bytesKnown: true}},
	}
	for _, tc := range []struct {
		name   string
		change func(r *serveRow)
		want   string
	}{
		{"all met", func(*serveRow) {}, "PASS"},
		{"CPU", func(r *serveRow) { r.minutes[0].cpu = 1500 * time.Millisecond }, "MISS(cpu)"},
		{"API bytes", func(r *serveRow) { r.minutes[0].kubeBytes = 3e7 }, "MISS(api)"},
		{"memory", func(r *serveRow) { r.cgroupPeak = 256 << 20 }, "MISS(mem)"},
		{"OOM-killed", func(r *serveRow) { r.oom = true }, "MISS(mem)"},
		{"zombie late", func(r *serveRow) { r.zombie = 8 * time.Minute }, "MISS(zombie)"},
		{"zombie never", func(r *serveRow) { r.zombie = 0 }, "MISS(zombie)"},
		{"bytes unknown", func(r *serveRow) { r.minutes[0].bytesKnown = false }, "?(api)"},
		{"full read unknown, CPU missed", func(r *serveRow) { r.fullRead = 0; r.minutes[0].cpu = 2 * time.Second }, "MISS(cpu,api)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			r.minutes = append([]serveMinute(nil), good.minutes...)
			tc.change(&r)
			assert.Equal(t, tc.want, r.verdict())
		})
	}
}

// What fails the bench: an action on anything not planted, a zombie
// deleted twice, both replicas sweeping at once. A failed action is not
// a second deletion.
func TestServeRowCheck(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	zs := []zombie{{name: "zombie-0001"}, {name: "zombie-0002"}}
	sweep := func(end time.Duration, ms int64) serveSummary {
		return serveSummary{Time: t0.Add(end), DurationMS: ms}
	}
	for _, tc := range []struct {
		name string
		a, b replica
		want []string
	}{{
		name: "one leader, then the other",
		a:    replica{name: "a", sweeps: []serveSummary{sweep(10*time.Second, 2000), sweep(70*time.Second, 2000)}, actions: []serveAction{{Pod: "zombie-0001", Result: "deleted"}}},
		b:    replica{name: "b", sweeps: []serveSummary{sweep(100*time.Second, 2000)}, actions: []serveAction{{Pod: "zombie-0002", Result: "failed"}, {Pod: "zombie-0002", Result: "deleted"}}},
	}, {
		name: "an action on a churned runner",
		a:    replica{name: "a", actions: []serveAction{{Pod: "runner-000042-3", Action: "delete-registration-then-ephemeralrunner", Result: "deleted"}}},
		b:    replica{name: "b"},
		want: []string{`replica a acted on "runner-000042-3"`},
	}, {
		name: "a zombie deleted by both",
		a:    replica{name: "a", actions: []serveAction{{Pod: "zombie-0001", Result: "deleted"}}},
		b:    replica{name: "b", actions: []serveAction{{Pod: "zombie-0001", Result: "deleted"}}},
		want: []string{"zombie zombie-0001 was deleted 2 times"},
	}, {
		name: "sweeps that overlap",
		a:    replica{name: "a", sweeps: []serveSummary{sweep(10*time.Second, 5000)}},
		b:    replica{name: "b", sweeps: []serveSummary{sweep(12*time.Second, 5000)}},
		want: []string{"both replicas swept at once"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var r serveRow
			r.check([]*replica{&tc.a, &tc.b}, zs)
			require.Len(t, r.problems, len(tc.want), "%v", r.problems)
			for i, w := range tc.want {
				assert.Contains(t, r.problems[i], w)
			}
		})
	}
}

// The replicas' interval fits the CronJob rows' sweep timeout.
func TestServeInterval(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		want    time.Duration
	}{{"", time.Minute}, {"45s", time.Minute}, {"10m", 10*time.Minute + 15*time.Second}} {
		got, err := serveInterval(tc.timeout)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.timeout)
	}
	_, err := serveInterval("soon")
	assert.Error(t, err)
}

// unsetenv unsets k for the rest of the test, restoring it after.
func unsetenv(t *testing.T, k string) {
	t.Helper()
	t.Setenv(k, "")
	require.NoError(t, os.Unsetenv(k))
}
