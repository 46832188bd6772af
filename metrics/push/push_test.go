package push

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// gateway records what a Pushgateway would receive: each request's method,
// path and decoded families.
type gateway struct {
	mu   sync.Mutex
	got  []received
	mux  *http.ServeMux
	srv  *httptest.Server
	fail http.HandlerFunc
}

type received struct {
	method, path string
	families     map[string]*dto.MetricFamily
}

func newGateway(t *testing.T) *gateway {
	g := &gateway{mux: http.NewServeMux()}
	g.mux.HandleFunc("/metrics/", func(w http.ResponseWriter, r *http.Request) {
		if g.fail != nil {
			g.fail(w, r)
			return
		}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		fams := map[string]*dto.MetricFamily{}
		for {
			var mf dto.MetricFamily
			err := dec.Decode(&mf)
			if errors.Is(err, io.EOF) {
				break
			}
			if !assert.NoError(t, err) {
				break
			}
			fams[mf.GetName()] = &mf
		}
		g.mu.Lock()
		g.got = append(g.got, received{r.Method, r.URL.EscapedPath(), fams})
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	g.srv = httptest.NewServer(g.mux)
	t.Cleanup(g.srv.Close)
	return g
}

func sweepOf(status sweep.Status) sweep.Result {
	return sweep.Result{
		Mode: sweep.Act, Status: status, Started: time.Unix(1_790_000_000, 0),
		Outcomes: []reap.Outcome{
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie}}, Result: fleet.Deleted},
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie}}, Result: fleet.ProtectedJob},
		},
	}
}

func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := fams[name]
	require.True(t, ok, "family %s pushed", name)
	assert.Equal(t, dto.MetricType_GAUGE, mf.GetType(), name)
	for _, m := range mf.GetMetric() {
		var vals []string
		for _, lp := range m.GetLabel() {
			vals = append(vals, lp.GetName()+"="+lp.GetValue())
		}
		if strings.Join(vals, ",") == strings.Join(labels, ",") {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s{%v} not pushed", name, labels)
	return 0
}

func TestPushReplacesTheGroupAndKeepsTheSuccessApart(t *testing.T) {
	cases := []struct {
		name     string
		status   sweep.Status
		instance string
		paths    []string
	}{
		{"a complete sweep pushes both groups", sweep.StatusComplete, "eu-west",
			[]string{"/metrics/job/runner-reaper/instance/eu-west", "/metrics/job/runner-reaper-success/instance/eu-west"}},
		{"a degraded sweep leaves the success alone", sweep.StatusDegraded, "eu-west",
			[]string{"/metrics/job/runner-reaper/instance/eu-west"}},
		{"a failed sweep too", sweep.StatusFailed, "eu-west",
			[]string{"/metrics/job/runner-reaper/instance/eu-west"}},
		{"an instance named after a ledger travels in base64", sweep.StatusDegraded, "configmap:arc/ledger",
			[]string{"/metrics/job/runner-reaper/instance@base64/" + base64.RawURLEncoding.EncodeToString([]byte("configmap:arc/ledger"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t)
			res := sweepOf(tc.status)
			require.NoError(t, New(g.srv.URL, tc.instance, time.Second).Push(context.Background(), res))
			require.Len(t, g.got, len(tc.paths))
			for i, p := range tc.paths {
				assert.Equal(t, http.MethodPut, g.got[i].method, "PUT replaces the group whole")
				assert.Equal(t, p, g.got[i].path)
			}
			fams := g.got[0].families
			assert.Equal(t, 1.0, gauge(t, fams, metrics.PromActions, "result=deleted", "verdict=zombie"))
			assert.Equal(t, 1.0, gauge(t, fams, metrics.PromActions, "result=protected-job", "verdict=zombie"))
			assert.Equal(t, float64(tc.status), gauge(t, fams, metrics.PromExitCode, "mode=sweep"))
			assert.Equal(t, 0.0, gauge(t, fams, metrics.PromScopesSkipped, "kind=inconsistent"), "a kind at zero is a zero, not a gap")
			assert.NotContains(t, fams, metrics.PromLastSuccess, "the sweep's group never holds the success")
			if len(g.got) > 1 {
				assert.Equal(t, 1_790_000_000.0, gauge(t, g.got[1].families, metrics.PromLastSuccess))
				assert.Len(t, g.got[1].families, 1)
			}
		})
	}
}

// A Pushgateway (or a proxy in front of it) that refuses, with a body of
// any size, or never answers, gives an error in bounded time and size. The
// one that never answers holds the push until the client gives up, and
// would store it after a minute: a push not bounded by its timeout would
// succeed.
func TestPushFailsBounded(t *testing.T) {
	cases := []struct {
		name string
		fail http.HandlerFunc
		want string
	}{
		{"a refusal with a huge body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.Copy(w, io.LimitReader(zeros{}, 50<<20))
		}, "400"},
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			// The server notices the client hanging up only once the
			// body has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
				w.WriteHeader(http.StatusOK)
			}
		}, "deadline exceeded|Timeout exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t)
			g.fail = tc.fail
			err := New(g.srv.URL, "eu", 300*time.Millisecond).Push(context.Background(), sweepOf(sweep.StatusComplete))
			require.Error(t, err)
			assert.Regexp(t, tc.want, err.Error())
			assert.Contains(t, err.Error(), "push metrics to the pushgateway")
			assert.Less(t, len(err.Error()), maxAnswer+1024)
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
