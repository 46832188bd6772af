package sweep_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/dynamo"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/statetest"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Two sweeps never both act, on every ledger: N sweeps
// that overlap on one ledger, all of them loading it before any saves, have
// a terminal pod ready to reap; exactly one reaps it (one registration
// DELETE, one Event, one pod delete) and the others start nothing, round
// after round. The racing sweeps change neither a mark nor the list cache
// (the pod needs no confirmation and every list page is answered 304), the
// case in which a save that does not move the version lets them all act.
// The record of actions gains exactly the one action of each round.
func TestConcurrentSweepsExactlyOneActs(t *testing.T) {
	env := plane.Env(t)
	const sweeps, rounds = 8, 3
	backends := []struct {
		name string
		// open returns a new store value on the test's ledger, as a
		// separate process would hold; nil means the sweeper's own (the
		// ConfigMap the configuration names).
		open func(t *testing.T) func() state.Store
	}{
		{"configmap", func(t *testing.T) func() state.Store { return nil }},
		{"file", func(t *testing.T) func() state.Store {
			path := filepath.Join(t.TempDir(), "ledger.json")
			return func() state.Store { return file.New(path) }
		}},
		{"dynamodb", func(t *testing.T) func() state.Store {
			d, err := testenv.StartDynalite()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, d.CreateTable(ctx, statetest.LedgerTable("runner-reaper-ledger")))
			return func() state.Store { return dynamo.New(d.Client, "runner-reaper-ledger", "runner-reaper", nil) }
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			r := newRig(t, func(c *config.Config) { c.HistorySize = 50 })
			open := b.open(t)
			sweeper := func() *sweep.Sweeper {
				s := r.sweeper()
				if open != nil {
					s.Ledger = open()
				}
				return s
			}
			for round := 0; round < rounds; round++ {
				name := fmtName("acme-done", round)
				reg := r.runner(name, "online", false)
				// A sweep while the runner is alive writes the ledger
				// and caches the list.
				require.NoError(t, sweeper().Run(context.Background(), sweep.Act).Err)
				r.pod(name, testenv.PodState{Phase: corev1.PodSucceeded, Terminated: testenv.Terminated(0, 0, "Completed")})
				r.sim.ResetRequests()

				var loaded sync.WaitGroup
				loaded.Add(sweeps)
				results := make([]sweep.Result, sweeps)
				var wg sync.WaitGroup
				for i := range results {
					s := sweeper()
					s.Ledger = loadBarrier{Store: s.Ledger, loaded: &loaded}
					wg.Add(1)
					go func() { defer wg.Done(); results[i] = s.Run(context.Background(), sweep.Act) }()
				}
				wg.Wait()

				acted := 0
				for i, res := range results {
					if res.Err == nil {
						acted++
						require.Len(t, res.Outcomes, 1, "sweep %d", i)
						assert.Equal(t, fleet.Deleted, res.Outcomes[0].Result, "sweep %d", i)
						continue
					}
					assert.ErrorIs(t, res.Err, state.ErrConflict, "sweep %d", i)
					assert.Empty(t, res.Outcomes, "sweep %d: a sweep whose save was refused starts no action", i)
				}
				assert.Equal(t, 1, acted, "round %d: exactly one sweep acts", round)

				deletes := 0
				for _, q := range r.sim.Requests() {
					if q.Method == http.MethodDelete {
						deletes++
					}
				}
				assert.Equal(t, 1, deletes, "round %d: one registration DELETE", round)
				evs, err := env.Client.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{
					FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
				require.NoError(t, err)
				assert.Equal(t, 1, len(evs.Items), "round %d: one Event", round)
				assert.False(t, r.podExists(name))
				assert.False(t, r.runnerExists(reg.ID))

				l, _, err := sweeper().Ledger.Load(context.Background())
				require.NoError(t, err)
				require.Len(t, l.History, round+1, "round %d: one record a round, none twice, none lost", round)
				last := l.History[round]
				assert.Equal(t, name, last.Pod, "round %d", round)
				assert.Equal(t, "deleted", last.RegistrationResult)
				assert.Equal(t, "deleted", last.ObjectResult)
			}
		})
	}
}

// loadBarrier holds each sweep after its ledger load until all have loaded,
// so that every one of them decides from the same version.
type loadBarrier struct {
	state.Store
	loaded *sync.WaitGroup
}

func (b loadBarrier) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	l, v, err := b.Store.Load(ctx)
	b.loaded.Done()
	b.loaded.Wait()
	return l, v, err
}
