package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// TestARCLegacyManager runs ARC v0.27.6's manager in legacy mode against
// the test control plane and the GitHub simulator: a RunnerDeployment of
// one makes a RunnerReplicaSet, a Runner (with ARC's finalizer), a
// registration token and the runner pod; the simulator registers the
// runner as the runner binary would, and the runner pod controller records
// its id. Then the reaper's act on it, done by hand: the registration
// deleted, then the Runner, held to its UID. ARC drops the Runner's
// finalizer; the pod (deleted by the stand-in garbage collector) is
// finished by the runner pod controller, and the replica set makes a
// replacement.
func TestARCLegacyManager(t *testing.T) {
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

	env, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ns := env.Namespace(t, "arclegacy")
	arc := env.StartARCLegacy(t, ARCLegacyOptions{GitHubURL: base, Token: arcTestToken, WatchNamespace: ns})
	t.Logf("ARC manager %s (legacy mode) ready in %v", ARCManagerVersion, arc.Ready.Sub(arc.Started).Round(time.Millisecond))
	env.PlayLegacyCluster(t, ns, LegacyCluster{GC: true, Kubelet: true})

	env.LegacyRunnerDeployment(t, ns, "acme-runners", "acme", 1)
	name, st := ProvisionLegacy(t, env, func(n string) { sim.AddRunner(scope, ghsim.Runner{Name: n, Ephemeral: true}) }, ns, "")
	if sim.RequestCount(ghsim.EndpointRegistrationToken, 201) == 0 {
		t.Errorf("ARC asked for no registration token")
	}
	rss, err := env.Dynamic.Resource(LegacyRunnerReplicaSets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(rss.Items) != 1 {
		t.Fatalf("want the one RunnerReplicaSet of the deployment: %v", err)
	}
	if ref := metav1.GetControllerOf(st.Runner); ref == nil || ref.Kind != "RunnerReplicaSet" || ref.Name != rss.Items[0].GetName() {
		t.Errorf("the Runner's controller is %v, want RunnerReplicaSet %s", ref, rss.Items[0].GetName())
	}
	if ref := metav1.GetControllerOf(st.Pod); ref == nil || ref.Kind != "Runner" || ref.UID != st.Runner.GetUID() {
		t.Errorf("the pod's controller is %v, want the Runner", ref)
	}
	t.Logf("%s: provisioned, runner id %d", name, st.RunnerID)

	// The reaper's act: the registration, then the Runner held to its UID.
	acted := time.Now()
	if !sim.RemoveRunner(scope, st.RunnerID) {
		t.Fatal("no registration to remove")
	}
	uid := st.Runner.GetUID()
	bg := metav1.DeletePropagationBackground
	if err := env.Dynamic.Resource(LegacyRunners).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	_, took := env.WaitLegacyRunner(t, ns, name, 30*time.Second, "Runner and pod gone", LegacyRunnerState.Gone)
	t.Logf("%s: Runner and pod gone %v after the act", name, took.Round(time.Millisecond))
	// The replica set makes a replacement at once. Its registration is not
	// seen here: ARC's list of runners is cached for a minute.
	replacement := waitNewLegacyRunner(t, env, ns, name)
	env.WaitLegacyRunner(t, ns, replacement, 30*time.Second, "finalizer and pod", LegacyProvisioned)
	t.Logf("replacement Runner %s and its pod %v after the act", replacement, time.Since(acted).Round(time.Millisecond))
	t.Logf("ARC's GitHub requests: %d registration tokens, %d lists, %d deletes (%d x 404)",
		sim.RequestCount(ghsim.EndpointRegistrationToken, 0), sim.RequestCount(ghsim.EndpointList, 0),
		sim.RequestCount(ghsim.EndpointDelete, 0), sim.RequestCount(ghsim.EndpointDelete, 404))
	for _, l := range strings.Split(arc.Log(), "\n") {
		if strings.Contains(l, "\tERROR\t") || strings.Contains(l, "nregist") || strings.Contains(l, "inalizer") {
			t.Log(l)
		}
	}
	if strings.Contains(arc.Log(), "panic") {
		t.Errorf("ARC's log has a panic")
	}
}
