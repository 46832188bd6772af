package e2e_test

// The reaper beside ARC v0.27.6's real manager in legacy mode
// (actions.summerwind.dev: RunnerDeployment, RunnerReplicaSet, Runner), on
// the shared API server, with the GitHub simulator serving the REST API
// both call. The test plays the runner binary (it registers the runner on
// the simulator under the Runner's name), the kubelet (the pod runs; a
// deleted pod's runner stops) and the garbage collector (a deleted
// Runner's pod is deleted): testenv.PlayLegacyCluster.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

type legacyLoop struct {
	*world
	arc *testenv.ARC
	url string
}

func newLegacyLoop(t *testing.T) *legacyLoop {
	t.Helper()
	// Legacy pods carry none of the scale-set labels: the selector of
	// arc_test.go's legacy world.
	w := newWorld(t, map[string]string{"REAPER_POD_SELECTOR": "actions-runner", "REAPER_ARC_LEAKS": "false"})
	l := &legacyLoop{world: w, url: w.env["REAPER_GITHUB_API_URL"]}
	l.startARC()
	env.PlayLegacyCluster(t, w.ns, testenv.LegacyCluster{GC: true, Kubelet: true})
	env.LegacyRunnerDeployment(t, w.ns, "acme-runners", "acme", 1)
	return l
}

func (l *legacyLoop) startARC() {
	l.arc = env.StartARCLegacy(l.t, testenv.ARCLegacyOptions{GitHubURL: l.url, Token: l.token, WatchNamespace: l.ns, LogLevel: "info"})
}

// act sweeps until the runner's verdict acts (a marking sweep first when
// marks), checks the action line, and waits for the Runner, its pod and its
// registration to be gone; it logs the time from the act.
func (l *legacyLoop) act(t *testing.T, name string, marks bool) map[string]any {
	t.Helper()
	if marks {
		first := l.sweep()
		first.requireCode(t, 0)
		require.Empty(t, first.msg("action"), "the first sweep only marks: %s", first.Stdout)
		time.Sleep(pastConfirm)
	}
	r := l.sweep()
	r.requireCode(t, 0)
	a := r.actions(t)[name]
	require.NotNil(t, a, "an action on %s: %s", name, r.Stdout)
	assert.Equal(t, "deleted", a["result"], "%v", a)
	_, took := env.WaitLegacyRunner(t, l.ns, name, 2*pastConfirm, "Runner and pod gone", testenv.LegacyRunnerState.Gone)
	_, registered := l.sim.RunnerByName(scope, name)
	assert.False(t, registered, "the registration of %s is gone", name)
	replacement := ""
	for _, n := range env.LegacyRunners(t, l.ns, true) {
		if n != name {
			replacement = n
		}
	}
	t.Logf("%s: verdict %v, action %v: Runner, pod and registration gone %v after the act; replacement Runner %q; DELETEs of the registration (the reaper's and ARC's): %d x 204, %d x 404",
		name, a["verdict"], a["action"], took.Round(time.Millisecond), replacement,
		l.sim.RequestCount(ghsim.EndpointDelete, 204), l.sim.RequestCount(ghsim.EndpointDelete, 404))
	return a
}

func TestARCLegacyManagerLoop(t *testing.T) {
	t.Run("offline zombie", func(t *testing.T) {
		t.Parallel()
		l := newLegacyLoop(t)
		name, st := testenv.ProvisionLegacy(t, env, l.register, l.ns, "")
		require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Status = "offline" }))
		a := l.act(t, name, true)
		assert.Equal(t, "zombie", a["verdict"])
		assert.Equal(t, "delete-registration-then-runner", a["action"])
	})
	t.Run("registration gone (outage)", func(t *testing.T) {
		t.Parallel()
		l := newLegacyLoop(t)
		name, st := testenv.ProvisionLegacy(t, env, l.register, l.ns, "")
		require.True(t, l.sim.RemoveRunner(scope, st.RunnerID))
		// The id ARC recorded on the pod (actions-runner/id) tells a
		// registration that went from one that never came: a zombie
		// after the confirm hold, not an unregistered runner after the
		// registration deadline.
		a := l.act(t, name, true)
		assert.Equal(t, "zombie", a["verdict"], "%v", a)
		assert.Equal(t, "delete-runner", a["action"], "%v", a)
		assert.EqualValues(t, st.RunnerID, a["runner_id"], "%v", a)
		assert.Contains(t, a["evidence"], "runner id known from Kubernetes", "%v", a)
	})
	t.Run("terminal, while ARC was down", func(t *testing.T) {
		t.Parallel()
		l := newLegacyLoop(t)
		name, _ := testenv.ProvisionLegacy(t, env, l.register, l.ns, "")
		l.arc.Stop()
		env.WriteLegacyPodState(t, l.ns, name, testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
		r := l.sweep()
		r.requireCode(t, 0)
		a := r.actions(t)[name]
		require.NotNil(t, a, "%s", r.Stdout)
		assert.Equal(t, "terminal", a["verdict"])
		assert.Equal(t, "deleted", a["result"])
		l.startARC()
		_, took := env.WaitLegacyRunner(t, l.ns, name, 2*pastConfirm, "Runner and pod gone", testenv.LegacyRunnerState.Gone)
		t.Logf("%s: verdict %v, action %v: Runner and pod gone %v after ARC restarted", name, a["verdict"], a["action"], took.Round(time.Millisecond))
	})
	t.Run("busy runner: spared", func(t *testing.T) {
		t.Parallel()
		l := newLegacyLoop(t)
		name, st := testenv.ProvisionLegacy(t, env, l.register, l.ns, "")
		require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) {
			r.Status, r.Busy, r.ListedIdle = "offline", true, true
		}))
		first := l.sweep()
		first.requireCode(t, 0)
		require.Empty(t, first.msg("action"))
		time.Sleep(pastConfirm)
		r := l.sweep()
		r.requireCode(t, 0)
		a := r.actions(t)[name]
		require.NotNil(t, a, "%s", r.Stdout)
		assert.Equal(t, "spared-busy", a["result"])
		now := env.LegacyRunnerOf(t, l.ns, name)
		require.NotNil(t, now.Runner)
		assert.False(t, now.Deleting, "no delete was sent for a runner with a job")
		require.NotNil(t, now.Pod)
		_, registered := l.sim.RunnerByName(scope, name)
		assert.True(t, registered)
	})
}

// register registers a legacy runner on the simulator as the runner
// binary's config.sh would: online, idle, ephemeral.
func (l *legacyLoop) register(name string) {
	l.sim.AddRunner(scope, ghsim.Runner{Name: name, Ephemeral: true})
}
