package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	interval = time.Minute
	poll     = time.Second
	wound    = 20 * time.Second
)

// errSignal stands for SIGTERM's cause, as the CLI gives it.
var errSignal = errors.New("received SIGTERM: no new action starts")

// loopRig drives a Loop with a clock and a sweeper of its own: every wait
// the loop asks for and every sweep it runs is an event, and so is each
// thing the test does, in one log whose order the test checks.
type loopRig struct {
	t      *testing.T
	mu     sync.Mutex
	events []string
	synced atomic.Bool
	waits  chan chan time.Time
	sweeps chan *sweepCall
	terms  chan Term
	// inFlight counts sweeps under way; overlapped is set if ever two.
	inFlight   atomic.Int32
	overlapped atomic.Bool
	cancel     context.CancelCauseFunc
	done       chan struct{}
}

// sweepCall is one sweep the loop runs: it holds until the test lets it
// return.
type sweepCall struct {
	ctx      context.Context
	release  chan struct{}
	returned chan struct{}
}

func (r *loopRig) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *loopRig) Synced() bool { return r.synced.Load() }

func (r *loopRig) Sweep(ctx context.Context) {
	if r.inFlight.Add(1) > 1 {
		r.overlapped.Store(true)
	}
	r.note("sweep")
	c := &sweepCall{ctx: ctx, release: make(chan struct{}), returned: make(chan struct{})}
	r.sweeps <- c
	<-c.release
	if ctx.Err() != nil {
		r.note("swept, stopped: " + context.Cause(ctx).Error())
	} else {
		r.note("swept")
	}
	r.inFlight.Add(-1)
	close(c.returned)
}

func (r *loopRig) after(d time.Duration) <-chan time.Time {
	r.note("wait " + d.String())
	ch := make(chan time.Time, 1)
	r.waits <- ch
	return ch
}

func newLoopRig(t *testing.T) *loopRig {
	r := &loopRig{t: t, waits: make(chan chan time.Time, 100), sweeps: make(chan *sweepCall), terms: make(chan Term),
		done: make(chan struct{})}
	l := &Loop{Sweeper: r, Stores: r, Interval: interval, SyncPoll: poll, WindDown: wound, After: r.after,
		OnTerm: func() { r.note("figures reset") }, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancelCause(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		l.Run(ctx, r.terms)
	}()
	t.Cleanup(func() {
		cancel(errSignal)
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("the loop did not stop")
		}
	})
	return r
}

// begin hands the loop a term, once it takes it, and returns its end.
func (r *loopRig) begin(name string) context.CancelFunc {
	term, end := context.WithCancel(context.Background())
	r.note("term " + name + " begins")
	r.terms <- Term{Context: term, Clean: true}
	return func() {
		r.note("term " + name + " ends")
		end()
	}
}

// beginUnreleased hands the loop a term that took over a Lease its
// holder did not release, and notes when the loop is done with it and
// whether it asked to step down.
func (r *loopRig) beginUnreleased(name string) <-chan struct{} {
	term, end := context.WithCancel(context.Background())
	r.note("term " + name + " begins, taken over")
	ended, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer end()
		<-ended
		r.note("term " + name + " done")
	}()
	r.terms <- Term{Context: term, ended: ended, stepDown: func() { r.note("step down") }}
	return done
}

// sweep is the sweep the loop runs next.
func (r *loopRig) sweep() *sweepCall {
	select {
	case c := <-r.sweeps:
		return c
	case <-time.After(10 * time.Second):
		r.t.Fatalf("no sweep; events: %v", r.log())
		return nil
	}
}

// finish lets a sweep return, and waits until it has.
func (c *sweepCall) finish() {
	close(c.release)
	<-c.returned
}

// tick fires the wait the loop asked for first of those not fired yet.
func (r *loopRig) tick() { r.tickAfter(func() {}) }

// tickAfter is tick, doing first what the world does meanwhile: the loop
// is then waiting, and sees it when the wait ends.
func (r *loopRig) tickAfter(meanwhile func()) {
	select {
	case ch := <-r.waits:
		meanwhile()
		r.note("tick")
		ch <- time.Time{}
	case <-time.After(10 * time.Second):
		r.t.Fatalf("the loop waits for nothing; events: %v", r.log())
	}
}

// signal ends the loop's context, and waits for Run to return.
func (r *loopRig) signal() {
	r.note("signal")
	r.cancel(errSignal)
	select {
	case <-r.done:
		r.note("run returned")
	case <-time.After(10 * time.Second):
		r.t.Fatalf("Run did not return; events: %v", r.log())
	}
}

