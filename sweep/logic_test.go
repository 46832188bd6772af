package sweep_test

// The sweep's own logic, driven through Sweeper.Run over small in-memory
// fakes of its ports: no control plane, no GitHub simulator, no network.
// These run in -short; the envtest and e2e layers keep what only real parts
// can show (the requests sent, RBAC, the process's exit and log lines).

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/state/memory"
	"github.com/runner-reaper/runner-reaper/sweep"
)

var (
	acme = fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}
	beta = fleet.Scope{Kind: fleet.OrgScope, Name: "beta"}
)

// fakeKube is the cluster: a pod list that may fail, and every delete the
// reaper sends, by kind.
type fakeKube struct {
	mu      sync.Mutex
	pods    []fleet.Pod
	listErr error
	deleted []string // "pod ns/name", "sa ns/name", "er ns/name", ...
}

func (k *fakeKube) ListPods(context.Context) ([]fleet.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.listErr != nil {
		return nil, k.listErr
	}
	return append([]fleet.Pod(nil), k.pods...), nil
}

func (k *fakeKube) ListEphemeralRunners(context.Context, []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	return nil, nil
}

func (k *fakeKube) record(what string) (fleet.Result, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.deleted = append(k.deleted, what)
	return fleet.Deleted, nil
}

func (k *fakeKube) deletes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.deleted...)
}

// DeletePod removes the pod from later lists, as the API server would.
func (k *fakeKube) DeletePod(_ context.Context, p fleet.Pod) (fleet.Result, error) {
	k.mu.Lock()
	for i, q := range k.pods {
		if q.UID == p.UID {
			k.pods = append(k.pods[:i:i], k.pods[i+1:]...)
			break
		}
	}
	k.mu.Unlock()
	return k.record("pod " + p.Namespace + "/" + p.Name)
}
func (k *fakeKube) DeleteServiceAccount(_ context.Context, ns, name string) (fleet.Result, error) {
	return k.record("sa " + ns + "/" + name)
}
func (k *fakeKube) RecordEvent(context.Context, fleet.Pod, string, string) error { return nil }
func (k *fakeKube) DeleteOwner(_ context.Context, ns string, o fleet.Owner) (fleet.Result, error) {
	return k.record("owner " + ns + "/" + o.Name)
}
func (k *fakeKube) DeleteEphemeralRunner(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return k.record("er " + er.Namespace + "/" + er.Name)
}
func (k *fakeKube) RemoveFinalizers(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return k.record("finalizers " + er.Namespace + "/" + er.Name)
}
func (k *fakeKube) ReleaseRegistration(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return k.record("release " + er.Namespace + "/" + er.Name)
}
func (k *fakeKube) RecordEphemeralRunnerEvent(context.Context, fleet.EphemeralRunner, string, string) error {
	return nil
}

func (k *fakeKube) DryRun() fleet.Writes { return fakeDryRun{} }

// fakeDryRun is the fake cluster's writes as server-side dry runs: every
// one would be allowed.
type fakeDryRun struct{}

func (fakeDryRun) DeletePod(context.Context, fleet.Pod) (fleet.Result, error) {
	return fleet.Deleted, nil
}
func (fakeDryRun) DeleteServiceAccount(context.Context, string, string) (fleet.Result, error) {
	return fleet.Deleted, nil
}
func (fakeDryRun) DeleteOwner(context.Context, string, fleet.Owner) (fleet.Result, error) {
	return fleet.Deleted, nil
}
func (fakeDryRun) DeleteEphemeralRunner(context.Context, fleet.EphemeralRunner) (fleet.Result, error) {
	return fleet.Deleted, nil
}
func (fakeDryRun) RemoveFinalizers(context.Context, fleet.EphemeralRunner) (fleet.Result, error) {
	return fleet.Deleted, nil
}
func (fakeDryRun) ReleaseRegistration(context.Context, fleet.EphemeralRunner) (fleet.Result, error) {
	return fleet.Deleted, nil
}

// fakeGitHub is GitHub: each scope's registrations, a scope whose list
// fails, and every registration delete sent.
type fakeGitHub struct {
	mu      sync.Mutex
	runners map[string][]fleet.Registration
	listErr map[string]error
	deleted []int64
	listed  []string // the scope of every list request
}

