package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/prometheus/client_model/go"

	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// fakeWatch is a Watch whose state the test sets.
type fakeWatch struct {
	mu     sync.Mutex
	states []kube.WatchState
	// stopped, when set, is called as Run returns.
	stopped func()
}

func (w *fakeWatch) Run(ctx context.Context) {
	<-ctx.Done()
	if w.stopped != nil {
		w.stopped()
	}
}

func (w *fakeWatch) set(states ...kube.WatchState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states = states
}

func (w *fakeWatch) State() []kube.WatchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]kube.WatchState(nil), w.states...)
}

func (w *fakeWatch) Synced() bool {
	for _, s := range w.State() {
		if !s.Live {
			return false
		}
	}
	return true
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// scrape reads /metrics as Prometheus would: each series as
// name{label=value,...} and its value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	out := map[string]float64{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			return out
		} else {
			require.NoError(t, err)
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
}

var (
	podsLive   = kube.WatchState{Resource: "pods", Namespace: "arc-a", Live: true, Objects: 120, Relists: 1}
	podsLive2  = kube.WatchState{Resource: "pods", Namespace: "arc-b", Live: true, Objects: 30, Relists: 2}
	ersLive    = kube.WatchState{Resource: "ephemeralrunners", Namespace: "arc-a", Live: true, Objects: 118, Relists: 1}
	podsBroken = kube.WatchState{Resource: "pods", Namespace: "arc-b", Why: "watch broken: Get \"https://api/\": token hunter2\x1b[31m", Objects: 30, Relists: 3}
)

// The endpoints, as the kubelet's probes and Prometheus read them:
// /healthz while the watches run; /readyz once every store is synced,
// saying whether this replica leads, else 503 with each watch not live
// and why (redacted, escaped); /metrics the process's gauges, summed per
// resource, and only while leading the last sweep's figures.
func TestEndpoints(t *testing.T) {
	figs := &Figures{}
	figs.Record(sweep.Result{Mode: sweep.Act, Status: sweep.StatusComplete, Started: time.Unix(1_790_000_000, 0)})
	figs.Record(sweep.Result{Mode: sweep.Act, Status: sweep.StatusFailed, Started: time.Unix(1_790_000_060, 0)})
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") }
	for _, tc := range []struct {
		name     string
		watching bool
		leading  bool
		states   []kube.WatchState
		healthz  int
		readyz   int
		ready    []string
		series   map[string]float64
		absent   []string
	}{
		{
			name: "leading, synced", watching: true, leading: true, states: []kube.WatchState{podsLive, podsLive2, ersLive},
			healthz: 200, readyz: 200, ready: []string{"leading\n"},
			series: map[string]float64{
				"runner_reaper_leader{}":                                 1,
				"runner_reaper_watch_live{resource=pods}":                1,
				"runner_reaper_watch_live{resource=ephemeralrunners}":    1,
				"runner_reaper_store_objects{resource=pods}":             150,
				"runner_reaper_store_objects{resource=ephemeralrunners}": 118,
				"runner_reaper_watch_relists{resource=pods}":             3,
				"runner_reaper_sweep_exit_code{mode=sweep}":              1,
				"runner_reaper_last_sweep_timestamp_seconds{}":           1_790_000_060,
				"runner_reaper_last_success_timestamp_seconds{}":         1_790_000_000,
				"runner_reaper_watch_relists{resource=ephemeralrunners}": 1,
				"runner_reaper_sweep_scopes_skipped{kind=failed}":        0,
				"runner_reaper_rate_limited_until_timestamp_seconds{}":   0,
				"runner_reaper_sweep_runner_log_blind{}":                 0,
				"runner_reaper_sweep_mass_suspicion_scopes{}":            0,
				"runner_reaper_sweep_scopes_deferred{}":                  0,
				"runner_reaper_sweep_kube_requests{}":                    0,
				"runner_reaper_sweep_github_requests{}":                  0,
				"runner_reaper_sweep_github_not_modified{}":              0,
				"runner_reaper_sweep_scopes_skipped{kind=inconsistent}":  0,
				"runner_reaper_sweep_scopes_skipped{kind=rate-limited}":  0,
				"runner_reaper_sweep_duration_seconds{}":                 0,
			},
		},
		{
			name: "standing by, synced", watching: true, states: []kube.WatchState{podsLive, ersLive},
			healthz: 200, readyz: 200, ready: []string{"standby\n"},
			series: map[string]float64{
				"runner_reaper_leader{}":                                 0,
				"runner_reaper_watch_live{resource=pods}":                1,
				"runner_reaper_store_objects{resource=pods}":             120,
				"runner_reaper_store_objects{resource=ephemeralrunners}": 118,
			},
			absent: []string{"runner_reaper_sweep_exit_code{mode=sweep}", "runner_reaper_last_success_timestamp_seconds{}"},
		},
		{
			name: "a watch broken", watching: true, leading: true, states: []kube.WatchState{podsLive, podsBroken, ersLive},
			healthz: 200, readyz: 503,
			ready: []string{"not ready", "pods in namespace arc-b: watch broken: ", "[REDACTED]", `\x1b[31m`},
			series: map[string]float64{
				"runner_reaper_watch_live{resource=pods}":             0,
				"runner_reaper_watch_live{resource=ephemeralrunners}": 1,
				"runner_reaper_watch_relists{resource=pods}":          4,
			},
		},
		{
			name: "the watches stopped", states: []kube.WatchState{{Resource: "pods", Why: "not synced yet"}},
			healthz: 503, readyz: 503, ready: []string{"pods in all namespaces: not synced yet\n"},
			series: map[string]float64{"runner_reaper_watch_live{resource=pods}": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWatch{}
			w.set(tc.states...)
			st := &status{}
			st.watching.Store(tc.watching)
			if tc.leading {
				st.terms.Add(1)
			}
			srv := httptest.NewServer(handler(w, st, figs, redact, slog.New(slog.DiscardHandler)))
			t.Cleanup(srv.Close)

			code, _ := get(t, srv.URL+"/healthz")
			assert.Equal(t, tc.healthz, code, "/healthz")
			code, body := get(t, srv.URL+"/readyz")
			assert.Equal(t, tc.readyz, code, "/readyz")
			for _, want := range tc.ready {
				assert.Contains(t, body, want, "/readyz")
			}
			assert.NotContains(t, body, "hunter2")
			assert.NotContains(t, body, "\x1b")
			got := scrape(t, srv.URL)
			for series, v := range tc.series {
				if assert.Contains(t, got, series) {
					assert.Equal(t, v, got[series], series)
				}
			}
			for _, series := range tc.absent {
				assert.NotContains(t, got, series)
			}
			code, _ = get(t, srv.URL+"/")
			assert.Equal(t, http.StatusNotFound, code, "nothing else is served")
		})
	}
}

// Every family /metrics serves is in the table docs/metrics.md is made
// from.
func TestProcessSamplesAreInTheTable(t *testing.T) {
	fams := map[string]metrics.Family{}
	for _, f := range metrics.Families() {
		fams[f.Name] = f
	}
	for _, s := range processSamples(true, []kube.WatchState{podsLive, ersLive}) {
		f, ok := fams[s.Name]
		require.True(t, ok, s.Name)
		assert.Len(t, s.Labels, len(f.Labels), s.Name)
		assert.Equal(t, metrics.ServeOnly, f.EMF, s.Name)
	}
}
