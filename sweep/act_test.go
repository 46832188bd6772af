package sweep_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// On the real API server with real RBAC: a Role that lets
// the reaper list pods but not delete them. The pre-flight (a server-side
// dry-run delete) is refused, so no registration is deleted on GitHub, no
// Event is recorded, the pods stay and the sweep fails; a dry run makes
// the same refusal. Before the pre-flight, the terminal pod's registration
// was deleted and its pod then stayed for good.
func TestPreflightRefusedDeletesNoRegistration(t *testing.T) {
	env := plane.Env(t)
	r := newRig(t, func(c *config.Config) { c.HistorySize = 200 })
	dead := r.runner("acme-dead", "offline", false)
	r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
	zombie := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())

	rules := testenv.Without(testenv.LeastPrivilege(), "delete pods")
	user := "reaper-no-delete-" + r.ns
	env.Grant(t, r.ns, "runner-reaper", user, rules...)
	cfg, err := env.AddUser(user)
	require.NoError(t, err)

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	runAs := func(mode sweep.Mode) sweep.Result {
		t.Helper()
		s, _, err := app.Build(r.cfg, cfg, log)
		require.NoError(t, err)
		s.Now, s.Local = r.clock.Now, r.clock.Now
		return reported(context.Background(), s, mode, log)
	}

	dry := runAs(sweep.DryRun)
	assert.Equal(t, sweep.StatusFailed, dry.Status, "a dry run makes the same refusal: %s", logs.String())
	require.Len(t, dry.Outcomes, 1)
	assert.Equal(t, fleet.Failed, dry.Outcomes[0].Result)

	first := runAs(sweep.Act)
	r.clock.Add(6 * time.Minute) // the zombie's mark matures
	second := runAs(sweep.Act)
	for _, res := range []sweep.Result{first, second} {
		assert.Equal(t, sweep.StatusFailed, res.Status, logs.String())
		for _, o := range res.Outcomes {
			assert.Equal(t, fleet.Failed, o.Result, o.Candidate.Key)
			assert.ErrorContains(t, o.Err, "would be refused, so registration")
		}
	}
	require.Len(t, second.Outcomes, 2, "the terminal pod and the confirmed zombie")

	for _, q := range r.sim.Requests() {
		assert.NotEqual(t, ghsim.EndpointDelete, q.Endpoint, "no registration delete: %s %s", q.Method, q.Path)
	}
	assert.True(t, r.runnerExists(dead.ID))
	assert.True(t, r.runnerExists(zombie.ID))
	assert.True(t, r.podExists("acme-dead"))
	assert.True(t, r.podExists("acme-zombie"))
	assert.Empty(t, r.events(), "no Event for an action that did not happen")
	assert.Contains(t, logs.String(), "forbidden")
	l, _, err := r.sweeper().Ledger.Load(context.Background())
	require.NoError(t, err)
	assert.Empty(t, l.History, "no record of an action that did not happen")
}

// events lists the RunnerReaped Events in the rig's namespace.
func (r *rig) events() []string {
	r.t.Helper()
	evs, err := r.env.Client.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(r.t, err)
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.InvolvedObject.Name)
	}
	return out
}

// The window between a re-check by name and its own pod delete holds no
// other candidate's GitHub call, with Kubernetes deletes running four at a
// time, on the real API server and the simulator. The test logs the
// window's length (lookup answered -> delete sent).
func TestRecheckWindowOnRealServers(t *testing.T) {
	r := newRig(t)
	const n = 8
	for i := 0; i < n; i++ {
		r.pod(fmt.Sprintf("acme-unreg-%d", i), testenv.Running())
		name := fmt.Sprintf("acme-zombie-%d", i)
		r.runner(name, "offline", false)
		r.pod(name, testenv.Running())
	}
	r.clock.Add(11 * time.Minute) // past the registration deadline
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)

	s := r.sweeper()
	tl := &timeline{}
	gh := timedGitHub{Registrations: s.GitHub.(reap.Registrations), tl: tl}
	client := s.Kube.(*kube.Client)
	kc := timedKube{Kubernetes: client, tl: tl}
	scopes := map[string]fleet.Scope{}
	for _, sc := range r.cfg.Scopes {
		scopes[sc.Key()] = sc
	}
	s.Reaper = func(mode sweep.Mode) *reap.Reaper {
		return reap.New(gh, kc, reap.Options{DryRun: mode != sweep.Act, Limits: r.cfg.Limits,
			Concurrency: r.cfg.KubeConcurrency, Scopes: scopes})
	}
	res := s.Run(context.Background(), sweep.Act)
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 2*n)
	for _, o := range res.Outcomes {
		assert.Equal(t, fleet.Deleted, o.Result, o.Candidate.Key)
	}

	var windows []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("acme-unreg-%d", i)
		found, del := tl.index("find-end:"+name), tl.index("pod-start:"+name)
		require.GreaterOrEqual(t, found, 0, name)
		require.Greater(t, del, found, name)
		for _, e := range tl.events[found+1 : del] {
			assert.False(t, strings.HasPrefix(e.what, "gh-start:"), "%s between the re-check of %s and its delete", e.what, name)
		}
		windows = append(windows, tl.events[del].at.Sub(tl.events[found].at))
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i] < windows[j] })
	t.Logf("re-check answered -> its pod delete sent, %d pods, Kubernetes concurrency %d: median %s, max %s",
		n, r.cfg.KubeConcurrency, windows[n/2], windows[n-1])
}