func (g *fakeGitHub) ListRunners(_ context.Context, s fleet.Scope, _ *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listed = append(g.listed, s.Key())
	if err := g.listErr[s.Key()]; err != nil {
		return nil, nil, err
	}
	return append([]fleet.Registration(nil), g.runners[s.Key()]...), nil, nil
}

func (g *fakeGitHub) FindRunner(_ context.Context, s fleet.Scope, name string) (*fleet.Registration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.runners[s.Key()] {
		if r.Name == name {
			r := r
			return &r, nil
		}
	}
	return nil, nil
}

func (g *fakeGitHub) DeleteRunner(_ context.Context, s fleet.Scope, id int64) (fleet.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleted = append(g.deleted, id)
	rs := g.runners[s.Key()]
	for i, r := range rs {
		if r.ID == id {
			g.runners[s.Key()] = append(rs[:i:i], rs[i+1:]...)
			return fleet.Deleted, nil
		}
	}
	return fleet.AlreadyGone, nil
}

func (g *fakeGitHub) deletes() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int64(nil), g.deleted...)
}

// world is one fake fleet in scope org:acme: a zombie registration (no pod
// claims it) and a healthy runner with its registration.
type world struct {
	kube   *fakeKube
	gh     *fakeGitHub
	ledger state.Store
	now    time.Time
	// spare is the reaper's Spare: no action starts closer than this to
	// the context's deadline.
	spare time.Duration
	// scopes are the configured scopes; acme alone unless a test adds one.
	scopes []fleet.Scope
}

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func fakePod(name string, mods ...func(*fleet.Pod)) fleet.Pod {
	p := fleet.Pod{
		Namespace: "runners", Name: name, UID: "uid-" + name, ResourceVersion: "1",
		RunnerName: name, ScopeKey: acme.Key(), Phase: "Running", CreatedAt: fleet.StampOf(t0.Add(-time.Hour)),
		Runner: fleet.Container{Found: true, Running: true}, HasRunner: true,
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

// deadPod is a runner pod whose runner finished: terminal, so it goes
// without waiting for confirm-after.
func deadPod() fleet.Pod {
	return fakePod("acme-dead", func(p *fleet.Pod) {
		p.Phase = "Succeeded"
		p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 0, Reason: "Completed"}}
	})
}

// addDead puts a terminal pod into the fleet, which any sweep that acts
// deletes at once: the tests that expect no delete add it to show that.
func (w *world) addDead() { w.kube.pods = append(w.kube.pods, deadPod()) }

func newWorld() *world {
	return &world{
		kube: &fakeKube{pods: []fleet.Pod{fakePod("acme-live")}},
		gh: &fakeGitHub{runners: map[string][]fleet.Registration{acme.Key(): {
			{ID: 7, Name: "acme-zombie"},
			{ID: 8, Name: "acme-live", Online: true, Busy: true},
		}}, listErr: map[string]error{}},
		ledger: memory.New(),
		now:    t0,
		scopes: []fleet.Scope{acme},
	}
}

func (w *world) sweeper() *sweep.Sweeper {
	return &sweep.Sweeper{
		Pods:             w.kube,
		Runners:          w.gh,
		EphemeralRunners: w.kube,
		Ledger:           w.ledger,
		Reaper: func(mode sweep.Mode) *reap.Reaper {
			return reap.New(w.gh, w.kube, reap.Options{
				DryRun: mode != sweep.Act, Limits: reconcile.Limits{MaxActions: 50, MaxFraction: 1},
				Scopes: map[string]fleet.Scope{acme.Key(): acme, beta.Key(): beta},
				Spare:  w.spare,
			})
		},
		Scopes: w.scopes,
		Policy: reconcile.Policy{RegistrationDeadline: 10 * time.Minute, GhostNamePrefix: "acme-"},
		Hold:   reconcile.Hold{ConfirmAfter: 5 * time.Minute, StampMaxAge: 5 * time.Minute, MassSuspicionFraction: 0.5, MassSuspicionMin: 5},
		Log:    slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Now:    func() time.Time { return w.now },
	}
}

func (w *world) run(mode sweep.Mode) sweep.Result {
	return w.sweeper().Run(context.Background(), mode)
}