func (r *loopRig) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func TestLoop(t *testing.T) {
	wait := fmt.Sprintf("wait %s", interval)
	for _, tc := range []struct {
		name   string
		script func(r *loopRig)
		want   []string
	}{
		{
			name: "a term sweeps at once, then at each interval, one sweep at a time",
			script: func(r *loopRig) {
				r.synced.Store(true)
				r.begin("1")
				r.sweep().finish()
				r.tick()
				r.sweep().finish()
				r.tick()
				r.sweep().finish()
				r.signal()
			},
			want: []string{"term 1 begins", "figures reset", wait, "sweep", "swept", "tick", wait, "sweep", "swept", "tick", wait, "sweep", "swept",
				"signal", "run returned"},
		},
		{
			name: "a sweep that is due waits for the stores to sync",
			script: func(r *loopRig) {
				r.begin("1")
				r.tick()
				r.tickAfter(func() { r.synced.Store(true) })
				r.sweep().finish()
				r.signal()
			},
			want: []string{"term 1 begins", "figures reset", "wait 1s", "tick", "wait 1s", "tick", wait, "sweep", "swept",
				"signal", "run returned"},
		},
		{
			name: "a lost Lease stops the sweep in flight; the next term sweeps at once",
			script: func(r *loopRig) {
				r.synced.Store(true)
				end := r.begin("1")
				c := r.sweep()
				end()
				<-c.ctx.Done()
				c.finish()
				r.begin("2")
				r.sweep().finish()
				r.signal()
			},
			want: []string{"term 1 begins", "figures reset", wait, "sweep", "term 1 ends", "swept, stopped: " + ErrLostLease.Error(),
				"term 2 begins", "figures reset", wait, "sweep", "swept", "signal", "run returned"},
		},
		{
			name: "a term won while the last one's sweep ends waits for it",
			script: func(r *loopRig) {
				r.synced.Store(true)
				end := r.begin("1")
				c := r.sweep()
				end()
				begun := make(chan struct{})
				r.note("term 2 offered")
				go func() {
					defer close(begun)
					r.terms <- Term{Context: context.Background(), Clean: true}
				}()
				// The sweep holds, its action in flight finishing: the
				// loop cannot take term 2 until it returns.
				<-c.ctx.Done()
				select {
				case <-begun:
					r.t.Error("the loop took a term while a sweep was in flight")
				default:
				}
				c.finish()
				<-begun
				r.sweep().finish()
				r.signal()
			},
			want: []string{"term 1 begins", "figures reset", wait, "sweep", "term 1 ends", "term 2 offered", "swept, stopped: " + ErrLostLease.Error(),
				"figures reset", wait, "sweep", "swept", "signal", "run returned"},
		},
		{
			name: "a signal stops the sweep in flight, and Run returns once it has returned",
			script: func(r *loopRig) {
				r.synced.Store(true)
				r.begin("1")
				c := r.sweep()
				r.note("signal")
				r.cancel(errSignal)
				<-c.ctx.Done()
				select {
				case <-r.done:
					r.t.Error("Run returned with a sweep in flight")
				default:
				}
				c.finish()
				<-r.done
				r.note("run returned")
			},
			want: []string{"term 1 begins", "figures reset", wait, "sweep", "signal", "swept, stopped: " + errSignal.Error(), "run returned"},
		},
		{
			name: "a term that took over an unreleased Lease waits out the wind-down before its first sweep",
			script: func(r *loopRig) {
				r.synced.Store(true)
				r.beginUnreleased("1")
				r.tick()
				r.sweep().finish()
				r.signal()
			},
			want: []string{"term 1 begins, taken over", "figures reset", "wait 20s", "tick", wait, "sweep", "swept", "signal", "run returned"},
		},
		{
			name: "a signal during the wind-down returns at once, with no sweep",
			script: func(r *loopRig) {
				r.synced.Store(true)
				r.beginUnreleased("1")
				select {
				case <-r.waits:
				case <-time.After(10 * time.Second):
					r.t.Fatal("no wind-down")
				}
				r.signal()
			},
			want: []string{"term 1 begins, taken over", "figures reset", "wait 20s", "signal", "run returned"},
		},
		{
			name: "a leader whose stores stay unsynced two intervals steps down, with no sweep in flight",
			script: func(r *loopRig) {
				done := r.beginUnreleased("1")
				r.tick()
				for range 2 * interval / poll {
					r.tick()
				}
				// The loop is done with the term once it asked to step
				// down; it takes the next.
				<-done
				r.synced.Store(true)
				r.begin("2")
				r.sweep().finish()
				r.signal()
			},
			want: append(append([]string{"term 1 begins, taken over", "figures reset", "wait 20s", "tick"},
				slices.Repeat([]string{"wait 1s", "tick"}, int(2*interval/poll))...),
				"step down", "term 1 done", "term 2 begins", "figures reset", wait, "sweep", "swept", "signal", "run returned"),
		},
		{
			name: "a standby sweeps nothing",
			script: func(r *loopRig) {
				r.synced.Store(true)
				r.signal()
			},
			want: []string{"signal", "run returned"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLoopRig(t)
			tc.script(r)
			assert.Equal(t, tc.want, r.log())
			assert.False(t, r.overlapped.Load(), "two sweeps at once")
			require.Empty(t, r.sweeps, "no sweep left")
		})
	}
}
