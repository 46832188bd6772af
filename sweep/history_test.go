package sweep_test

// The record of actions, driven through Sweeper.Run over the in-memory
// fakes of logic_test.go and every ledger (those that need a server skip
// under -short): what a sweep records, what it never records, the bound,
// and the save after acting that fails or loses a race. The end of this
// file runs a sweep against the real API server and the simulator.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/state/dynamo"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/state/memory"
	"github.com/runner-reaper/runner-reaper/sweep"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// recording is a sweeper of w that keeps n records.
func (w *world) recording(n int) *sweep.Sweeper {
	s := w.sweeper()
	s.HistorySize, s.Version, s.WebHost = n, "v9.9.9-test", "github.com"
	return s
}

func (w *world) history(t *testing.T) []state.Record {
	t.Helper()
	l, _, err := w.ledger.Load(context.Background())
	require.NoError(t, err)
	return l.History
}

// ledgers are the stores the record is tested on: the memory ledger and a
// file ledger on disk, and a ConfigMap on the real API server and an item
// in dynalite, which skip under -short. Each makes a fresh ledger and
// returns a way to open store values on it, as separate sweeps hold them.
func ledgers() map[string]func(t *testing.T) func() state.Store {
	return map[string]func(t *testing.T) func() state.Store{
		"memory": func(*testing.T) func() state.Store {
			m := memory.New()
			return func() state.Store { return m }
		},
		"file": func(t *testing.T) func() state.Store {
			path := filepath.Join(t.TempDir(), "ledger.json")
			return func() state.Store { return file.New(path) }
		},
		"configmap": func(t *testing.T) func() state.Store {
			env := plane.Env(t)
			ns := env.Namespace(t, "history")
			return func() state.Store {
				return configmap.New(env.Client.CoreV1().ConfigMaps(ns), ns, "runner-reaper-ledger", nil)
			}
		},
		"dynamodb": func(t *testing.T) func() state.Store {
			d := Dynalite(t, LedgerTable("runner-reaper-ledger"))
			key := t.Name()
			return func() state.Store { return dynamo.New(d.Client, "runner-reaper-ledger", key, nil) }
		},
	}
}

// An Act sweep records exactly the actions it carried out, with the
// sweep's reference clock and the release, and nothing for what it only
// marked; a later one appends its own.
func TestActSweepRecordsWhatItDid(t *testing.T) {
	for name, fresh := range ledgers() {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			w.ledger = fresh(t)()
			w.addDead()
			first := w.recording(10).Run(context.Background(), sweep.Act)
			require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
			require.Len(t, first.Pending, 1, "the zombie registration is only marked")
			h := w.history(t)
			require.Len(t, h, 1, "the terminal pod's delete, and nothing for the mark")
			assert.Equal(t, state.Record{
				At: t0, Verdict: "terminal", Evidence: first.Outcomes[0].Candidate.Evidence, Scope: "org:acme",
				Action: "delete-pod", Result: "deleted", ObjectKind: "Pod", Namespace: "runners", ObjectName: "acme-dead",
				Pod: "acme-dead", RunnerName: "acme-dead", ObjectResult: "deleted",
				Exit:    &state.RecordExit{Code: 0, Reason: "Completed", Class: "clean"},
				Version: "v9.9.9-test",
			}, h[0])

			w.now = w.now.Add(6 * time.Minute)
			due := w.recording(10).Run(context.Background(), sweep.Act)
			require.Equal(t, sweep.StatusComplete, due.Status, "%v", due.Err)
			require.Len(t, due.Outcomes, 1)
			h = w.history(t)
			require.Len(t, h, 2, "appended, oldest first")
			assert.Equal(t, "terminal", h[0].Verdict)
			g := h[1]
			assert.Equal(t, w.now, g.At)
			assert.Equal(t, "ghost", g.Verdict)
			assert.Equal(t, "delete-registration", g.Action)
			assert.Equal(t, "deleted", g.RegistrationResult)
			assert.Equal(t, int64(7), g.RunnerID)
			assert.Equal(t, "acme-zombie", g.RunnerName)
			assert.Empty(t, g.ObjectKind, "a registration alone has no object")
		})
	}
}

// refusing is the fake cluster whose pre-flight refuses every pod delete,
// as the API server refuses one the reaper has no right to.
type refusing struct{ *fakeKube }

