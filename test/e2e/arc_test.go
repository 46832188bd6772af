package e2e_test

// ARC-aware reaping, end to end: the compiled binary against the real API
// server with ARC's CRDs installed as they are, and the GitHub simulator.
// EphemeralRunners, legacy Runners and their pods are created the way ARC's
// controllers leave them: ARC's names, labels and finalizers, the pod
// controlled by its runner object, status written through the status
// subresource. Each incident is driven through real sweeps of separate
// processes that share nothing but the ledger ConfigMap.
//
// There is no ARC controller and no garbage collector in the test control
// plane. So:
//   - an ARC object the reaper deletes keeps ARC's finalizers and stays, with
//     a deletion timestamp: that timestamp is the proof the delete was
//     accepted (ARC's controller would then deregister the runner, remove its
//     pod and drop the finalizers);
//   - deleting an EphemeralRunner or Runner does not remove its pod: the pod
//     still standing is the proof the reaper deleted the owner, not the pod.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	// The ARC holds every ARC world runs with.
	arcFailedAfter        = 2 * time.Second
	arcPodlessAfter       = 2 * time.Second
	arcStuckDeletingAfter = 1 * time.Second
	// pastStuck is slept after deleting an EphemeralRunner that must be
	// past the stuck-deleting age at the first sweep; deletionTimestamp
	// has whole-second precision, truncated.
	pastStuck = arcStuckDeletingAfter + 200*time.Millisecond
)

// arcEnv is the environment of every ARC world.
func arcEnv(extra map[string]string) map[string]string {
	e := map[string]string{
		"REAPER_ARC_LEAKS":                "true",
		"REAPER_ARC_FAILED_AFTER":         arcFailedAfter.String(),
		"REAPER_ARC_PODLESS_AFTER":        arcPodlessAfter.String(),
		"REAPER_ARC_STUCK_DELETING_AFTER": arcStuckDeletingAfter.String(),
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// erName is a name of ARC's form: scale set, EphemeralRunnerSet suffix,
// "runner", a five-character suffix. It is also the pod's name and the
// runner's name on GitHub.
func erName(suffix string) string { return testenv.ScaleSet + "-x7k2p-runner-" + suffix }

// legacyPodLabels are the labels of a legacy Runner's pod: none of ARC's
// scale-set labels; a deployment selects them with a selector of its own.
var legacyPodLabels = map[string]string{"actions-runner": "", "runner-template-hash": "6d5f8c7b9"}

// legacyRunner creates a legacy summerwind Runner for the org, with the
// legacy controller's finalizer, and its pod in state st, as the legacy
// controller would.
func (w *world) legacyRunner(name string, st testenv.PodState) *unstructured.Unstructured {
	w.t.Helper()
	r := env.LegacyRunner(w.t, w.ns, testenv.LegacyRunner{Name: name, Organization: "acme",
		Finalizers: []string{testenv.LegacyRunnerFinalizer}})
	env.RunnerPod(w.t, w.ns, testenv.RunnerPod{Owner: testenv.ControllerRef(r), Labels: legacyPodLabels, PodState: st,
		Env: testenv.LegacyScopeEnv("acme", "", "")})
	return r
}

// arcRunner creates an EphemeralRunner as ARC's controllers leave it (with
// their finalizers and, when not nil, the status) and, when st is not nil,
// its pod, labelled as ARC labels a scale set's runner pods.
func (w *world) arcRunner(name string, status *testenv.EphemeralRunnerStatus, st *testenv.PodState) (*unstructured.Unstructured, *corev1.Pod) {
	w.t.Helper()
	// Registered with the GitHub the reaper lists, as ARC's own are.
	cfg, err := ghsim.ConfigURL(w.env["REAPER_GITHUB_API_URL"], scope)
	require.NoError(w.t, err)
	er := env.EphemeralRunner(w.t, w.ns, testenv.EphemeralRunner{Name: name, ConfigURL: cfg, Finalizers: testenv.ARCFinalizers(), Status: status})
	if st == nil {
		return er, nil
	}
	return er, env.RunnerPod(w.t, w.ns, testenv.RunnerPod{Owner: testenv.ControllerRef(er), Org: "acme", ScaleSet: testenv.ScaleSet, PodState: *st})
}

// arcObjects is the state of every ARC object in the world, by
// "ephemeralrunners/NAME" or "runners/NAME".
func (w *world) arcObjects() map[string]string {
	w.t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{testenv.EphemeralRunners, testenv.LegacyRunners} {
		l, err := env.Dynamic.Resource(gvr).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(w.t, err)
		for _, u := range l.Items {
			out[gvr.Resource+"/"+u.GetName()] = env.ARCState(w.t, gvr, w.ns, u.GetName())
		}
	}
	return out
}

// podNames lists the pods in the world.
func (w *world) podNames() []string {
	w.t.Helper()
	l, err := env.Client.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	var out []string
	for _, p := range l.Items {
		out = append(out, p.Name)
	}
	return out
}

// byObject is the action lines keyed by the object they name.
func (r run) byObject(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, l := range r.msg("action") {
		obj, _ := l["object"].(string)
		require.NotContains(t, out, obj, "one action line per object")
		out[obj] = l
	}
	return out
}

// arcNeighbours plants what every ARC sweep must leave alone: a healthy
// EphemeralRunner with its running pod and online registration, a busy one
// (its registration offline but running a job: rule 2), and a bare runner
// pod of no ARC object, online on GitHub.
func arcNeighbours(w *world) (ers, pods []string, regs []ghsim.Runner) {
	healthy := erName("h3a1t")
	reg := w.runner(healthy, "online", false)
	regs = append(regs, reg)
	w.arcRunner(healthy, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}, &testenv.PodState{Running: true})

	busy := erName("b5sy0")
	reg = w.runner(busy, "offline", true)
	regs = append(regs, reg)
	w.arcRunner(busy, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}, &testenv.PodState{Running: true})

	regs = append(regs, w.runner("acme-bare", "online", false))
	w.pod("acme-bare", testenv.Running())
	return []string{"ephemeralrunners/" + healthy, "ephemeralrunners/" + busy}, []string{healthy, busy, "acme-bare"}, regs
}

