package app

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Both sinks against servers that never answer, or that redirect a push to
// a page that answers 200, finish within one budget together, each with a
// warning; an audit pushes nothing at all.
func TestPublishIsBoundedAndNeverReportsARedirectAsDone(t *testing.T) {
	var hits atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(4 * time.Second):
		}
	}))
	defer hang.Close()
	login := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/login" {
			_, _ = w.Write([]byte("<html>sign in</html>"))
			return
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	}))
	defer login.Close()

	cases := []struct {
		name     string
		mode     sweep.Mode
		url      string
		warnings int
		hits     bool
	}{
		{"servers that never answer", sweep.Act, hang.URL, 2, true},
		{"a proxy that redirects to a login page", sweep.DryRun, login.URL, 2, true},
		{"an audit pushes nothing", sweep.Audit, hang.URL, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			var logs bytes.Buffer
			r := &Runtime{Log: slog.New(slog.NewJSONHandler(&logs, nil)), mode: tc.mode,
				push: config.Push{PushgatewayURL: tc.url, Instance: "eu", OTLP: &config.OTLP{URL: tc.url + "/v1/metrics", Timeout: 10 * time.Second}}}
			start := time.Now()
			r.publish(context.Background(), sweep.Result{Mode: tc.mode, Status: sweep.StatusComplete, Started: time.Now()})
			assert.Less(t, time.Since(start), pushBudget+time.Second, "one budget for both")
			assert.Equal(t, tc.warnings, strings.Count(logs.String(), `"msg":"push metrics"`), logs.String())
			assert.Equal(t, tc.hits, hits.Load() > 0)
		})
	}
}

// The Lambda's invocation deadline, nearer than the budget, wins.
func TestPublishKeepsToTheInvocationsDeadline(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer hang.Close()
	var logs bytes.Buffer
	r := &Runtime{Log: slog.New(slog.NewJSONHandler(&logs, nil)), mode: sweep.Act,
		push: config.Push{PushgatewayURL: hang.URL, Instance: "eu"}}
	ctx, cancel := context.WithTimeout(context.Background(), pushReserve+300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.publish(ctx, sweep.Result{Mode: sweep.Act})
	assert.Less(t, time.Since(start), 700*time.Millisecond)
	assert.Contains(t, logs.String(), `"msg":"push metrics"`)
}
