package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/runner-reaper/runner-reaper/kube"
)

// Watch keeps the stores the sweeps read (kube.Watch).
type Watch interface {
	Stores
	// Run runs the watches until ctx ends, and returns once they have
	// all stopped.
	Run(ctx context.Context)
	// State is each watch's state, for /readyz and the gauges.
	State() []kube.WatchState
}

// Elector campaigns for the Lease until ctx ends. Each time it starts
// leading it calls lead with a term: a context that ends when it stops
// leading (the Lease lost, or ctx ended); lead may block until the term
// is taken up. After a loss it campaigns again. It returns once it has
// released the Lease it held.
type Elector interface {
	Campaign(ctx context.Context, lead func(term context.Context))
}

// Parts are what Run runs.
type Parts struct {
	Watch   Watch
	Loop    *Loop
	Elector Elector
	// Listener is where /metrics, /healthz and /readyz are answered.
	Listener net.Listener
	// Figures are the last sweep's, served while leading.
	Figures *Figures
	// Redact removes the process's secrets from a text the endpoints
	// show (a watch's error); nil shows it as it is.
	Redact func(string) string
	Log    *slog.Logger
}

// shutdownBudget bounds the wait for requests in flight when HTTP stops.
const shutdownBudget = 5 * time.Second

// Run runs the process until ctx ends (a signal), then stops it in an
// order that never leaves two leaders sweeping: no new sweep starts, the
// sweep in flight returns (its action in flight finished, the ledger
// saved), only then is the Lease released, then HTTP stops, then the
// watches. client-go's election releases the Lease as soon as its context
// ends, without waiting for what its leader runs, so the election's
// context is apart from ctx and ended last but for HTTP and the watches.
// It returns an error only when HTTP failed, which stops the rest the same
// way.
func Run(ctx context.Context, p Parts) error {
	st := &status{}

	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	st.watching.Store(true)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		defer st.watching.Store(false)
		p.Watch.Run(watchCtx)
	}()

	loopCtx, stopLoop := context.WithCancelCause(ctx)
	defer stopLoop(nil)
	srv := &http.Server{Handler: handler(p.Watch, st, p.Figures, p.Redact, p.Log), ReadHeaderTimeout: 10 * time.Second}
	var httpErr error
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(p.Listener); !errors.Is(err, http.ErrServerClosed) {
			httpErr = fmt.Errorf("serve HTTP on %s: %w", p.Listener.Addr(), err)
			stopLoop(httpErr)
		}
	}()

	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	terms := make(chan context.Context)
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		p.Elector.Campaign(electCtx, func(term context.Context) {
			st.terms.Add(1)
			context.AfterFunc(term, func() { st.terms.Add(-1) })
			select {
			case terms <- term:
			case <-term.Done():
			}
		})
	}()

	p.Loop.Run(loopCtx, terms)
	p.Log.Info("stopped sweeping", slog.String("why", context.Cause(loopCtx).Error()))
	stopElection()
	<-elected
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownBudget)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		p.Log.Warn("stop HTTP", slog.String("error", err.Error()))
	}
	<-served
	stopWatch()
	<-watched
	p.Log.Info("stopped")
	return httpErr
}

// status is what the endpoints and the gauges say of the process.
type status struct {
	// watching: the watches run (their Run has not returned).
	watching atomic.Bool
	// terms under way: one while leading. A count, not a flag, so that
	// a term's end, noted in a goroutine of its own, cannot undo the
	// start of the next.
	terms atomic.Int32
}

// leading says whether a term of leadership is under way.
func (s *status) leading() bool { return s.terms.Load() > 0 }
