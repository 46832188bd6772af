package sweep_test

import (
	"context"
	"net/http"
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
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Every verdict of docs/design.md's table and every exit fingerprint, through
// real sweeps: terminal pods go on the first sweep with their exit logged;
// the GitHub-based verdicts are marked, wait out confirm-after, then go;
// nothing else is touched.
func TestSweepReapsEveryVerdictAndNothingElse(t *testing.T) {
	env := plane.Env(t)
	r := newRig(t)
	healthy := r.runner("acme-healthy", "online", false)
	r.pod("acme-healthy", testenv.Running())
	busy := r.runner("acme-busy", "offline", true)
	r.pod("acme-busy", testenv.Running())
	zombie := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	r.pod("acme-unregistered", testenv.Running())
	stamped := r.runner("acme-stamped", "online", false)
	r.stampedPod("acme-stamped", testenv.Running())
	ghost := r.runner("acme-ghost", "offline", false)
	foreign := r.runner("build-box-7", "offline", false)
	deadReg := r.runner("acme-t-clean", "offline", false)

	fingerprints := map[string]struct {
		st    testenv.PodState
		class string
	}{
		"acme-t-clean":     {testenv.PodState{Phase: corev1.PodSucceeded, Terminated: testenv.Terminated(0, 0, "Completed")}, "clean"},
		"acme-t-oom":       {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}, "oom-host"},
		"acme-t-sigkill":   {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "Error")}, "sigkill"},
		"acme-t-sigterm":   {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(143, 0, "Error")}, "sigterm"},
		"acme-t-outdated":  {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(7, 0, "Error")}, "outdated"},
		"acme-t-crash":     {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(139, 0, "Error")}, "crash"},
		"acme-t-last":      {testenv.PodState{Phase: corev1.PodFailed, LastTerminated: testenv.Terminated(137, 0, "OOMKilled")}, "oom-host"},
		"acme-t-unknown":   {testenv.PodState{Phase: corev1.PodFailed, NoStatus: true}, "unknown"},
		"acme-t-inrunning": {testenv.PodState{Phase: corev1.PodRunning, Terminated: testenv.Terminated(1, 0, "Error")}, "crash"},
	}
	for name, fp := range fingerprints {
		r.pod(name, fp.st)
	}
	// A pod outside the selector is never judged, however dead.
	outside := r.pod("not-a-runner", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	_, err := env.Client.CoreV1().Pods(r.ns).Patch(context.Background(), outside.Name, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"actions-ephemeral-runner":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	r.clock.Add(11 * time.Minute) // every pod is past the registration deadline
	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	assert.Equal(t, sweep.StatusComplete, first.Status)
	for name := range fingerprints {
		assert.False(t, r.podExists(name), "terminal pod %s is reaped on the first sweep", name)
	}
	for _, name := range []string{"acme-zombie", "acme-unregistered", "acme-stamped", "acme-healthy", "acme-busy", "not-a-runner"} {
		assert.True(t, r.podExists(name), "%s waits for confirmation or is left alone", name)
	}
	assert.False(t, r.runnerExists(deadReg.ID), "a terminal pod's registration is deleted first")
	assert.True(t, r.runnerExists(ghost.ID), "a ghost waits for confirmation")

	// Each terminal pod was logged with its fingerprint.
	classes := map[string]string{}
	for _, l := range r.lines("action") {
		if l["verdict"] == "terminal" {
			classes[l["pod"].(string)] = l["exit_class"].(string)
			assert.Equal(t, "deleted", l["result"])
			assert.Equal(t, false, l["dry_run"])
		}
	}
	want := map[string]string{}
	for name, fp := range fingerprints {
		want[name] = fp.class
	}
	assert.Equal(t, want, classes)

	// Not yet: confirm-after has not passed.
	r.clock.Add(3 * time.Minute)
	second := r.run(sweep.Act)
	require.NoError(t, second.Err)
	assert.Empty(t, second.Outcomes)
	assert.Len(t, second.Pending, 4)

	r.clock.Add(3 * time.Minute)
	third := r.run(sweep.Act)
	require.NoError(t, third.Err)
	got := map[string]string{}
	for _, o := range third.Outcomes {
		key := o.Candidate.Key
		if o.Candidate.Pod != nil {
			key = o.Candidate.Pod.Name
		}
		got[key] = string(o.Candidate.Verdict) + "/" + string(o.Result)
	}
	assert.Equal(t, map[string]string{
		"acme-zombie":       "zombie/deleted",
		"acme-unregistered": "unregistered/deleted",
		"acme-stamped":      "orphan-stamped/deleted",
		fleet.RegistrationMarkKey(orgScope, ghost.ID): "ghost/deleted",
	}, got)
	for _, name := range []string{"acme-zombie", "acme-unregistered", "acme-stamped"} {
		assert.False(t, r.podExists(name))
	}
	assert.False(t, r.runnerExists(zombie.ID))
	assert.False(t, r.runnerExists(stamped.ID))
	assert.False(t, r.runnerExists(ghost.ID))
	assert.True(t, r.podExists("acme-healthy"))
	assert.True(t, r.podExists("acme-busy"), "rule 2: busy is never reaped")
	assert.True(t, r.podExists("not-a-runner"))
	assert.True(t, r.runnerExists(healthy.ID))
	assert.True(t, r.runnerExists(busy.ID))
	assert.True(t, r.runnerExists(foreign.ID), "nobody else's runners are touched")

	// An Event was recorded on every pod acted on.
	evs, err := env.Client.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "RunnerReaped").String()})
	require.NoError(t, err)
	onPods := map[string]bool{}
	for _, e := range evs.Items {
		onPods[e.InvolvedObject.Name] = true
	}
	for _, name := range []string{"acme-zombie", "acme-unregistered", "acme-stamped", "acme-t-oom", "acme-t-unknown"} {
		assert.True(t, onPods[name], "event on %s", name)
	}

	// The ledger is left clean.
	l, _, err := configmap.New(env.Client.CoreV1().ConfigMaps(r.ns), r.ns, "runner-reaper-ledger", nil).Load(context.Background())
	require.NoError(t, err)
	assert.Empty(t, l.Marks)
}

