package sweep_test

// Two overlapping real sweeps and the record of actions: the save that
// adds one sweep's record to the ledger another sweep saved must not cost
// that other sweep what its own save after acting carries.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// busyGitHub is GitHub answering every registration delete with 422: the
// runner took a job since it was listed.
type busyGitHub struct{ *fakeGitHub }

func (busyGitHub) DeleteRunner(context.Context, fleet.Scope, int64) (fleet.Result, error) {
	return fleet.Busy, nil
}

// beforeSave runs hook once, just before the nth save through it is sent.
type beforeSave struct {
	state.Store
	n, saves int
	hook     func()
}

func (b *beforeSave) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	b.saves++
	if b.saves == b.n {
		b.hook()
	}
	return b.Store.Save(ctx, l, v)
}

// Sweep A acts on a terminal pod; while its save after acting is on its
// way, sweep C (which loaded after A's save before acting) saves, finds
// the zombie registration confirmed and is told by GitHub that it is busy
// (spared: its verdict must be earned again from the start). A's save
// after acting loses the race and A adds its record to C's ledger; C's
// save after acting comes last. Whatever the record's size, C must not
// lose the clearing of the spared mark: a later sweep would otherwise
// delete the runner on the old mark, without a new confirmation.
func TestOverlappingSaveAfterActingKeepsTheOtherSweepsMarks(t *testing.T) {
	for name, fresh := range ledgers() {
		for _, size := range []int{0, 10} {
			t.Run(name+"/"+map[int]string{0: "no record", 10: "record"}[size], func(t *testing.T) {
				open := fresh(t)
				w := newWorld()
				w.ledger = open()
				zombie := fleet.RegistrationMarkKey(acme.Key(), 7)
				// The zombie registration is marked at t0.
				require.Equal(t, sweep.StatusComplete, w.recording(size).Run(context.Background(), sweep.Act).Status)
				require.Contains(t, w.marks(t), zombie)
				w.addDead()

				c := w.recording(size)
				c.Ledger = nil
				c.Now = func() time.Time { return t0.Add(6 * time.Minute) }
				c.Reaper = func(mode sweep.Mode) *reap.Reaper {
					return reap.New(busyGitHub{w.gh}, w.kube, reap.Options{
						DryRun: mode != sweep.Act, Limits: reconcile.Limits{MaxActions: 50, MaxFraction: 1},
						Scopes: map[string]fleet.Scope{acme.Key(): acme},
					})
				}
				reached, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
				var once sync.Once
				c.Ledger = &beforeSave{Store: open(), n: 2, hook: func() { once.Do(func() { close(reached) }); <-release }}
				var cres sweep.Result

				a := w.recording(size)
				a.Now = func() time.Time { return t0.Add(4 * time.Minute) }
				runC := func() {
					go func() {
						defer close(done)
						cres = c.Run(context.Background(), sweep.Act)
						once.Do(func() { close(reached) })
					}()
					<-reached
				}
				a.Ledger = &beforeSave{Store: open(), n: 2, hook: runC}
				ares := a.Run(context.Background(), sweep.Act)
				if a.Ledger.(*beforeSave).saves < 2 {
					// Nothing for A to save after acting: C runs
					// after A all the same.
					runC()
				}
				close(release)
				<-done

				assert.Equal(t, fleet.Deleted, results(ares)[fleet.PodMarkKey("uid-acme-dead")])
				require.Equal(t, fleet.SparedBusy, results(cres)[zombie], "%v", cres.Err)
				assert.NoError(t, cres.Err, "the sweep that saved last loses nothing")
				assert.NotContains(t, w.marks(t), zombie, "a spared runner's verdict is earned again from the start")
				if size > 0 {
					h := w.history(t)
					require.Len(t, h, 1, "%+v", h)
					assert.Equal(t, "acme-dead", h[0].Pod)
				}

				// Two minutes later GitHub would let the registration go:
				// it was confirmed again for two minutes only.
				w.now = t0.Add(8 * time.Minute)
				later := w.recording(size).Run(context.Background(), sweep.Act)
				require.NotEqual(t, sweep.StatusFailed, later.Status, "%v", later.Err)
				assert.Empty(t, w.gh.deletes(), "no delete before a new confirmation")
			})
		}
	}
}
