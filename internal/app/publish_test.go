package app

import (
	"bytes"
	"context"
	"io"
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
// warning; an audit pushes nothing at all. The server that never answers
// holds each request until the client gives up, so publish returns only
// because its budget ended; both requests are held at once, so that one
// budget is the bound of both.
func TestPublishIsBoundedAndNeverReportsARedirectAsDone(t *testing.T) {
	var hits, inFlight, most atomic.Int32
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m; m = most.Load() {
			if most.CompareAndSwap(m, n) {
				break
			}
		}
		// The server notices the client hanging up only once the body
		// has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
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
		together bool
	}{
		{"servers that never answer", sweep.Act, hang.URL, 2, true, true},
		{"a proxy that redirects to a login page", sweep.DryRun, login.URL, 2, true, false},
		{"an audit pushes nothing", sweep.Audit, hang.URL, 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			most.Store(0)
			var logs bytes.Buffer
			r := &Runtime{Log: slog.New(slog.NewJSONHandler(&logs, nil)), mode: tc.mode,
				push: config.Push{PushgatewayURL: tc.url, Instance: "eu", OTLP: &config.OTLP{URL: tc.url + "/v1/metrics", Timeout: 10 * time.Second}}}
			r.publish(context.Background(), sweep.Result{Mode: tc.mode, Status: sweep.StatusComplete, Started: time.Now()})
			assert.Equal(t, tc.warnings, strings.Count(logs.String(), `"msg":"push metrics"`), logs.String())
			assert.Equal(t, tc.hits, hits.Load() > 0)
			if tc.together {
				assert.Equal(t, int32(2), most.Load(), "both sinks waited on the server at once, under one budget")
			}
		})
	}
}

// The Lambda's invocation deadline, nearer than the budget, wins. The
// server answers a push only once that deadline has passed, well within
// the budget: a push bounded by the budget alone would be answered and
// succeed, and one bounded by the deadline less pushReserve gives up
// first, with a warning.
func TestPublishKeepsToTheInvocationsDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pushReserve+pushBudget/2)
	defer cancel()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-ctx.Done():
			// Past the invocation's deadline: answered, 200.
		}
	}))
	defer hang.Close()
	var logs bytes.Buffer
	r := &Runtime{Log: slog.New(slog.NewJSONHandler(&logs, nil)), mode: sweep.Act,
		push: config.Push{PushgatewayURL: hang.URL, Instance: "eu"}}
	r.publish(ctx, sweep.Result{Mode: sweep.Act})
	assert.Contains(t, logs.String(), `"msg":"push metrics"`, "the push gave up at the deadline less the reserve")
}
