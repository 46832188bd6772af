package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/kube"
)

// runRig records the order in which Run's parts start and stop.
type runRig struct {
	mu     sync.Mutex
	events []string
	url    string
	leads  bool
	swept  chan context.Context
	hold   chan struct{}
}

func (r *runRig) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *runRig) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// Sweep is a sweep whose action in flight takes until the test lets it
// finish.
func (r *runRig) Sweep(ctx context.Context) {
	r.note("sweep began")
	r.swept <- ctx
	<-ctx.Done()
	<-r.hold
	r.note("sweep returned, stopped: " + context.Cause(ctx).Error())
}

// Campaign leads at once when the rig says so, as client-go's elector
// does (lead in a goroutine of its own, the term a child of ctx), and
// releases at ctx's end, noting whether HTTP still answered then.
func (r *runRig) Campaign(ctx context.Context, lead func(term Term)) {
	if r.leads {
		r.note("leading")
		term, end := context.WithCancel(ctx)
		defer end()
		go lead(Term{Context: term, Clean: true})
	}
	<-ctx.Done()
	code := 0
	if resp, err := http.Get(r.url + "/readyz"); err == nil {
		code = resp.StatusCode
		resp.Body.Close()
	}
	r.note(fmt.Sprintf("campaign ended (HTTP answered %d)", code))
}

// Run's order, whatever stops it: no new sweep, the sweep in flight
// returns (its action finished), then the election ends, releasing the
// Lease while HTTP still answers, then HTTP closes, then the watches stop.
// A signal ends it cleanly; HTTP failing ends it the same way, with its
// error.
func TestRunStopsInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leads   bool
		httpErr bool
		want    []string
	}{
		{"SIGTERM while leading", true, false, []string{"leading", "sweep began", "stop", "sweep returned, stopped: " + errSignal.Error(),
			"campaign ended (HTTP answered 200)", "watch stopped", "run returned"}},
		{"SIGTERM while standing by", false, false, []string{"stop", "campaign ended (HTTP answered 200)", "watch stopped", "run returned"}},
		{"HTTP failing while leading", true, true, []string{"leading", "sweep began", "stop", "sweep returned, stopped: serve HTTP on ",
			// Its keep-alive connection may still answer: whether HTTP
			// does is moot once it failed.
			"campaign ended", "watch stopped", "run returned"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			r := &runRig{url: "http://" + ln.Addr().String(), leads: tc.leads, swept: make(chan context.Context, 1), hold: make(chan struct{})}
			w := &fakeWatch{stopped: func() { r.note("watch stopped") }}
			w.set(kube.WatchState{Resource: "pods", Live: true})
			log := slog.New(slog.DiscardHandler)
			ctx, signal := context.WithCancelCause(context.Background())
			defer signal(nil)
			ran := make(chan error, 1)
			go func() {
				ran <- Run(ctx, Parts{Watch: w, Elector: r, Listener: ln, Figures: &Figures{}, Log: log,
					Loop: &Loop{Sweeper: r, Stores: w, Interval: time.Hour, SyncPoll: time.Hour, Log: log}})
			}()

			var sweeping context.Context
			if tc.leads {
				sweeping = <-r.swept
			}
			// HTTP answers while the process runs (the listener was
			// bound before Run, so no request can come too early), and
			// says whether it leads.
			code, body := get(t, r.url+"/readyz")
			assert.Equal(t, http.StatusOK, code)
			if tc.leads {
				assert.Equal(t, "leading\n", body)
			} else {
				assert.Equal(t, "standby\n", body)
			}
			r.note("stop")
			if tc.httpErr {
				require.NoError(t, ln.Close())
			} else {
				signal(errSignal)
			}
			if sweeping != nil {
				<-sweeping.Done()
				// The action in flight is still finishing: the Lease
				// is not released under it.
				assert.NotContains(t, strings.Join(r.log(), "|"), "campaign ended", "the election ended before the sweep returned")
				close(r.hold)
			}
			err = <-ran
			r.note("run returned")
			if tc.httpErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "serve HTTP on ")
			} else {
				assert.NoError(t, err)
			}

			got := r.log()
			require.Len(t, got, len(tc.want), "%v", got)
			for i := range tc.want {
				assert.True(t, strings.HasPrefix(got[i], tc.want[i]), "event %d: %q, want %q; all: %v", i, got[i], tc.want[i], got)
			}
			resp, err := http.Get(r.url + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			assert.Error(t, err, "HTTP is closed once Run has returned")
		})
	}
}
