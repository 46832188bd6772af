package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Figures keep the samples of the last sweep, and of the last that
// exited 0, for /metrics: what a push would carry, the same names from
// the same table (metrics.Samples). It is safe for concurrent use.
type Figures struct {
	mu            sync.Mutex
	last, success []metrics.Sample
}

// Record keeps res's samples, in place of the last sweep's; the success
// only when res exited 0, so that a failing sweep leaves the last success
// in place, as the Pushgateway's group of its own does.
func (f *Figures) Record(res sweep.Result) {
	last, success := metrics.Samples(res), metrics.SuccessSamples(res)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = last
	if success != nil {
		f.success = success
	}
}

// Reset forgets the figures kept: a term of leadership serves only its
// own sweeps', not those of a term before it, which may be long past.
func (f *Figures) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.success = nil, nil
}

func (f *Figures) samples() []metrics.Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(append([]metrics.Sample(nil), f.last...), f.success...)
}

// Runtime is the sweep of the composition root (app.Runtime.Sweep): it
// reports the sweep itself (its lines, its push) and returns its result.
type Runtime interface {
	Sweep(ctx context.Context) sweep.Result
}

// Recorded is a Runtime as the Loop's Sweeper, keeping each sweep's
// figures for /metrics.
type Recorded struct {
	Runtime Runtime
	Figures *Figures
}

// Sweep runs one sweep and records its figures.
func (r Recorded) Sweep(ctx context.Context) { r.Figures.Record(r.Runtime.Sweep(ctx)) }

// handler answers /metrics, /healthz and /readyz.
//
// /healthz is 200 while the watches run. /readyz is 200 once every store
// is synced, leading or standing by (its body says which), else 503 with
// each watch that is not live and why: a readiness only the leader
// passed would make a PodDisruptionBudget block every drain of the
// leader's node. /metrics serves the process's own gauges, and while it
// leads the last sweep's figures: a standby serves no sweep's, so that
// they come from one replica at a time.
func handler(w Watch, st *status, figs *Figures, redact func(string) string, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		leading := st.leading()
		samples := processSamples(leading, w.State())
		if leading && figs != nil {
			samples = append(samples, figs.samples()...)
		}
		reg, err := metrics.Registry(samples)
		if err != nil {
			return nil, err
		}
		return reg.Gather()
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{ErrorLog: promLog{log}}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if !st.watching.Load() {
			text(rw, http.StatusServiceUnavailable, "the watches have stopped\n")
			return
		}
		text(rw, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if !w.Synced() {
			text(rw, http.StatusServiceUnavailable, notReady(w.State(), redact))
			return
		}
		if st.leading() {
			text(rw, http.StatusOK, "leading\n")
			return
		}
		text(rw, http.StatusOK, "standby\n")
	})
	return mux
}

// notReady is /readyz's body while a store is not synced: each watch that
// is not live, and why, its text from outside (an API server's error)
// redacted and escaped.
func notReady(states []kube.WatchState, redact func(string) string) string {
	var b strings.Builder
	b.WriteString("not ready: the watches' stores cannot vouch for the whole fleet\n")
	for _, s := range states {
		if s.Live {
			continue
		}
		where := "all namespaces"
		if s.Namespace != "" {
			where = "namespace " + s.Namespace
		}
		why := s.Why
		if redact != nil {
			why = redact(why)
		}
		fmt.Fprintf(&b, "%s in %s: %s\n", s.Resource, where, safetext.String(why))
	}
	return b.String()
}

func text(rw http.ResponseWriter, code int, body string) {
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(code)
	_, _ = io.WriteString(rw, body)
}

// processSamples are the long-running mode's own gauges: whether it
// leads, and each resource's watches summed over their namespaces (live
// only when all are), in the order State gives the resources.
func processSamples(leading bool, states []kube.WatchState) []metrics.Sample {
	out := []metrics.Sample{{Name: metrics.PromLeader, Value: one(leading)}}
	type sum struct {
		live             bool
		relists, objects int
	}
	var order []string
	by := map[string]*sum{}
	for _, s := range states {
		a, ok := by[s.Resource]
		if !ok {
			a = &sum{live: true}
			by[s.Resource] = a
			order = append(order, s.Resource)
		}
		a.live = a.live && s.Live
		a.relists += s.Relists
		a.objects += s.Objects
	}
	for _, r := range order {
		a := by[r]
		out = append(out,
			metrics.Sample{Name: metrics.PromWatchLive, Labels: []string{r}, Value: one(a.live)},
			metrics.Sample{Name: metrics.PromWatchRelists, Labels: []string{r}, Value: float64(a.relists)},
			metrics.Sample{Name: metrics.PromStoreObjects, Labels: []string{r}, Value: float64(a.objects)})
	}
	return out
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// promLog is the process's logger as promhttp's: a scrape that could not
// be answered is a warning.
type promLog struct{ log *slog.Logger }

func (p promLog) Println(v ...any) {
	p.log.Warn("serve /metrics", slog.String("error", strings.TrimSpace(fmt.Sprintln(v...))))
}
