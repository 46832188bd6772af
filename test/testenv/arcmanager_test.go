package testenv

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

const arcTestToken = "ghp_arcmanagertest"

// TestARCManagerEphemeralRunner runs ARC's real manager (v0.27.6, scale-set
// mode) against the test control plane and the GitHub simulator, and
// proves the loop the reaper lives beside: ARC registers a runner, makes
// its JIT Secret and pod; deleting the EphemeralRunner removes the
// registration, then the pod and Secret, then both finalizers; with the
// registration already gone ARC v0.27.6 keeps retrying the 404 and the
// EphemeralRunner stays deleting, held by both finalizers, until the
// service answers 204 (an ARC with PR #4399); a busy runner is waited for;
// and a scale-down of an EphemeralRunnerSet strands its idle runner the same
// way, because the set removes the registration before the runner's own
// controller tries to.
func TestARCManagerEphemeralRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane and ARC's manager; `make test` runs it")
	}
	sim := ghsim.New(ghsim.Options{Token: arcTestToken})
	base, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	const scope = "org:acme"
	sim.AddScope(scope)
	cfg, err := ghsim.ConfigURL(base, scope)
	if err != nil {
		t.Fatal(err)
	}

	env, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ns := env.Namespace(t, "arc")
	env.ARCGitHubTokenSecret(t, ns, arcTestToken)
	arc := env.StartARC(t, ARCOptions{})
	t.Logf("ARC manager %s ready in %v", ARCManagerVersion, arc.Ready.Sub(arc.Started).Round(time.Millisecond))

	// provision creates an EphemeralRunner, waits for ARC to register it
	// and make its Secret and pod, then plays the kubelet: the runner
	// container runs, and ARC records the phase.
	provision := func(t *testing.T, base string) (string, ARCRunnerState) {
		t.Helper()
		began := time.Now()
		name, st := env.ProvisionARCRunner(t, ns, base, cfg, func(name string) (int64, bool) {
			r, ok := sim.RunnerByName(scope, name)
			return r.ID, ok
		})
		t.Logf("%s: registered as runner %d, Secret and pod made in %v", name, st.RunnerID, time.Since(began).Round(time.Millisecond))
		for _, f := range ARCFinalizers() {
			if !slices.Contains(st.Finalizers, f) {
				t.Errorf("%s: finalizer %s missing: %v", name, f, st.Finalizers)
			}
		}
		if r, ok := sim.RunnerByName(scope, name); !ok || r.ID != st.RunnerID {
			t.Errorf("%s: GitHub's runner is %+v (found %v), EphemeralRunner says id %d", name, r, ok, st.RunnerID)
		}
		if _, ok := st.Secret.Data["jitToken"]; !ok {
			t.Errorf("%s: JIT Secret has no jitToken key: %v", name, st.Secret.Data)
		} else if len(st.Secret.Data["jitToken"]) == 0 {
			// v0.27.6 carries the JIT config from generatejitconfig to the
			// Secret through status.runnerJITConfig, which the newer CRDs
			// in testdata/arc-crds no longer have: the API server prunes
			// it, and the Secret gets an empty jitToken (a real runner pod
			// would not start). Nothing here runs the runner, so this is
			// recorded, not failed.
			t.Logf("%s: jitToken is empty: the vendored CRD prunes v0.27.6's status.runnerJITConfig", name)
		}
		if st.Pod.Spec.Containers[0].Name != "runner" {
			t.Fatalf("%s: the pod's first container is %q, not the runner", name, st.Pod.Spec.Containers[0].Name)
		}
		env.WritePodState(t, ns, name, Running())
		st, _ = env.WaitARCRunner(t, ns, name, 30*time.Second, "phase Running", func(s ARCRunnerState) bool {
			return ARCRunnerPhase(s) == string(corev1.PodRunning)
		})
		return name, st
	}
	// held says the EphemeralRunner is deleting, both finalizers on, pod
	// and Secret still there.
	held := func(t *testing.T, name string) {
		t.Helper()
		st := env.ARCRunner(t, ns, name)
		if !st.Deleting || len(st.Finalizers) != 2 || st.Pod == nil || st.Secret == nil {
			t.Fatalf("%s: want deleting with both finalizers, pod and Secret; got deleting %v, finalizers %v, pod %v, secret %v",
				name, st.Deleting, st.Finalizers, st.Pod != nil, st.Secret != nil)
		}
	}

	t.Run("registered runner: deleted everywhere", func(t *testing.T) {
		name, st := provision(t, "r-live")
		before := sim.RequestCount(ghsim.EndpointAgentDelete, 204)
		env.DeleteARC(t, EphemeralRunners, ns, name)
		_, took := env.WaitARCRunner(t, ns, name, 30*time.Second, "gone, with pod and Secret", ARCRunnerState.Gone)
		t.Logf("%s: registration removed, pod, Secret and both finalizers gone in %v", name, took.Round(time.Millisecond))
		if got := sim.RequestCount(ghsim.EndpointAgentDelete, 204) - before; got != 1 {
			t.Errorf("agent DELETE answered 204 %d times, want 1", got)
		}
		if _, ok := sim.RunnerByName(scope, name); ok {
			t.Errorf("runner %d still registered", st.RunnerID)
		}
	})

	t.Run("registration already gone: v0.27.6 retries the 404, held until 204", func(t *testing.T) {
		name, st := provision(t, "r-gone")
		if !sim.RemoveRunner(scope, st.RunnerID) { // GitHub's own clean-up
			t.Fatalf("runner %d was not registered", st.RunnerID)
		}
		before := sim.RequestCount(ghsim.EndpointAgentDelete, 404)
		env.DeleteARC(t, EphemeralRunners, ns, name)
		const watch = 6 * time.Second
		time.Sleep(watch)
		held(t, name)
		n404 := sim.RequestCount(ghsim.EndpointAgentDelete, 404) - before
		if n404 < 2 {
			t.Errorf("ARC tried the DELETE %d times in %v, want retries", n404, watch)
		}
		t.Logf("r-gone: still deleting with both finalizers, pod and Secret after %v; %d DELETEs answered 404", watch, n404)

		sim.SetRemoveMissingAgentAsDone(true)
		defer sim.SetRemoveMissingAgentAsDone(false)
		_, took := env.WaitARCRunner(t, ns, name, 60*time.Second, "gone once the service answers 204", ARCRunnerState.Gone)
		t.Logf("r-gone: with RemoveMissingAgentAsDone, gone %v after the switch (ARC's next retry, by its backoff); %d DELETEs answered 404 in all",
			took.Round(time.Millisecond), sim.RequestCount(ghsim.EndpointAgentDelete, 404)-before)
	})

	t.Run("busy runner: waited for", func(t *testing.T) {
		name, st := provision(t, "r-busy")
		sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Busy, r.Status = true, "online" })
		before := sim.RequestCount(ghsim.EndpointAgentDelete, 400)
		env.DeleteARC(t, EphemeralRunners, ns, name)
		deadline := time.Now().Add(10 * time.Second)
		for sim.RequestCount(ghsim.EndpointAgentDelete, 400) == before {
			if time.Now().After(deadline) {
				t.Fatal("ARC never tried to remove the busy runner")
			}
			time.Sleep(50 * time.Millisecond)
		}
		refused := time.Now()
		time.Sleep(3 * time.Second)
		held(t, name)
		if _, ok := sim.RunnerByName(scope, name); !ok {
			t.Fatal("the busy runner's registration was removed")
		}
		n400 := sim.RequestCount(ghsim.EndpointAgentDelete, 400) - before
		t.Logf("r-busy: DELETE answered 400 JobStillRunning %d time(s); still deleting after 3s", n400)

		sim.SetRunner(scope, st.RunnerID, func(r *ghsim.Runner) { r.Busy = false })
		_, took := env.WaitARCRunner(t, ns, name, 60*time.Second, "gone once the job ended", ARCRunnerState.Gone)
		t.Logf("r-busy: job ended %v after the refusal; gone %v after that (ARC requeues a busy runner after 30s)",
			time.Since(refused).Round(time.Millisecond)-took.Round(time.Millisecond), took.Round(time.Millisecond))
		if _, ok := sim.RunnerByName(scope, name); ok {
			t.Error("registration still there")
		}
	})

	t.Run("runner set: scaled up and down", func(t *testing.T) {
		env.ARCRunnerSet(t, ns, "set", cfg, 1)
		// Settled: ARC's status and GitHub's list agree on the runner id.
		// Under load (CI on a shared machine) the first id ARC wrote was
		// seen not to be the one GitHub then listed under the name.
		began := time.Now()
		name, st := env.ProvisionARCSetRunner(t, ns, "set", 30*time.Second, func(name string) (int64, bool) {
			r, ok := sim.RunnerByName(scope, name)
			return r.ID, ok
		})
		took := time.Since(began)
		t.Logf("set: EphemeralRunner %s registered as runner %d, Secret and pod made %v after the set was made", name, st.RunnerID, took.Round(time.Millisecond))
		env.WritePodState(t, ns, name, Running())
		env.WaitARCRunner(t, ns, name, 30*time.Second, "phase Running", func(s ARCRunnerState) bool {
			return ARCRunnerPhase(s) == string(corev1.PodRunning)
		})
		// Scale-down: the EphemeralRunnerSet controller removes the idle
		// runner's registration (204), then deletes the EphemeralRunner;
		// the EphemeralRunner controller then removes the registration
		// again, meets 404, and v0.27.6 holds it deleting, retrying.
		before := sim.RequestCount(ghsim.EndpointAgentDelete, 404)
		env.ScaleARCRunnerSet(t, ns, "set", 0)
		_, took = env.WaitARCRunner(t, ns, name, 30*time.Second, "deleting after scale-down", func(s ARCRunnerState) bool { return s.Deleting })
		t.Logf("set: scaled to 0, %s deleting in %v", name, took.Round(time.Millisecond))
		if _, ok := sim.RunnerByName(scope, name); ok {
			t.Error("registration still there after scale-down")
		}
		const watch = 4 * time.Second
		time.Sleep(watch)
		held(t, name)
		n404 := sim.RequestCount(ghsim.EndpointAgentDelete, 404) - before
		if n404 < 1 {
			t.Errorf("want the EphemeralRunner controller's second DELETE to meet 404; got %d", n404)
		}
		t.Logf("set: %s still deleting with both finalizers, pod and Secret %v after scale-down; %d DELETEs answered 404", name, watch, n404)
		sim.SetRemoveMissingAgentAsDone(true)
		defer sim.SetRemoveMissingAgentAsDone(false)
		_, took = env.WaitARCRunner(t, ns, name, 60*time.Second, "gone once the service answers 204", ARCRunnerState.Gone)
		t.Logf("set: with RemoveMissingAgentAsDone, %s gone %v after the switch", name, took.Round(time.Millisecond))
	})

	if exited, err := arc.Exited(); exited {
		t.Errorf("ARC's manager exited during the test: %v", err)
	}
}
