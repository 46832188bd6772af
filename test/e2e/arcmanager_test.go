package e2e_test

// The reaper beside ARC's real manager (v0.27.6, scale-set mode, built by
// `make arc-manager`), on the shared API server, with the GitHub simulator
// serving both the runners REST API the reaper reads and the Actions
// service ARC calls, from one set of runners. ARC registers each
// EphemeralRunner, makes its JIT Secret and its pod; the test plays the
// kubelet (there is none here). After the reaper acts, ARC's own
// finalizers must finish the job: the EphemeralRunner, its pod, its JIT
// Secret and the registration all gone within two sweeps of the act, with
// ARC v0.27.6 (which takes the service's 404 for a failure and retries for
// ever) and with an ARC that takes 404 as done (ARC PR #4399's behaviour,
// stood in for by the simulator answering 204 for a missing agent).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// arcLoop is one world with ARC's manager watching its namespace.
type arcLoop struct {
	*world
	cfg string
	arc *testenv.ARC
	// done404 is the Actions service's answer to removing a missing
	// agent: 204 (an ARC that takes 404 as done) when true.
	done404 bool
}

func newARCLoop(t *testing.T, done404 bool) *arcLoop {
	t.Helper()
	w := newWorld(t, arcEnv(nil))
	w.sim.SetRemoveMissingAgentAsDone(done404)
	cfg, err := ghsim.ConfigURL(w.env["REAPER_GITHUB_API_URL"], scope)
	require.NoError(t, err)
	env.ARCGitHubTokenSecret(t, w.ns, w.token)
	l := &arcLoop{world: w, cfg: cfg, done404: done404}
	l.startARC()
	return l
}

func (l *arcLoop) startARC() {
	l.arc = env.StartARC(l.t, testenv.ARCOptions{WatchNamespace: l.ns, LogLevel: "info"})
}

// provision creates an EphemeralRunner and waits for ARC to register it
// and make its Secret and pod; then plays the kubelet: the runner runs.
func (l *arcLoop) provision(base string) (string, testenv.ARCRunnerState) {
	l.t.Helper()
	name, st := env.ProvisionARCRunner(l.t, l.ns, base, l.cfg, func(name string) (int64, bool) {
		r, ok := l.sim.RunnerByName(scope, name)
		return r.ID, ok
	})
	env.WritePodState(l.t, l.ns, name, testenv.Running())
	return name, st
}

// registered reports whether GitHub still lists the runner.
func (l *arcLoop) registered(name string) bool {
	_, ok := l.sim.RunnerByName(scope, name)
	return ok
}

