// Package serve is the long-running mode, `runner-reaper serve`: a process
// that keeps its watches' stores synced, campaigns for a Lease, and while
// it leads sweeps at once and then every REAPER_INTERVAL, each sweep
// through the same Runtime as the CronJob's; it answers /metrics, /healthz
// and /readyz throughout. Its parts meet at small interfaces declared
// here (Sweeper, Stores, Elector, Watch), so that the order of a start and
// of a shutdown is tested without a cluster; Serve wires the real ones.
//
// Only the CLI links it: the Lambda does not, nor client-go's leader
// election and the typed clients that come with it.
package serve

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Sweeper runs one sweep, to its end: when its context ends it finishes
// the action in flight and saves the ledger, as a sweep stopped by a
// signal does, and only then returns.
type Sweeper interface {
	Sweep(ctx context.Context)
}

// Stores says whether the watches' stores can vouch for the whole fleet
// now (kube.Watch.Synced).
type Stores interface {
	Synced() bool
}

// ErrLostLease is why a sweep stopped when its leader lost the Lease: it
// ends as a sweep a signal stopped does, and its summary says so.
var ErrLostLease = errors.New("lost the Lease: no new action starts")

// Loop sweeps while its process leads: at once when a term of leadership
// begins (once the stores have synced), then every Interval from one
// sweep's start to the next, never two at once. A sweep runs in the term
// it began in and ends with it.
type Loop struct {
	Sweeper Sweeper
	Stores  Stores
	// Interval is REAPER_INTERVAL.
	Interval time.Duration
	// SyncPoll is how often a sweep that is due looks again at stores
	// that have not synced.
	SyncPoll time.Duration
	// After is time.After; a test gives its own clock.
	After func(time.Duration) <-chan time.Time
	Log   *slog.Logger
}

// Run takes each term of leadership from terms in turn, a context that
// ends when the term does, and sweeps during it, until ctx ends. It
// returns once the sweep in flight, if any, has returned: a new term waits
// for the sweep of the last one to end, so that two sweeps never overlap,
// even when the Lease is lost and won again meanwhile.
func (l *Loop) Run(ctx context.Context, terms <-chan context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case term := <-terms:
			l.lead(ctx, term)
		}
	}
}

// lead sweeps during one term, until it or ctx ends.
func (l *Loop) lead(ctx, term context.Context) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(term, func() { cancel(ErrLostLease) })
	defer stop()
	waiting := false
	for sctx.Err() == nil {
		if !l.Stores.Synced() {
			if !waiting {
				l.Log.Info("sweep waits for the watches",
					slog.String("effect", "a sweep is due, and the watches' stores cannot vouch for the whole fleet yet (see /readyz): it runs once they have synced"))
				waiting = true
			}
			select {
			case <-sctx.Done():
				return
			case <-l.after(l.SyncPoll):
			}
			continue
		}
		waiting = false
		next := l.after(l.Interval)
		l.Sweeper.Sweep(sctx)
		select {
		case <-sctx.Done():
			return
		case <-next:
		}
	}
}

func (l *Loop) after(d time.Duration) <-chan time.Time {
	if l.After != nil {
		return l.After(d)
	}
	return time.After(d)
}