// arcIncident is what one ARC test plants.
type arcIncident struct {
	// object is the action line's "object": the Kubernetes object acted on.
	object string
	// res and name are the ARC object that must end up in state after.
	res   string // "ephemeralrunners" or "runners"
	name  string
	after string // "deleting" (delete accepted), "gone" or "live"
	// pod is the incident's pod, if it has one; it must still stand (no
	// garbage collector here, and the reaper never deletes an ARC-owned
	// pod itself).
	pod string
	// reg is the registration that must be deleted first; ID 0 when none.
	reg ghsim.Runner
	// keepReg is a registration that must survive (the incident has one
	// but the protocol does not delete it).
	keepReg ghsim.Runner
}

// TestARCIncidents drives each ARC incident through real sweeps of the
// binary: a verdict resting on GitHub's word or on an ARC age is only
// marked by the first sweep and acts on the first sweep past its hold; a
// terminal pod acts at once. Every check is on what is left in the cluster
// and on GitHub: the incident's ARC object deleted (or, for a stuck one,
// reported or its finalizers removed), its registration deleted first where
// it had one, its pod left to ARC, and nothing else touched.
func TestARCIncidents(t *testing.T) {
	t.Parallel()
	ns := func(w *world) string { return w.ns }
	cases := []struct {
		name  string
		extra map[string]string
		plant func(w *world) arcIncident
		// immediate: acts in the first sweep (terminal).
		immediate bool
		verdict   string
		action    string
		result    string
		// check inspects the acting line further.
		check func(t *testing.T, w *world, inc arcIncident, line map[string]any)
	}{{
		name: "zombie pod of an EphemeralRunner, registration offline",
		plant: func(w *world) arcIncident {
			name := erName("z0mb1")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}, &testenv.PodState{Running: true})
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", pod: name, reg: reg}
		},
		verdict: "zombie", action: "delete-registration-then-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, false, l["registration_gone"], "offline, not gone")
			assert.Equal(t, "deleted", l["registration_result"])
			assert.Equal(t, inc.name, l["pod"])
		},
	}, {
		name: "zombie pod of an EphemeralRunner whose known registration is gone from GitHub",
		plant: func(w *world) arcIncident {
			name := erName("g0n3r")
			// status.runnerId says it registered as 4242; GitHub lists no
			// such runner.
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 4242}, &testenv.PodState{Running: true})
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", pod: name}
		},
		verdict: "zombie", action: "delete-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, true, l["registration_gone"], "was registered (runner id from the EphemeralRunner), now gone: not unregistered")
			assert.Contains(t, l["evidence"], "4242")
			// There was no registration to delete first, so the absence was
			// re-checked by exact name just before acting.
			rechecked := false
			for _, r := range w.requests(ghsim.EndpointList) {
				if strings.Contains(r.Query, "name="+inc.name) {
					rechecked = true
				}
			}
			assert.True(t, rechecked, "a by-name look-up of %s before its EphemeralRunner went", inc.name)
		},
	}, {
		name: "unregistered: pod of an EphemeralRunner with no runnerId past the deadline",
		plant: func(w *world) arcIncident {
			name := erName("n0reg")
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running"}, &testenv.PodState{Running: true})
			time.Sleep(pastDeadline)
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", pod: name}
		},
		verdict: "unregistered", action: "delete-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.NotContains(t, l, "registration_gone")
		},
	}, {
		name: "terminal pod of an EphemeralRunner",
		plant: func(w *world) arcIncident {
			name := erName("d34d1")
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running"},
				&testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", pod: name}
		},
		immediate: true,
		verdict:   "terminal", action: "delete-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, "oom-host", l["exit_class"])
			assert.EqualValues(t, 137, l["exit_code"])
			assert.Equal(t, "OOMKilled", l["reason"])
		},
	}, {
		name: "zombie pod of a legacy summerwind Runner",
		// The legacy controller's pods do not carry ARC's scale-set labels:
		// the deployment selects them with a selector of its own, and with
		// the one scope configured they belong to it. This world has no
		// EphemeralRunners (see the report: under a selector that misses
		// scale-set pods, every EphemeralRunner would look podless, which is
		// why the configuration refuses ARC leaks with such a selector; the
		// owner-aware delete needs no EphemeralRunner list).
		extra: map[string]string{"REAPER_POD_SELECTOR": "actions-runner", "REAPER_ARC_LEAKS": "false"},
		plant: func(w *world) arcIncident {
			name := "acme-runnerdeploy-q8w2n-zx4vb"
			reg := w.runner(name, "offline", false)
			w.legacyRunner(name, testenv.Running())
			return arcIncident{object: "Runner " + ns(w) + "/" + name, res: "runners", name: name, after: "deleting", pod: name, reg: reg}
		},
		verdict: "zombie", action: "delete-registration-then-runner", result: "deleted",
	}, {
		name: "arc-failed: an EphemeralRunner Failed with no pod, its registration offline",
		plant: func(w *world) arcIncident {
			name := erName("f41l3")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: reg.ID, Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"}, nil)
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", reg: reg}
		},
		verdict: "arc-failed", action: "delete-registration-then-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, "Failed", l["phase"])
			assert.Equal(t, inc.name, l["ephemeralrunner"])
			assert.Equal(t, "", l["pod"])
			assert.Contains(t, l["evidence"], "TooManyPodFailures")
			assert.Equal(t, "deleted", l["registration_result"])
		},
	}, {
		name: "arc-podless: an EphemeralRunner with no pod, not being deleted",
		plant: func(w *world) arcIncident {
			name := erName("p0d1s")
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Pending"}, nil)
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting"}
		},
		verdict: "arc-podless", action: "delete-ephemeralrunner", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, "Pending", l["phase"])
			assert.Equal(t, inc.name, l["ephemeralrunner"])
		},
	}, {
		name: "arc-stuck-deleting: reported only",
		plant: func(w *world) arcIncident {
			name := erName("stuck")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}, nil)
			env.DeleteARC(t, testenv.EphemeralRunners, w.ns, name)
			time.Sleep(pastStuck)
			// Deleting already: no registration is deleted first, and
			// without the option nothing is changed at all.
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", keepReg: reg}
		},
		verdict: "arc-stuck-deleting", action: "report", result: "reported",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Contains(t, l["evidence"], testenv.EphemeralRunnerFinalizer)
			assert.NotContains(t, l, "object_result", "nothing was sent")
		},
	}, {
		name:  "arc-stuck-deleting: finalizers removed with REAPER_ARC_REMOVE_FINALIZERS",
		extra: map[string]string{"REAPER_ARC_REMOVE_FINALIZERS": "true"},
		plant: func(w *world) arcIncident {
			name := erName("stuk2")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}, nil)
			env.DeleteARC(t, testenv.EphemeralRunners, w.ns, name)
			time.Sleep(pastStuck)
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "gone", keepReg: reg}
		},
		verdict: "arc-stuck-deleting", action: "remove-finalizers", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, "deleted", l["object_result"], "the finalizer patch was accepted")
			assert.NotContains(t, l, "pod_result", "the object acted on is an EphemeralRunner, not a pod")
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, arcEnv(tc.extra))
			var nERs, nPods []string
			var nRegs []ghsim.Runner
			if tc.extra["REAPER_POD_SELECTOR"] == "" {
				nERs, nPods, nRegs = arcNeighbours(w)
			} else {
				// The legacy world's neighbours: a healthy legacy Runner
				// and its pod, online.
				name := "acme-runnerdeploy-q8w2n-h3a1t"
				nRegs = append(nRegs, w.runner(name, "online", false))
				w.legacyRunner(name, testenv.Running())
				nERs, nPods = []string{"runners/" + name}, []string{name}
			}
			inc := tc.plant(w)
			markKey := markKeyOf(t, w, inc)
			pods := w.podNames()
			objects := w.arcObjects()

			first := w.sweep()
			first.requireCode(t, 0)
			if !tc.immediate {
				assert.Empty(t, first.msg("action"), "a %s is only marked by the first sweep", tc.verdict)
				assert.Equal(t, objects, w.arcObjects(), "nothing changed by the marking sweep")
				assert.ElementsMatch(t, pods, w.podNames())
				time.Sleep(pastConfirm)
			}
			acting := first
			if !tc.immediate {
				acting = w.sweep()
				acting.requireCode(t, 0)
			}

			lines := acting.byObject(t)
			require.Len(t, lines, 1, "one action, on the incident; stdout:\n%s", acting.Stdout)
			l, ok := lines[inc.object]
			require.True(t, ok, "the action line names the object acted on, %q; got %v", inc.object, lines)
			assert.Equal(t, tc.verdict, l["verdict"])
			assert.Equal(t, tc.action, l["action"])
			assert.Equal(t, tc.result, l["result"], "line: %v", l)
			assert.Equal(t, false, l["dry_run"])
			assert.Equal(t, scope, l["scope"])
			assert.Equal(t, w.ns, l["namespace"])
			if tc.check != nil {
				tc.check(t, w, inc, l)
			}

			// The incident's object, and nothing else.
			want := objects
			gvr := testenv.EphemeralRunners
			if inc.res == "runners" {
				gvr = testenv.LegacyRunners
			}
			if inc.after == "gone" {
				delete(want, inc.res+"/"+inc.name)
			} else {
				want[inc.res+"/"+inc.name] = inc.after
			}
			assert.Equal(t, want, w.arcObjects(), "only the incident's object changed")
			assert.Equal(t, inc.after, env.ARCState(t, gvr, w.ns, inc.name))
			for _, n := range nERs {
				assert.Equal(t, "live", objects[n], "neighbour %s", n)
			}
			// No pod is deleted by the reaper: an ARC-owned pod goes with
			// its owner (ARC's controller and the garbage collector, neither
			// of which runs here), and the neighbours stay.
			assert.ElementsMatch(t, pods, w.podNames(), "no pod deleted")
			if inc.pod != "" {
				assert.True(t, w.podExists(inc.pod), "the incident's pod is left to ARC, not deleted by the reaper")
			}
			for _, p := range nPods {
				assert.True(t, w.podExists(p), "neighbour pod %s", p)
			}

			// GitHub: the incident's registration deleted first where it
			// had one, every other registration kept.
			if inc.reg.ID != 0 {
				assert.False(t, w.runnerExists(inc.reg.ID), "the registration is deleted first")
			}
			if inc.keepReg.ID != 0 {
				assert.True(t, w.runnerExists(inc.keepReg.ID), "a deleting object's registration is not touched")
			}
			for _, r := range nRegs {
				assert.True(t, w.runnerExists(r.ID), "neighbour registration %s", r.Name)
			}
			assert.Len(t, w.requests(ghsim.EndpointDelete), map[bool]int{true: 1, false: 0}[inc.reg.ID != 0], "one GitHub delete at most")

			// A later sweep has nothing left to do but what ARC would: the
			// marks of acted candidates are cleared.
			if tc.result != "reported" {
				_, hasMark := w.marks()[markKey]
				assert.False(t, hasMark, "the acted candidate's mark is cleared")
			}
		})
	}
}