// Safety rule 1 (and 3): a scope whose list failed, was rate-limited or is
// short gives no verdict; marks are neither confirmed nor cleared; exit 3.
func TestSafetyRule1ScopeFaultHoldsMarks(t *testing.T) {
	faults := map[string]ghsim.Fault{
		"500":            {Status: 500},
		"502 on page 2":  {Status: 502, Page: 2},
		"primary limit":  {PrimaryLimit: true},
		"secondary 429":  {Secondary: 429},
		"a runner twice": {RepeatItems: 1},
		"timeout":        {Hang: 3 * time.Second},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, func(c *config.Config) { c.GitHub.Timeout = time.Second })
			// Enough runners for two pages of 100, so that page faults bite.
			for i := 0; i < 120; i++ {
				r.runner(fmtName("acme-idle", i), "online", false)
			}
			r.runner("acme-zombie", "offline", false)
			r.pod("acme-zombie", testenv.Running())
			r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

			first := r.run(sweep.Act)
			require.NoError(t, first.Err)
			require.Len(t, first.Pending, 1)
			marked := first.Confirmation.Marks

			r.sim.Fault(orgScope, "list", fault)
			r.clock.Add(10 * time.Minute)
			res := r.run(sweep.Act)
			assert.Equal(t, sweep.StatusDegraded, res.Status)
			assert.True(t, r.podExists("acme-zombie"), "no verdict from a list that was not read whole")
			assert.Equal(t, marked, res.Confirmation.Marks, "marks neither confirmed nor cleared")
			assert.Len(t, res.Confirmation.Held, 1)
			require.NotEmpty(t, r.lines("scope skipped"))

			// The kubelet's word needs no list: the terminal pod went
			// on the first sweep regardless.
			assert.False(t, r.podExists("acme-dead"))

			// Once the list reads whole again, the held mark acts.
			r.sim.ClearFaults()
			r.clock.Add(time.Minute)
			after := r.run(sweep.Act)
			require.NoError(t, after.Err)
			assert.Equal(t, sweep.StatusComplete, after.Status)
			assert.False(t, r.podExists("acme-zombie"))
		})
	}
}

// Safety rule 2: a runner that goes busy between the list and the delete
// answers 422, and its pod survives with its mark cleared.
func TestSafetyRule2RunnerTurnsBusyBeforeDelete(t *testing.T) {
	r := newRig(t)
	z := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)

	s := r.sweeper()
	s.Runners = busyAfterList{RunnerLister: s.Runners, flip: func() {
		r.sim.SetRunner(orgScope, z.ID, func(x *ghsim.Runner) { x.Busy = true })
	}}
	res := s.Run(context.Background(), sweep.Act)
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, "spared-busy", string(res.Outcomes[0].Result))
	assert.True(t, r.podExists("acme-zombie"))
	assert.True(t, r.runnerExists(z.ID))
	l, _, err := s.Ledger.Load(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, l.Marks, res.Outcomes[0].Candidate.Key, "the mark is cleared")
}

// busyAfterList lets the runner take a job after GitHub listed it idle.
type busyAfterList struct {
	sweep.RunnerLister
	flip func()
}

func (b busyAfterList) ListRunners(ctx context.Context, s fleet.Scope, c *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, cache, err := b.RunnerLister.ListRunners(ctx, s, c)
	b.flip()
	return regs, cache, err
}

// Safety rule 3: a transient error on the registration delete is not
// evidence: the pod stays, the sweep says it could not act.
func TestSafetyRule3TransientDeleteErrorSparesPod(t *testing.T) {
	r := newRig(t)
	z := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)
	r.sim.Fault(orgScope, "delete", ghsim.Fault{Status: 502})
	res := r.run(sweep.Act)
	assert.Equal(t, sweep.StatusFailed, res.Status)
	assert.True(t, r.podExists("acme-zombie"))
	assert.True(t, r.runnerExists(z.ID))
	assert.Equal(t, res.Confirmation.Marks[res.Outcomes[0].Candidate.Key].Verdict, fleet.Zombie, "the mark stays for the next sweep")
}