func (refusing) DryRun() fleet.Writes { return refusedDryRun{} }

type refusedDryRun struct{ fakeDryRun }

func (refusedDryRun) DeletePod(context.Context, fleet.Pod) (fleet.Result, error) {
	return "", errors.New(`pods "acme-dead" is forbidden`)
}

// gone is the fake cluster where the pod was deleted by someone else
// between the pre-flight and the delete.
type gone struct{ *fakeKube }

func (gone) DeletePod(context.Context, fleet.Pod) (fleet.Result, error) {
	return fleet.AlreadyGone, nil
}

// A dry run and an audit record nothing and keep the record as they found
// it; a write refused, or one that found its object gone already, is no
// action done and records nothing either.
func TestOnlyActionsDoneAreRecorded(t *testing.T) {
	seed := History(3)
	for _, c := range []struct {
		name string
		mode sweep.Mode
		kube func(*fakeKube) reap.Kubernetes
		want fleet.Result
	}{
		{"dry run", sweep.DryRun, nil, fleet.WouldDelete},
		{"audit", sweep.Audit, nil, fleet.WouldDelete},
		{"pre-flight refused", sweep.Act, func(k *fakeKube) reap.Kubernetes { return refusing{k} }, fleet.Failed},
		{"already gone", sweep.Act, func(k *fakeKube) reap.Kubernetes { return gone{k} }, fleet.AlreadyGone},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			_, err := w.ledger.Save(context.Background(), state.Ledger{History: seed}, "")
			require.NoError(t, err)
			w.addDead()
			s := w.recording(10)
			if c.kube != nil {
				s.Reaper = reaperOver(w, c.kube(w.kube))
			}
			res := s.Run(context.Background(), c.mode)
			require.NotEmpty(t, res.Outcomes)
			assert.Equal(t, c.want, results(res)[fleet.PodMarkKey("uid-acme-dead")], "%v", res.Err)
			assert.Equal(t, seed, w.history(t), "the record is as it was")
		})
	}
}

// The record keeps the newest N; a bound lowered holds from the next sweep
// that acts, and 0 records nothing and clears what was recorded.
func TestRecordIsBounded(t *testing.T) {
	w := newWorld()
	for i := range 4 {
		w.kube.pods = append(w.kube.pods, fakePod(fmt.Sprintf("acme-dead-%d", i), func(p *fleet.Pod) {
			p.Phase = "Failed"
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 137, Reason: "OOMKilled"}}
		}))
		res := w.recording(3).Run(context.Background(), sweep.Act)
		require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
		w.now = w.now.Add(time.Minute)
	}
	h := w.history(t)
	require.Len(t, h, 3, "the newest 3 of 4")
	for i, r := range h {
		assert.Equal(t, fmt.Sprintf("acme-dead-%d", i+1), r.Pod)
	}

	w.recording(2).Run(context.Background(), sweep.Act)
	assert.Len(t, w.history(t), 2, "a lowered bound holds at once")
	w.recording(0).Run(context.Background(), sweep.Act)
	assert.Empty(t, w.history(t), "0 records nothing and clears the record")

	w.addDead()
	w.recording(0).Run(context.Background(), sweep.Act)
	assert.Empty(t, w.history(t))
	assert.Contains(t, w.kube.deletes(), "pod runners/acme-dead", "it acted all the same")
}

// reaperOver is w's reaper acting through kube instead of w's cluster.
func reaperOver(w *world, kube reap.Kubernetes) func(sweep.Mode) *reap.Reaper {
	return func(mode sweep.Mode) *reap.Reaper {
		return reap.New(w.gh, kube, reap.Options{
			DryRun: mode != sweep.Act, Limits: reconcile.Limits{MaxActions: 50, MaxFraction: 1},
			Scopes: map[string]fleet.Scope{acme.Key(): acme},
		})
	}
}

// failing lets the save before acting through and fails the save after.
type failing struct {
	state.Store
	mu    sync.Mutex
	saves int
	err   error
}

func (f *failing) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	f.mu.Lock()
	f.saves++
	n := f.saves
	f.mu.Unlock()
	if n == 2 {
		return "", f.err
	}
	return f.Store.Save(ctx, l, v)
}