func (w *world) marks(t *testing.T) map[string]fleet.Mark {
	t.Helper()
	l, _, err := w.ledger.Load(context.Background())
	require.NoError(t, err)
	return l.Marks
}

func results(res sweep.Result) map[string]fleet.Result {
	out := map[string]fleet.Result{}
	for _, o := range res.Outcomes {
		out[o.Candidate.Key] = o.Result
	}
	return out
}

func TestRunMarksThenActsAfterConfirmAfter(t *testing.T) {
	w := newWorld()
	w.addDead()
	first := w.run(sweep.Act)
	require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
	assert.Equal(t, []string{"pod runners/acme-dead"}, w.kube.deletes(), "a terminal pod goes at once")
	require.Len(t, first.Pending, 1, "the zombie is marked, not acted on")
	assert.Len(t, w.marks(t), 1)
	assert.Empty(t, w.gh.deletes())

	w.now = w.now.Add(4 * time.Minute)
	early := w.run(sweep.Act)
	assert.Empty(t, early.Outcomes, "confirm-after has not passed")
	assert.Empty(t, w.gh.deletes())
	assert.Len(t, w.marks(t), 1)

	w.now = w.now.Add(2 * time.Minute)
	due := w.run(sweep.Act)
	require.Equal(t, sweep.StatusComplete, due.Status, "%v", due.Err)
	require.Len(t, due.Outcomes, 1)
	assert.Equal(t, fleet.Deleted, due.Outcomes[0].Result)
	assert.Equal(t, []int64{7}, w.gh.deletes(), "only the zombie's registration")
	assert.Empty(t, w.marks(t), "acted marks are cleared")
}

func TestRunSkippedScopeHoldsMarksAndDegrades(t *testing.T) {
	w := newWorld()
	require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
	before := w.marks(t)
	require.Len(t, before, 1)

	w.gh.listErr[acme.Key()] = errors.New("list runners: 502 Bad Gateway")
	w.now = w.now.Add(time.Hour)
	res := w.run(sweep.Act)
	assert.Equal(t, sweep.StatusDegraded, res.Status, "a skipped scope exits 3")
	assert.NotEmpty(t, res.Class.Skipped)
	assert.Empty(t, w.gh.deletes(), "nothing is deleted on GitHub from an incomplete list")
	for key := range before {
		assert.Contains(t, w.marks(t), key, "the skipped scope's marks are held")
	}
}

// rival is a ledger that another sweep saves to between this sweep's load
// and its save.
type rival struct {
	state.Store
	once sync.Once
}

func (r *rival) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	l, v, err := r.Store.Load(ctx)
	if err != nil {
		return l, v, err
	}
	r.once.Do(func() { _, err = r.Store.Save(ctx, l, v) })
	return l, v, err
}

func TestRunLedgerConflictActsOnNothing(t *testing.T) {
	w := newWorld()
	require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
	w.now = w.now.Add(time.Hour)
	w.addDead()
	w.ledger = &rival{Store: w.ledger}
	res := w.run(sweep.Act)
	assert.Equal(t, sweep.StatusFailed, res.Status)
	require.ErrorIs(t, res.Err, state.ErrConflict)
	assert.Empty(t, res.Outcomes)
	assert.Empty(t, w.kube.deletes())
	assert.Empty(t, w.gh.deletes())
}

func TestRunUnlistablePodsDeleteNothing(t *testing.T) {
	w := newWorld()
	require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
	w.now = w.now.Add(time.Hour)
	w.addDead()
	w.kube.listErr = errors.New("pods is forbidden")
	res := w.run(sweep.Act)
	assert.Equal(t, sweep.StatusFailed, res.Status, "exit 1")
	require.ErrorContains(t, res.Err, "observe pods")
	assert.Empty(t, w.gh.deletes(), "no registration is deleted when pods cannot be seen")
	assert.Empty(t, w.kube.deletes())
	assert.Len(t, w.marks(t), 1, "the ledger is left as it was")
}