// allGone waits until the EphemeralRunner, its pod, its Secret and its
// registration are all gone, and says how long after the act that was.
func (l *arcLoop) allGone(name string, acted time.Time, within time.Duration) time.Duration {
	l.t.Helper()
	env.WaitARCRunner(l.t, l.ns, name, within, "EphemeralRunner, pod and Secret gone", testenv.ARCRunnerState.Gone)
	for l.registered(name) {
		require.Less(l.t, time.Since(acted), within, "the registration of %s is still on GitHub", name)
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(acted)
}

// actOn sweeps until the runner's verdict acts: a marking sweep, then the
// one past confirm-after. It returns the acting sweep and when it ended.
func (l *arcLoop) actOn(name string, marks bool) (run, time.Time) {
	l.t.Helper()
	if marks {
		first := l.sweep()
		first.requireCode(l.t, 0)
		require.Empty(l.t, first.msg("action"), "the first sweep only marks")
		time.Sleep(pastConfirm)
	}
	r := l.sweep()
	return r, time.Now()
}

// The act on each kind of ARC leak ends with nothing left, whichever way
// the Actions service answers the removal of a runner that is gone; a
// runner with a job is never touched.
func TestARCManagerLoop(t *testing.T) {
	for _, done404 := range []bool{false, true} {
		mode := "ARC v0.27.6: 404 retried for ever"
		if done404 {
			mode = "404 as done (ARC PR #4399)"
		}
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			t.Run("offline zombie", func(t *testing.T) {
				l := newARCLoop(t, done404)
				name, st := l.provision("arc-set-zombie")
				require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Status = "offline" }))
				r, acted := l.actOn(name, true)
				l.report(t, name, r, acted, "zombie", "delete-registration-then-ephemeralrunner", st.RunnerID)
			})
			t.Run("registration gone (invalidated by GitHub)", func(t *testing.T) {
				l := newARCLoop(t, done404)
				name, st := l.provision("arc-set-gone")
				require.True(t, l.sim.RemoveRunner(scope, st.RunnerID), "GitHub invalidates the registration")
				r, acted := l.actOn(name, true)
				l.report(t, name, r, acted, "zombie", "delete-ephemeralrunner", st.RunnerID)
			})
			t.Run("terminal, while ARC was down", func(t *testing.T) {
				l := newARCLoop(t, done404)
				name, st := l.provision("arc-set-dead")
				l.arc.Stop()
				env.WritePodState(t, l.ns, name, testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
				r, acted := l.actOn(name, false)
				l.startARC()
				l.report(t, name, r, acted, "terminal", "delete-registration-then-ephemeralrunner", st.RunnerID)
			})
			t.Run("failed EphemeralRunner", func(t *testing.T) {
				l := newARCLoop(t, done404)
				name, st := l.provision("arc-set-failed")
				// ARC marks a runner Failed after its sixth pod failure and
				// deletes the pod; then it waits for a set to clean it up.
				l.arc.Stop()
				env.WriteEphemeralRunnerStatus(t, l.ns, name, testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: st.RunnerID,
					Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"})
				require.NoError(t, env.Client.CoreV1().Pods(l.ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
				l.startARC()
				time.Sleep(arcFailedAfter)
				r, acted := l.actOn(name, true)
				l.report(t, name, r, acted, "arc-failed", "delete-registration-then-ephemeralrunner", st.RunnerID)
			})
			t.Run("scale-down strands ARC's own idle runner", func(t *testing.T) {
				// ARC's EphemeralRunnerSet removes the registration (204)
				// before deleting the runner, whose own controller then
				// asks for it again and meets a 404: v0.27.6 holds the
				// runner, its pod and its Secret for ever.
				l := newARCLoop(t, done404)
				const set = "arc-set-scale"
				env.ARCRunnerSet(t, l.ns, set, l.cfg, 1)
				name, st := env.ProvisionARCSetRunner(t, l.ns, set, 30*time.Second, func(name string) (int64, bool) {
					r, ok := l.sim.RunnerByName(scope, name)
					return r.ID, ok
				})
				env.WritePodState(t, l.ns, name, testenv.Running())
				env.ScaleARCRunnerSet(t, l.ns, set, 0)
				if done404 {
					took := l.allGone(name, time.Now(), 30*time.Second)
					t.Logf("scale-down with 404 as done: ARC finished alone in %v", took.Round(time.Millisecond))
					r := l.sweep()
					r.requireCode(t, 0)
					assert.Empty(t, r.msg("action"))
					return
				}
				stuck, _ := env.WaitARCRunner(t, l.ns, name, 10*time.Second, "deleting", func(s testenv.ARCRunnerState) bool { return s.Deleting })
				require.Contains(t, stuck.Finalizers, fleet.ARCRegistrationFinalizer)
				require.False(t, l.registered(name), "the set removed the registration")
				time.Sleep(pastStuck)
				r, acted := l.actOn(name, true)
				r.requireCode(t, 0)
				a := r.actions(t)[name]
				require.NotNil(t, a, "%s", r.Stdout)
				assert.Equal(t, "arc-stuck-deleting", a["verdict"])
				assert.Equal(t, "release-registration", a["action"])
				assert.Equal(t, "deleted", a["result"])
				assert.EqualValues(t, st.RunnerID, a["runner_id"])
				took := l.allGone(name, acted, 2*pastConfirm)
				s := r.summary(t)
				t.Logf("scale-down stranded by ARC v0.27.6: act to all gone %v; acting sweep %v GitHub and %v Kubernetes requests; ARC's removals: %d x 204, %d x 404",
					took.Round(time.Millisecond), s["github_requests"], s["kube_requests"],
					l.sim.RequestCount(ghsim.EndpointAgentDelete, 204), l.sim.RequestCount(ghsim.EndpointAgentDelete, 404))
			})
			t.Run("busy runner: spared until its job ends", func(t *testing.T) {
				l := newARCLoop(t, done404)
				name, st := l.provision("arc-set-busy")
				// A job landed while GitHub still lists the runner offline
				// and idle: the reaper's verdict is zombie, and its
				// registration delete meets the job (422).
				require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) {
					r.Status, r.Busy, r.ListedIdle = "offline", true, true
				}))
				// ARC's own removals so far (its race, when provisioning
				// had to try again) are not the reaper's doing.
				removalsBefore := l.sim.RequestCount(ghsim.EndpointAgentDelete, 0)
				first := l.sweep()
				first.requireCode(t, 0)
				require.Empty(t, first.msg("action"), "the first sweep only marks: %s", first.Stdout)
				time.Sleep(pastConfirm)
				jobStart := time.Now()
				var spared []run
				for i := 0; i < 2; i++ {
					r := l.sweep()
					r.requireCode(t, 0)
					a := r.actions(t)[name]
					require.NotNil(t, a, "the zombie verdict acts: %s", r.Stdout)
					assert.Equal(t, "spared-busy", a["result"], "GitHub's 422 spares it")
					assert.Equal(t, "busy", a["registration_result"])
					spared = append(spared, r)
					now := env.ARCRunner(t, l.ns, name)
					require.NotNil(t, now.Runner, "the EphemeralRunner is left alone")
					assert.False(t, now.Deleting, "no delete was sent for a runner with a job")
					require.NotNil(t, now.Pod)
					assert.True(t, l.registered(name))
					// A 422 clears the mark: the verdict starts again.
					again := l.sweep()
					again.requireCode(t, 0)
					require.Empty(t, again.msg("action"), "marked again, not acted on: %s", again.Stdout)
					time.Sleep(pastConfirm)
				}
				protected := time.Since(jobStart)
				assert.Equal(t, removalsBefore, l.sim.RequestCount(ghsim.EndpointAgentDelete, 0), "ARC was never asked to remove it: nothing was deleted")
				// The job ends: the runner is idle and offline again.
				require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Busy, r.ListedIdle = false, false }))
				ended := time.Now()
				r, acted := l.actOn(name, false)
				t.Logf("busy runner %s: protected for %v across %d sweeps that each met a 422; cleaned %v after its job ended",
					name, protected.Round(time.Millisecond), len(spared), time.Since(ended).Round(time.Millisecond))
				l.report(t, name, r, acted, "zombie", "delete-registration-then-ephemeralrunner", st.RunnerID)
			})
		})
	}
}