// A save after acting that fails says that the record of what was done is
// lost, and how many actions it held; the sweep fails (exit 1), its
// actions still reported as done.
func TestFailedSaveAfterActingNamesTheLostRecord(t *testing.T) {
	w := newWorld()
	w.addDead()
	w.ledger = &failing{Store: w.ledger, err: errors.New("update ledger configmap: the server is shutting down")}
	res := w.recording(10).Run(context.Background(), sweep.Act)
	assert.Equal(t, sweep.StatusFailed, res.Status)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "save ledger after acting")
	assert.Contains(t, res.Err.Error(), "the record of 1 action(s)")
	assert.Contains(t, res.Err.Error(), "the server is shutting down")
	assert.Equal(t, fleet.Deleted, results(res)[fleet.PodMarkKey("uid-acme-dead")], "the action is still reported done")
	assert.Empty(t, w.history(t))
}

// rivalAfterActing is a ledger on which another sweep saves between this
// sweep's save before acting and its save after (a sweep that loaded after
// this one's first save, and saved before acting in turn). With landed,
// there is no rival: the save after acting lands, and its answer is lost
// (a retry of it refused), as a DynamoDB PutItem whose response was lost
// and that the SDK sent again.
type rivalAfterActing struct {
	state.Store
	rival  func() state.Store
	mark   fleet.Mark
	landed bool
	saves  int
}

func (r *rivalAfterActing) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	r.saves++
	if r.saves != 2 {
		return r.Store.Save(ctx, l, v)
	}
	if r.landed {
		if _, err := r.Store.Save(ctx, l, v); err != nil {
			return "", err
		}
		return "", fmt.Errorf("put item: %w", state.ErrConflict)
	}
	other := r.rival()
	ol, ov, err := other.Load(ctx)
	if err != nil {
		return "", err
	}
	ol.Marks["pod/rival"] = r.mark
	ol.History = append(ol.History, state.Record{At: t0.Add(24 * time.Hour), Verdict: "ghost", RunnerName: "the-rivals", Result: "deleted"})
	if _, err := other.Save(ctx, ol, ov); err != nil {
		return "", err
	}
	return r.Store.Save(ctx, l, v)
}

// Two overlapping sweeps: the one that acted loses the race for its save
// after acting to one that saved since. Its record is neither lost nor
// written twice: it is added once to the ledger the other sweep saved,
// whose marks stay as that sweep left them, in the order of the actions.
// A save that landed but whose answer was lost is found landed, and
// nothing is written twice.
func TestSaveAfterActingKeepsTheRecordThroughARace(t *testing.T) {
	for name, fresh := range ledgers() {
		t.Run(name+"/another sweep saved", func(t *testing.T) {
			open := fresh(t)
			w := newWorld()
			w.ledger = open()
			w.addDead()
			mark := fleet.Mark{Verdict: fleet.Zombie, FirstSeen: t0, LastSeen: t0, Scope: "org:acme"}
			s := w.recording(10)
			s.Ledger = &rivalAfterActing{Store: open(), rival: open, mark: mark}
			res := s.Run(context.Background(), sweep.Act)
			// The ghost's mark this sweep cleared nothing; its mark was
			// set before acting. Nothing but the record was to be saved.
			require.NoError(t, res.Err, "the record is kept, nothing else was lost")
			h := w.history(t)
			require.Len(t, h, 2, "the rival's record and this sweep's, once: %+v", h)
			assert.Equal(t, "acme-dead", h[0].Pod, "this sweep's action came first")
			assert.Equal(t, "the-rivals", h[1].RunnerName)
			assert.Equal(t, mark, w.marks(t)["pod/rival"], "the rival's marks are as it saved them")

			// The next sweep's records follow, nothing doubled: a dead
			// pod again, and the ghost now confirmed.
			w.addDead()
			w.now = w.now.Add(2 * time.Hour)
			require.NoError(t, w.recording(10).Run(context.Background(), sweep.Act).Err)
			h = w.history(t)
			require.Len(t, h, 4, "%+v", h)
			assert.Equal(t, "the-rivals", h[1].RunnerName)
			assert.Equal(t, []string{"terminal", "ghost"}, []string{h[2].Verdict, h[3].Verdict})
		})
		t.Run(name+"/the save landed, its answer lost", func(t *testing.T) {
			open := fresh(t)
			w := newWorld()
			w.ledger = open()
			w.addDead()
			s := w.recording(10)
			s.Ledger = &rivalAfterActing{Store: open(), landed: true}
			res := s.Run(context.Background(), sweep.Act)
			require.NoError(t, res.Err, "the save had landed: nothing was lost")
			h := w.history(t)
			require.Len(t, h, 1, "written once: %+v", h)
			assert.Equal(t, "acme-dead", h[0].Pod)
		})
	}
}