type event struct {
	what string
	at   time.Time
}

// timeline records when calls start and end, in order.
type timeline struct {
	mu     sync.Mutex
	events []event
}

func (tl *timeline) add(what string) {
	tl.mu.Lock()
	tl.events = append(tl.events, event{what, time.Now()})
	tl.mu.Unlock()
}

func (tl *timeline) index(what string) int {
	for i, e := range tl.events {
		if e.what == what {
			return i
		}
	}
	return -1
}

type timedGitHub struct {
	reap.Registrations
	tl *timeline
}

func (g timedGitHub) DeleteRunner(ctx context.Context, s fleet.Scope, id int64) (fleet.Result, error) {
	g.tl.add(fmt.Sprintf("gh-start:delete:%d", id))
	return g.Registrations.DeleteRunner(ctx, s, id)
}

func (g timedGitHub) FindRunner(ctx context.Context, s fleet.Scope, name string) (*fleet.Registration, error) {
	g.tl.add("gh-start:find:" + name)
	reg, err := g.Registrations.FindRunner(ctx, s, name)
	g.tl.add("find-end:" + name)
	return reg, err
}

type timedKube struct {
	reap.Kubernetes
	tl *timeline
}

func (k timedKube) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	k.tl.add("pod-start:" + p.Name)
	return k.Kubernetes.DeletePod(ctx, p)
}

// A dry run re-checks by name like a real sweep. A runner
// that registers between the list and the re-check is skipped-registered
// in a dry run too, where a dry run used to say would-delete.
func TestDryRunRechecksLikeARealSweep(t *testing.T) {
	r := newRig(t)
	r.pod("acme-late", testenv.Running())
	r.clock.Add(11 * time.Minute) // past the registration deadline
	require.NoError(t, r.run(sweep.DryRun).Err)
	r.clock.Add(6 * time.Minute)

	for _, mode := range []sweep.Mode{sweep.DryRun, sweep.Act} {
		s := r.sweeper()
		registered := false
		s.Runners = busyAfterList{RunnerLister: s.Runners, flip: func() {
			if !registered {
				r.runner("acme-late", "online", false)
				registered = true
			}
		}}
		res := s.Run(context.Background(), mode)
		require.NoError(t, res.Err, mode.String())
		require.Len(t, res.Outcomes, 1, mode.String())
		assert.Equal(t, fleet.SkippedRegistered, res.Outcomes[0].Result, mode.String())
		assert.Equal(t, mode == sweep.DryRun, res.Outcomes[0].DryRun)
		assert.True(t, r.podExists("acme-late"))
		for _, x := range r.sim.Runners(orgScope) {
			r.sim.RemoveRunner(orgScope, x.ID)
		}
	}
}

// secondSaveFails is a ledger whose saves after the first fail, as a file
// system that filled up, or a ConfigMap write refused, while the sweep
// acted.
type secondSaveFails struct {
	state.Store
	saves int
}

func (s *secondSaveFails) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	s.saves++
	if s.saves > 1 {
		return v, errors.New("write ledger.json: no space left on device")
	}
	return s.Store.Save(ctx, l, v)
}

// A ledger that cannot be saved after acting fails the sweep (exit 1, as
// the exit table says of any ledger not saved), with the actions still
// reported as done and the error naming what the ledger lost and what the
// next sweep redoes; the next sweep, with its ledger back, finds the pod
// gone and drops the mark.
func TestLedgerNotSavedAfterActingFailsTheSweep(t *testing.T) {
	r := newRig(t)
	r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)

	s := r.sweeper()
	failing := &secondSaveFails{Store: s.Ledger}
	s.Ledger = failing
	res := reported(context.Background(), s, sweep.Act, s.Log)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, fleet.Deleted, res.Outcomes[0].Result, "the action is done and reported as done")
	assert.False(t, r.podExists("acme-zombie"))
	assert.Equal(t, sweep.StatusFailed, res.Status)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "save ledger after acting: the actions above were done")
	assert.Contains(t, res.Err.Error(), "the 1 mark(s) of what was acted on")
	assert.Contains(t, res.Err.Error(), "no space left on device")
	acted := r.lines("action")
	require.NotEmpty(t, acted)
	assert.Equal(t, "deleted", acted[len(acted)-1]["result"])

	next := r.run(sweep.Act)
	require.NoError(t, next.Err)
	assert.Equal(t, sweep.StatusComplete, next.Status)
	assert.Empty(t, next.Confirmation.Marks, "the next sweep drops the mark of what is gone")
}