// markKeyOf is the ledger key the incident's verdict is marked under: its
// pod's, or for ARC's own leaks its EphemeralRunner's.
func markKeyOf(t *testing.T, w *world, inc arcIncident) string {
	t.Helper()
	if inc.pod != "" {
		p, err := env.Client.CoreV1().Pods(w.ns).Get(context.Background(), inc.pod, metav1.GetOptions{})
		require.NoError(t, err)
		return podMarkKey(p)
	}
	gvr := testenv.EphemeralRunners
	if inc.res == "runners" {
		gvr = testenv.LegacyRunners
	}
	u, err := env.Dynamic.Resource(gvr).Namespace(w.ns).Get(context.Background(), inc.name, metav1.GetOptions{})
	require.NoError(t, err)
	return fleet.EphemeralRunnerMarkKey(string(u.GetUID()))
}

// TestARCLeavesHealthyRunnersAlone: a fleet of nothing but healthy, busy and
// bare runners, swept twice past every hold, loses nothing: no action line,
// no ARC object deleted, no pod, no registration.
func TestARCLeavesHealthyRunnersAlone(t *testing.T) {
	t.Parallel()
	w := newWorld(t, arcEnv(nil))
	ers, pods, regs := arcNeighbours(w)
	objects := w.arcObjects()
	require.Len(t, objects, len(ers))

	for i := 0; i < 2; i++ {
		r := w.sweep()
		r.requireCode(t, 0)
		assert.Empty(t, r.msg("action"), "sweep %d acts on nothing", i+1)
		s := r.summary(t)
		assert.Equal(t, 1, num(t, s, "protected_busy"), "the busy runner is protected by rule 2")
		if i == 0 {
			time.Sleep(pastConfirm)
		}
	}
	assert.Equal(t, objects, w.arcObjects())
	for _, st := range w.arcObjects() {
		assert.Equal(t, "live", st)
	}
	assert.ElementsMatch(t, pods, w.podNames())
	for _, reg := range regs {
		assert.True(t, w.runnerExists(reg.ID), reg.Name)
	}
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	assert.Empty(t, w.reapedEvents())
}