// When the save after acting lost the race and there were marks to clear
// too, the record is kept and the marks are cleared in the ledger the
// other sweep saved, whose own marks stay: nothing is lost.
func TestRaceKeepsTheRecordAndClearsTheMarks(t *testing.T) {
	w := newWorld()
	require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
	require.Len(t, w.marks(t), 1, "the zombie registration's mark")
	w.now = w.now.Add(time.Hour)
	s := w.recording(10)
	m := w.ledger
	rivals := fleet.Mark{Verdict: fleet.Ghost, FirstSeen: t0}
	s.Ledger = &rivalAfterActing{Store: m, rival: func() state.Store { return m }, mark: rivals}
	res := s.Run(context.Background(), sweep.Act)
	require.NoError(t, res.Err)
	assert.Equal(t, sweep.StatusComplete, res.Status)
	assert.Equal(t, map[string]fleet.Mark{"pod/rival": rivals}, w.marks(t), "the zombie's mark is cleared, the rival's kept")
	h := w.history(t)
	require.Len(t, h, 2)
	assert.Equal(t, "ghost", h[0].Verdict)
	assert.Equal(t, int64(7), h[0].RunnerID)
	assert.True(t, strings.HasPrefix(h[1].RunnerName, "the-rivals"))
}

// On the real API server and the simulator, wired as the CLI wires it: a
// dry run records nothing; a real sweep records the terminal pod it
// reaped, with its exit, and the next the zombie, with its registration's
// delete, on the sweep's clock; the ConfigMap shows them as plain JSON.
func TestRecordOnTheRealServers(t *testing.T) {
	env := plane.Env(t)
	r := newRig(t, func(c *config.Config) { c.HistorySize = 200 })
	z := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
	stored := func() []state.Record {
		t.Helper()
		cm, err := env.Client.CoreV1().ConfigMaps(r.ns).Get(context.Background(), "runner-reaper-ledger", metav1.GetOptions{})
		require.NoError(t, err)
		raw, ok := cm.Data["history.json"]
		if !ok {
			return nil
		}
		var h []state.Record
		require.NoError(t, json.Unmarshal([]byte(raw), &h), "history.json is plain JSON: %s", raw)
		return h
	}

	require.NoError(t, r.run(sweep.DryRun).Err)
	assert.True(t, r.podExists("acme-dead"))
	assert.Empty(t, stored(), "a dry run records nothing")

	first := r.clock.Now()
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)
	require.NoError(t, r.run(sweep.Act).Err)
	assert.False(t, r.podExists("acme-zombie"))

	h := stored()
	require.Len(t, h, 2, "%+v", h)
	dead, zombie := h[0], h[1]
	assert.Equal(t, "terminal", dead.Verdict)
	assert.True(t, first.Equal(dead.At), "the sweep's reference clock: %s, not %s", dead.At, first)
	assert.Equal(t, []string{"Pod", r.ns, "acme-dead", "deleted"}, []string{dead.ObjectKind, dead.Namespace, dead.ObjectName, dead.ObjectResult})
	require.NotNil(t, dead.Exit)
	assert.Equal(t, state.RecordExit{Code: 137, Reason: "OOMKilled", Class: "oom-host", FinishedAt: dead.Exit.FinishedAt}, *dead.Exit)
	assert.Equal(t, "zombie", zombie.Verdict)
	assert.True(t, first.Add(6*time.Minute).Equal(zombie.At))
	assert.Equal(t, z.ID, zombie.RunnerID)
	assert.Equal(t, "acme-zombie", zombie.RunnerName)
	assert.Equal(t, "delete-registration-then-pod", zombie.Action)
	assert.Equal(t, []string{"deleted", "deleted"}, []string{zombie.RegistrationResult, zombie.ObjectResult})
	assert.Contains(t, zombie.Evidence, "offline")
	assert.Equal(t, "dev", zombie.Version, "the release of a plain go build")
}
