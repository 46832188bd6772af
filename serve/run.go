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
// leading it calls lead with a term, whose context ends when it stops
// leading (the Lease lost, or ctx ended); lead blocks until nothing of
// the term runs any more. After a loss it campaigns again, and releases
// nothing. At ctx's end it waits for lead to return, releases the Lease
// it holds, and returns.
type Elector interface {
	Campaign(ctx context.Context, lead func(term Term))
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

// The HTTP server's limits: its clients are a scraper and the kubelet's
// probes, whose requests have no body and whose answers are small; the
// write limit leaves room for a slow scrape of /metrics.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

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
	srv := &http.Server{Handler: handler(p.Watch, st, p.Figures, p.Redact, p.Log), ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout: readTimeout, WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
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
	terms := make(chan Term)
	looped := make(chan struct{})
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		elect(electCtx, p, st, terms, looped)
	}()

	p.Loop.Run(loopCtx, terms)
	close(looped)
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

// elect runs the election while the stores are synced, until ctx
// ends: a process that cannot vouch for the fleet does not take the Lease
// from one that can. A standby whose stores stop being synced stops
// campaigning; a leader's term is the Loop's to end (it steps down when
// its stores stay unsynced). Each term is handed to the Loop, even one
// already ended, and lead returns only once the Loop is done with it or
// has returned, so that the Lease is never released under a sweep.
func elect(ctx context.Context, p Parts, st *status, terms chan<- Term, looped <-chan struct{}) {
	for ctx.Err() == nil {
		if !p.Watch.Synced() {
			select {
			case <-ctx.Done():
				return
			case <-p.Loop.after(p.Loop.SyncPoll):
			}
			continue
		}
		cctx, stop := context.WithCancel(ctx)
		go func() {
			for {
				select {
				case <-cctx.Done():
					return
				case <-p.Loop.after(p.Loop.SyncPoll):
				}
				if !st.leading() && !p.Watch.Synced() {
					p.Log.Info("stops campaigning", slog.String("why", "the watches' stores are not synced; it campaigns again once they are"))
					stop()
					return
				}
			}
		}()
		p.Elector.Campaign(cctx, func(term Term) {
			st.terms.Add(1)
			context.AfterFunc(term, func() { st.terms.Add(-1) })
			term.ended, term.stepDown = make(chan struct{}), stop
			select {
			case terms <- term:
				<-term.ended
			case <-looped:
			}
		})
		stop()
	}
}