func TestRunDryRunAndAuditWriteNothing(t *testing.T) {
	for _, tc := range []struct {
		mode      sweep.Mode
		wantMarks int
	}{
		{sweep.DryRun, 1}, // dry-run marks like a sweep, and deletes nothing
		{sweep.Audit, 0},  // audit does not even write the ledger
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			w := newWorld()
			w.addDead()
			first := w.run(tc.mode)
			require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
			assert.Len(t, w.marks(t), tc.wantMarks)

			w.now = w.now.Add(time.Hour)
			res := w.run(tc.mode)
			require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
			assert.Empty(t, w.kube.deletes())
			assert.Empty(t, w.gh.deletes())
			if tc.mode == sweep.DryRun {
				require.Len(t, res.Outcomes, 2, "the dead pod and the confirmed zombie")
				for _, r := range results(res) {
					assert.Equal(t, fleet.WouldDelete, r)
				}
			}
		})
	}
}

func TestRunNotReachedAndRateLimitedDegrade(t *testing.T) {
	t.Run("not reached", func(t *testing.T) {
		w := newWorld()
		require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
		w.now = w.now.Add(time.Hour)
		w.addDead()
		// The deadline is a minute away and the reaper keeps an hour
		// spare: the sweep observes and saves its marks, then starts no
		// action.
		w.spare = time.Hour
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res := w.sweeper().Run(ctx, sweep.Act)
		assert.Equal(t, sweep.StatusDegraded, res.Status, "an action owed exits 3")
		require.Len(t, res.Outcomes, 2)
		for _, r := range results(res) {
			assert.Equal(t, fleet.NotReached, r)
		}
		assert.Empty(t, w.kube.deletes())
		assert.Empty(t, w.gh.deletes())
		assert.Len(t, w.marks(t), 1, "the zombie's mark waits for the next sweep")
	})
	t.Run("rate-limited", func(t *testing.T) {
		w := newWorld()
		require.Equal(t, sweep.StatusComplete, w.run(sweep.Act).Status)
		w.now = w.now.Add(time.Hour)
		w.scopes = append(w.scopes, beta)
		w.gh.listed = nil
		w.gh.listErr[acme.Key()] = &fleet.RateLimitError{Until: w.now.Add(time.Hour), Err: errors.New("403 rate limit exceeded")}
		res := w.run(sweep.Act)
		assert.Equal(t, sweep.StatusDegraded, res.Status, "a rate limit exits 3, not 1")
		assert.Nil(t, res.Err)
		assert.Equal(t, []string{acme.Key()}, w.gh.listed, "the later scope is not asked once GitHub rate-limited")
		require.Contains(t, res.Observation.Lists, beta.Key())
		assert.False(t, res.Observation.Lists[beta.Key()].Complete)
		assert.Empty(t, w.gh.deletes(), "GitHub is sent nothing more once it rate-limited")
	})
}

// cancelling wraps a runner lister and cancels the sweep's context while a
// list is under way, as a SIGTERM or the deadline would.
type cancelling struct {
	inner  sweep.RunnerLister
	cancel context.CancelFunc
}

func (c cancelling) ListRunners(ctx context.Context, s fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	c.cancel()
	return c.inner.ListRunners(ctx, s, cache)
}

// A signal or the deadline during the runner lists is a failed observation,
// whatever the ledger: exit 1, nothing saved, nothing deleted. The file
// ledger (the default outside a pod) would still accept a save under a
// cancelled context, so the sweep itself must stop.
func TestRunStoppedDuringTheListsSavesAndDeletesNothing(t *testing.T) {
	for _, mode := range []sweep.Mode{sweep.Act, sweep.Audit} {
		t.Run(mode.String(), func(t *testing.T) {
			w := newWorld()
			path := filepath.Join(t.TempDir(), "ledger.json")
			w.ledger = file.New(path)
			w.addDead()
			ctx, cancel := context.WithCancelCause(context.Background())
			s := w.sweeper()
			s.Runners = cancelling{inner: w.gh, cancel: func() { cancel(errors.New("received SIGTERM")) }}
			res := s.Run(ctx, mode)
			assert.Equal(t, sweep.StatusFailed, res.Status, "exit 1: %v", res.Err)
			require.ErrorContains(t, res.Err, "observe runner lists")
			assert.Empty(t, res.Outcomes, "nothing was decided")
			assert.Empty(t, w.kube.deletes(), "the terminal pod stays")
			assert.Empty(t, w.gh.deletes())
			_, err := os.Stat(path)
			assert.True(t, os.IsNotExist(err), "no ledger was written")
		})
	}
}