// Safety rule 4: a mass invalidation is reported loudly, nothing is reaped
// on the first sweep, and after confirm-after the fleet drains at the bound.
func TestSafetyRule4MassInvalidationDrainsAtTheBound(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Limits = reconcile.Limits{MaxActions: 3, MaxFraction: 1} })
	for i := 0; i < 8; i++ {
		r.runner(fmtName("acme-z", i), "offline", false)
		r.pod(fmtName("acme-z", i), testenv.Running())
	}
	r.runner("acme-ok", "online", false)
	r.pod("acme-ok", testenv.Running())

	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	assert.Empty(t, first.Outcomes)
	require.Len(t, r.lines("mass suspicion"), 1)
	assert.EqualValues(t, 8, r.lines("mass suspicion")[0]["newly_suspect"])

	r.clock.Add(6 * time.Minute)
	var drained []int
	for i := 0; i < 4; i++ {
		res := r.run(sweep.Act)
		require.NoError(t, res.Err)
		n := 0
		for _, o := range res.Outcomes {
			if o.Result == "deleted" {
				n++
			}
		}
		drained = append(drained, n)
		r.clock.Add(time.Minute)
	}
	assert.Equal(t, []int{3, 3, 2, 0}, drained)
	assert.True(t, r.podExists("acme-ok"))
}

// Two sweeps racing on the same ConfigMap ledger: only the one whose save
// lands acts; the other starts nothing.
func TestConfigMapLedgerConflictStopsSecondSweep(t *testing.T) {
	r := newRig(t)
	regs := map[int64]bool{}
	for i := 0; i < 3; i++ {
		regs[r.runner(fmtName("acme-z", i), "offline", false).ID] = true
		r.pod(fmtName("acme-z", i), testenv.Running())
	}
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)
	r.sim.ResetRequests()

	// Both sweeps load the ledger and list pods before either saves.
	var barrier sync.WaitGroup
	barrier.Add(2)
	results := make([]sweep.Result, 2)
	var wg sync.WaitGroup
	for i := range results {
		s := r.sweeper()
		s.Pods = waitForBoth{PodLister: s.Pods, barrier: &barrier}
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = s.Run(context.Background(), sweep.Act) }()
	}
	wg.Wait()

	var acted, refused int
	for _, res := range results {
		if res.Err == nil {
			acted++
			assert.Len(t, res.Outcomes, 3)
		} else {
			refused++
			assert.ErrorIs(t, res.Err, state.ErrConflict)
			assert.Empty(t, res.Outcomes, "a sweep whose save failed starts no action")
		}
	}
	assert.Equal(t, 1, acted)
	assert.Equal(t, 1, refused)
	deletes := 0
	for _, q := range r.sim.Requests() {
		if q.Method == http.MethodDelete {
			deletes++
		}
	}
	assert.Equal(t, 3, deletes, "each registration deleted exactly once")
}

type waitForBoth struct {
	sweep.PodLister
	barrier *sync.WaitGroup
}

func (w waitForBoth) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	pods, err := w.PodLister.ListPods(ctx)
	w.barrier.Done()
	w.barrier.Wait()
	return pods, err
}

// Dry-run marks like a real sweep and deletes nothing; an audit changes
// nothing at all, not even the ledger.
func TestDryRunAndAuditDeleteNothing(t *testing.T) {
	env := plane.Env(t)
	r := newRig(t)
	z := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	store := configmap.New(env.Client.CoreV1().ConfigMaps(r.ns), r.ns, "runner-reaper-ledger", nil)

	audit := r.run(sweep.Audit)
	require.NoError(t, audit.Err)
	_, v, err := store.Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, state.Version(""), v, "an audit writes no ledger")

	require.NoError(t, r.run(sweep.DryRun).Err)
	r.clock.Add(6 * time.Minute)
	dry := r.run(sweep.DryRun)
	require.NoError(t, dry.Err)
	require.Len(t, dry.Outcomes, 2)
	for _, o := range dry.Outcomes {
		assert.Equal(t, "would-delete", string(o.Result))
		assert.True(t, o.DryRun)
	}
	assert.True(t, r.podExists("acme-zombie"))
	assert.True(t, r.podExists("acme-dead"))
	assert.True(t, r.runnerExists(z.ID))
	for _, q := range r.sim.Requests() {
		assert.NotEqual(t, "DELETE", q.Method)
	}
	for _, l := range r.lines("action") {
		assert.Equal(t, true, l["dry_run"])
	}
	evs, err := env.Client.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, evs.Items, "a dry run records no Events")
}

func fmtName(prefix string, i int) string {
	return prefix + "-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
}
