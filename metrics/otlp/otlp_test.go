package otlp

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// The exporter speaks OTLP/HTTP protobuf to the endpoint of the SDK's own
// variable, once, with the Prometheus names, the labels as attributes and
// the instance as service.instance.id.
func TestExportSendsTheFamiliesOnce(t *testing.T) {
	var mu sync.Mutex
	var reqs []*colmetrics.ExportMetricsServiceRequest
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			require.NoError(t, err)
			body = zr
		}
		b, err := io.ReadAll(body)
		require.NoError(t, err)
		var req colmetrics.ExportMetricsServiceRequest
		require.NoError(t, proto.Unmarshal(b, &req))
		mu.Lock()
		reqs, paths = append(reqs, &req), append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")

	res := sweep.Result{Mode: sweep.DryRun, Status: sweep.StatusComplete, Started: time.Unix(1_790_000_000, 0), StreaksKnown: true,
		Outcomes: []reap.Outcome{{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Ghost}}, Result: fleet.WouldDelete}}}
	require.NoError(t, Export(context.Background(), res, "eu-west", time.Second))

	require.Len(t, reqs, 1, "one export per sweep")
	assert.Equal(t, "/v1/metrics", paths[0])
	rms := reqs[0].GetResourceMetrics()
	require.Len(t, rms, 1)
	attrs := map[string]string{}
	for _, kv := range rms[0].GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	assert.Equal(t, "runner-reaper", attrs["service.name"])
	assert.Equal(t, "eu-west", attrs["service.instance.id"])

	got := map[string]float64{}
	for _, sm := range rms[0].GetScopeMetrics() {
		for _, m := range sm.GetMetrics() {
			require.NotNil(t, m.GetGauge(), "%s is a gauge", m.GetName())
			assert.Empty(t, m.GetUnit(), "no unit for a translator to append")
			for _, dp := range m.GetGauge().GetDataPoints() {
				key := m.GetName()
				for _, kv := range dp.GetAttributes() {
					key += "|" + kv.GetKey() + "=" + kv.GetValue().GetStringValue()
				}
				got[key] = dp.GetAsDouble()
			}
		}
	}
	assert.Equal(t, 1.0, got[metrics.PromActions+"|result=would-delete|verdict=ghost"])
	assert.Equal(t, 0.0, got[metrics.PromExitCode+"|mode=dry-run"])
	assert.Equal(t, 1_790_000_000.0, got[metrics.PromLastSuccess])
	names := map[string]bool{}
	for k := range got {
		for i := range k {
			if k[i] == '|' {
				k = k[:i]
				break
			}
		}
		names[k] = true
	}
	assert.Len(t, names, len(metrics.Families()), "every family, success included: %v", names)
}

// An endpoint that refuses is an error, in bounded time.
func TestExportRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := Export(ctx, sweep.Result{Mode: sweep.Act}, "eu", time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "export metrics over otlp")
}