// report checks the acting sweep's line for the runner, waits for all to
// be gone within two sweeps' time of the act, and logs the figures the
// issue asks for: the time from the act to all gone, and the requests.
func (l *arcLoop) report(t *testing.T, name string, r run, acted time.Time, verdict, action string, runnerID int64) {
	t.Helper()
	r.requireCode(t, 0)
	a := r.actions(t)[name]
	require.NotNil(t, a, "an action on %s: %s", name, r.Stdout)
	assert.Equal(t, verdict, a["verdict"])
	assert.Equal(t, action, a["action"])
	assert.Equal(t, "deleted", a["result"], "%v", a)
	assert.EqualValues(t, runnerID, a["runner_id"], "the runner id Kubernetes knows is on the line")
	// Two sweeps' time: the confirm-after hold, twice.
	took := l.allGone(name, acted, 2*pastConfirm)
	s := r.summary(t)
	t.Logf("%s (%s): act to all gone (EphemeralRunner, pod, JIT Secret, registration) %v; acting sweep %v GitHub and %v Kubernetes requests; finalizer_result %v; ARC's removals: %d x 204, %d x 404",
		verdict, map[bool]string{false: "404 retried", true: "404 as done"}[l.done404], took.Round(time.Millisecond),
		s["github_requests"], s["kube_requests"], a["finalizer_result"],
		l.sim.RequestCount(ghsim.EndpointAgentDelete, 204), l.sim.RequestCount(ghsim.EndpointAgentDelete, 404))
	after := l.sweep()
	after.requireCode(t, 0)
	assert.Empty(t, after.msg("action"), "nothing left to act on: %s", fmt.Sprint(after.msg("action")))
}

// ARC's manager replaces a never-started runner it owned: an
// EphemeralRunner of a set whose pod cannot pull its image (ARC v0.27.6
// never fails it, and the set's slot stays taken) is never-started past
// REAPER_START_DEADLINE; the reaper removes its registration and deletes
// the EphemeralRunner, ARC's finalizers finish the rest, and the set makes
// a new runner in its place.
func TestARCManagerReplacesANeverStartedRunner(t *testing.T) {
	t.Parallel()
	w := newWorld(t, arcEnv(map[string]string{"REAPER_START_DEADLINE": startDeadline.String()}))
	cfg, err := ghsim.ConfigURL(w.env["REAPER_GITHUB_API_URL"], scope)
	require.NoError(t, err)
	env.ARCGitHubTokenSecret(t, w.ns, w.token)
	l := &arcLoop{world: w, cfg: cfg}
	l.startARC()

	const set = "arc-set-pull"
	env.ARCRunnerSet(t, l.ns, set, l.cfg, 1)
	listed := func(name string) (int64, bool) {
		r, ok := l.sim.RunnerByName(scope, name)
		return r.ID, ok
	}
	name, st := env.ProvisionARCSetRunner(t, l.ns, set, 30*time.Second, listed)
	// The kubelet's word: the runner's image cannot be pulled. Its JIT
	// registration never connects.
	env.WritePodState(t, l.ns, name, testenv.PodState{Phase: corev1.PodPending, Waiting: "ImagePullBackOff"})
	require.True(t, l.sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Status = "offline" }))
	time.Sleep(pastDeadline)

	r, acted := l.actOn(name, true)
	l.report(t, name, r, acted, "never-started", "delete-registration-then-ephemeralrunner", st.RunnerID)
	assert.Equal(t, "ImagePullBackOff", r.actions(t)[name]["wait_reason"])

	next, nst := env.ProvisionARCSetRunner(t, l.ns, set, 30*time.Second, listed)
	assert.NotEqual(t, name, next, "the set made a new runner")
	assert.NotEqual(t, st.RunnerID, nst.RunnerID, "registered afresh")
	t.Logf("never-started %s replaced by %s, registered as %d, %v after the act", name, next, nst.RunnerID, time.Since(acted).Round(time.Millisecond))
}
