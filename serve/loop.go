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
	"fmt"
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

// Term is one term of leadership: its context ends when the term does.
type Term struct {
	context.Context
	// Clean says the Lease was free when this term took it: never held,
	// or released, which a holder does only once its sweep has returned.
	// Otherwise it was taken over from a holder whose renewals stopped,
	// and whose action in flight may still be finishing.
	Clean bool

	// ended, when set, is closed once the Loop is done with the term:
	// the Lease may be released then.
	ended chan struct{}
	// stepDown, when set, ends the campaign the term belongs to: the
	// Loop calls it when its stores stayed unsynced too long.
	stepDown func()
}

// windDown is how long a term taken over from a holder that did not
// release waits before its first sweep: what a leader that lost its term
// may still do after its renewals stopped. client-go ends a term after
// the renew deadline, and another replica may take the Lease at the next
// retry past its duration: a gap of the duration less the renew deadline
// less the retry period (3 s at 15 s), far shorter than the action in
// flight of a sweep told to stop. That action's steps each have their own
// budget (reap.DefaultSpare for the pre-flight and the registration
// delete, as much again for the Kubernetes writes, reap.DefaultEventTimeout
// for the Event), and the ledger's save after it another
// reap.DefaultSpare: 17 s, and a margin for the requests' own returns.
const windDown = 20 * time.Second

// unsyncedTerms is how many intervals a leader whose stores do not sync
// keeps the Lease before it steps down, so that a synced standby sweeps
// in its place.
const unsyncedTerms = 2

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
	// WindDown is how long a term that was not Clean waits before its
	// first sweep (windDown).
	WindDown time.Duration
	// OnTerm, when set, is called as the Loop takes up a term, before
	// anything of it runs (the last term's figures go).
	OnTerm func()
	// After is time.After; a test gives its own clock.
	After func(time.Duration) <-chan time.Time
	Log   *slog.Logger
}

// Run takes each term of leadership from terms in turn and sweeps during
// it, until ctx ends. It returns once the sweep in flight, if any, has
// returned: a new term waits for the sweep of the last one to end, so
// that two sweeps never overlap, even when the Lease is lost and won
// again meanwhile.
func (l *Loop) Run(ctx context.Context, terms <-chan Term) {
	for {
		select {
		case <-ctx.Done():
			return
		case term := <-terms:
			if l.OnTerm != nil {
				l.OnTerm()
			}
			down := l.lead(ctx, term)
			if down && term.stepDown != nil {
				term.stepDown()
			}
			if term.ended != nil {
				close(term.ended)
			}
		}
	}
}

// lead sweeps during one term, until it or ctx ends, or until the stores
// stayed unsynced for unsyncedTerms intervals: then, with no sweep in
// flight, it says the term should end (true).
func (l *Loop) lead(ctx context.Context, term Term) bool {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(term, func() { cancel(ErrLostLease) })
	defer stop()
	if !term.Clean && l.WindDown > 0 {
		l.Log.Info("first sweep waits for the last leader's wind-down", slog.Float64("wait_seconds", l.WindDown.Seconds()),
			slog.String("why", "the Lease was taken over unreleased: the last leader's action in flight may still be finishing"))
		select {
		case <-sctx.Done():
			return false
		case <-l.after(l.WindDown):
		}
	}
	// waited is how long the stores have been seen unsynced, counted in
	// polls so that the clock a test gives decides it.
	var waited time.Duration
	for sctx.Err() == nil {
		if !l.Stores.Synced() {
			if waited == 0 {
				l.Log.Info("sweep waits for the watches",
					slog.String("effect", "a sweep is due, and the watches' stores cannot vouch for the whole fleet yet (see /readyz): it runs once they have synced"))
			}
			if waited >= unsyncedTerms*l.Interval {
				l.Log.Warn("stepping down",
					slog.String("why", fmt.Sprintf("the watches' stores have not synced for %s", waited)),
					slog.String("effect", "the Lease is released so that a synced standby sweeps; this process campaigns again once its stores have synced"))
				return true
			}
			select {
			case <-sctx.Done():
				return false
			case <-l.after(l.SyncPoll):
			}
			waited += l.SyncPoll
			continue
		}
		waited = 0
		next := l.after(l.Interval)
		l.Sweeper.Sweep(sctx)
		select {
		case <-sctx.Done():
			return false
		case <-next:
		}
	}
	return false
}

func (l *Loop) after(d time.Duration) <-chan time.Time {
	if l.After != nil {
		return l.After(d)
	}
	return time.After(d)
}
