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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/runner-reaper/runner-reaper/internal/ghsim"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

var (
	ephemeralRunnersGVR = schema.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "ephemeralrunners"}
	legacyRunnersGVR    = schema.GroupVersionResource{Group: "actions.summerwind.dev", Version: "v1alpha1", Resource: "runners"}
)

const (
	// ARC's two finalizers on every EphemeralRunner its controller has
	// reconciled; nothing removes them here.
	erFinalizer             = "ephemeralrunner.actions.github.com/finalizer"
	erRegistrationFinalizer = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
	// The legacy controller's finalizer on a Runner.
	legacyFinalizer = "runner.actions.summerwind.dev"
	scaleSet        = "arc-runner-set"

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

func dyn(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	return d
}

// erName is a name of ARC's form: scale set, EphemeralRunnerSet suffix,
// "runner", a five-character suffix. It is also the pod's name and the
// runner's name on GitHub.
func erName(suffix string) string { return scaleSet + "-x7k2p-runner-" + suffix }

// ephemeralRunner creates an EphemeralRunner as ARC's EphemeralRunnerSet
// controller creates it, with the finalizers ARC's EphemeralRunner
// controller adds, then writes its status through the status subresource as
// that controller does. A nil status leaves it as created.
func (w *world) ephemeralRunner(name string, status map[string]any) *unstructured.Unstructured {
	w.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": reconcile.EphemeralRunnerAPIVersion,
		"kind":       reconcile.EphemeralRunnerKind,
		"metadata": map[string]any{
			"name":       name,
			"finalizers": []any{erFinalizer, erRegistrationFinalizer},
			"labels": map[string]any{
				"actions.github.com/scale-set-name":      scaleSet,
				"actions.github.com/scale-set-namespace": w.ns,
				"app.kubernetes.io/component":            "runner",
				"app.kubernetes.io/part-of":              "gha-runner-scale-set",
			},
		},
		"spec": map[string]any{
			"githubConfigUrl":    "https://github.com/acme",
			"githubConfigSecret": scaleSet + "-gha-rs-github-secret",
			"runnerScaleSetId":   int64(1),
			"spec": map[string]any{
				"restartPolicy": "Never",
				"containers": []any{map[string]any{
					"name":    "runner",
					"image":   "ghcr.io/actions/actions-runner:latest",
					"command": []any{"/home/runner/run.sh"},
				}},
			},
		},
	}}
	ers := dyn(w.t).Resource(ephemeralRunnersGVR).Namespace(w.ns)
	created, err := ers.Create(ctx, u, metav1.CreateOptions{})
	require.NoError(w.t, err, "create ephemeralrunner %s", name)
	if status == nil {
		return created
	}
	require.NoError(w.t, unstructured.SetNestedMap(created.Object, status, "status"))
	updated, err := ers.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(w.t, err, "write status of ephemeralrunner %s", name)
	return updated
}

// erStatus is an EphemeralRunner status as ARC's controller writes it; a
// zero runnerID leaves status.runnerId unset, as before registration.
func erStatus(name, phase string, runnerID int64, reason, message string) map[string]any {
	s := map[string]any{"phase": phase, "runnerName": name}
	if runnerID != 0 {
		s["runnerId"] = runnerID
	}
	if reason != "" {
		s["reason"] = reason
	}
	if message != "" {
		s["message"] = message
	}
	return s
}

// legacyRunner creates a legacy actions.summerwind.dev Runner for the org,
// with the legacy controller's finalizer.
func (w *world) legacyRunner(name string) *unstructured.Unstructured {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": reconcile.LegacyRunnerAPIVersion,
		"kind":       reconcile.LegacyRunnerKind,
		"metadata":   map[string]any{"name": name, "finalizers": []any{legacyFinalizer}},
		"spec": map[string]any{
			"organization": "acme",
			"image":        "summerwind/actions-runner:latest",
			"ephemeral":    true,
		},
	}}
	created, err := dyn(w.t).Resource(legacyRunnersGVR).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(w.t, err, "create runner %s", name)
	return created
}

// ownedPod creates the runner pod of an ARC object the way its controller
// does: the object's name, the given labels, the object as its controller
// owner (blocking owner deletion), then the kubelet's status.
func (w *world) ownedPod(owner *unstructured.Unstructured, labels map[string]string, st podState) *corev1.Pod {
	w.t.Helper()
	ctx := context.Background()
	yes := true
	p, err := env.Client.CoreV1().Pods(w.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   owner.GetName(),
			Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         owner.GetAPIVersion(),
				Kind:               owner.GetKind(),
				Name:               owner.GetName(),
				UID:                owner.GetUID(),
				Controller:         &yes,
				BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest", Command: []string{"/home/runner/run.sh"}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(w.t, err)
	p.Status.Phase = st.phase
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.PodRunning
	}
	p.Status.StartTime = &p.CreationTimestamp
	cs := corev1.ContainerStatus{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest", Ready: st.running}
	switch {
	case st.term != nil:
		cs.State.Terminated = st.term
	default:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	p, err = env.Client.CoreV1().Pods(w.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(w.t, err)
	return p
}

// arcPodLabels are the labels ARC gives a scale set's runner pod.
func (w *world) arcPodLabels() map[string]string {
	return map[string]string{
		"actions-ephemeral-runner":               "True",
		"actions.github.com/scale-set-name":      scaleSet,
		"actions.github.com/scale-set-namespace": w.ns,
		"actions.github.com/organization":        "acme",
		"app.kubernetes.io/component":            "runner",
		"app.kubernetes.io/part-of":              "gha-runner-scale-set",
	}
}

// arcRunner creates an EphemeralRunner with its status and, when st is not
// nil, its pod.
func (w *world) arcRunner(name string, status map[string]any, st *podState) (*unstructured.Unstructured, *corev1.Pod) {
	w.t.Helper()
	er := w.ephemeralRunner(name, status)
	if st == nil {
		return er, nil
	}
	return er, w.ownedPod(er, w.arcPodLabels(), *st)
}

// deleteARC deletes an ARC object as a user or ARC's scale-down would;
// with its finalizers it stays, deleting.
func (w *world) deleteARC(gvr schema.GroupVersionResource, name string) {
	w.t.Helper()
	require.NoError(w.t, dyn(w.t).Resource(gvr).Namespace(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

// arcState is what became of an ARC object: "live", "deleting" (a delete
// was accepted; ARC's finalizers hold it) or "gone".
func (w *world) arcState(gvr schema.GroupVersionResource, name string) string {
	w.t.Helper()
	u, err := dyn(w.t).Resource(gvr).Namespace(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "gone"
	case err != nil:
		require.NoError(w.t, err)
	case u.GetDeletionTimestamp() != nil:
		return "deleting"
	}
	return "live"
}

// arcObjects is the state of every ARC object in the world, by
// "ephemeralrunners/NAME" or "runners/NAME".
func (w *world) arcObjects() map[string]string {
	w.t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{ephemeralRunnersGVR, legacyRunnersGVR} {
		l, err := dyn(w.t).Resource(gvr).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(w.t, err)
		for _, u := range l.Items {
			out[gvr.Resource+"/"+u.GetName()] = w.arcState(gvr, u.GetName())
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
	w.arcRunner(healthy, erStatus(healthy, "Running", reg.ID, "", ""), &podState{running: true})

	busy := erName("b5sy0")
	reg = w.runner(busy, "offline", true)
	regs = append(regs, reg)
	w.arcRunner(busy, erStatus(busy, "Running", reg.ID, "", ""), &podState{running: true})

	regs = append(regs, w.runner("acme-bare", "online", false))
	w.pod("acme-bare", running())
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
			w.arcRunner(name, erStatus(name, "Running", reg.ID, "", ""), &podState{running: true})
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
			w.arcRunner(name, erStatus(name, "Running", 4242, "", ""), &podState{running: true})
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
			w.arcRunner(name, erStatus(name, "Running", 0, "", ""), &podState{running: true})
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
			w.arcRunner(name, erStatus(name, "Running", 0, "", ""),
				&podState{phase: corev1.PodFailed, term: terminated(137, 0, "OOMKilled")})
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
			r := w.legacyRunner(name)
			w.ownedPod(r, map[string]string{"actions-runner": "", "runner-template-hash": "6d5f8c7b9"}, podState{running: true})
			return arcIncident{object: "Runner " + ns(w) + "/" + name, res: "runners", name: name, after: "deleting", pod: name, reg: reg}
		},
		verdict: "zombie", action: "delete-registration-then-runner", result: "deleted",
	}, {
		name: "arc-failed: an EphemeralRunner Failed with no pod, its registration offline",
		plant: func(w *world) arcIncident {
			name := erName("f41l3")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, erStatus(name, "Failed", reg.ID, "TooManyPodFailures", "Pod has failed to start more than 5 times"), nil)
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
			w.arcRunner(name, erStatus(name, "Pending", 0, "", ""), nil)
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
			w.arcRunner(name, erStatus(name, "Running", reg.ID, "", ""), nil)
			w.deleteARC(ephemeralRunnersGVR, name)
			time.Sleep(pastStuck)
			// Deleting already: no registration is deleted first, and
			// without the option nothing is changed at all.
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "deleting", keepReg: reg}
		},
		verdict: "arc-stuck-deleting", action: "report", result: "reported",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Contains(t, l["evidence"], erFinalizer)
			assert.NotContains(t, l, "pod_result", "nothing was sent")
		},
	}, {
		name:  "arc-stuck-deleting: finalizers removed with REAPER_ARC_REMOVE_FINALIZERS",
		extra: map[string]string{"REAPER_ARC_REMOVE_FINALIZERS": "true"},
		plant: func(w *world) arcIncident {
			name := erName("stuk2")
			reg := w.runner(name, "offline", false)
			w.arcRunner(name, erStatus(name, "Running", reg.ID, "", ""), nil)
			w.deleteARC(ephemeralRunnersGVR, name)
			time.Sleep(pastStuck)
			return arcIncident{object: "EphemeralRunner " + ns(w) + "/" + name, res: "ephemeralrunners", name: name, after: "gone", keepReg: reg}
		},
		verdict: "arc-stuck-deleting", action: "remove-finalizers", result: "deleted",
		check: func(t *testing.T, w *world, inc arcIncident, l map[string]any) {
			assert.Equal(t, "deleted", l["pod_result"], "the finalizer patch was accepted")
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
				r := w.legacyRunner(name)
				w.ownedPod(r, map[string]string{"actions-runner": "", "runner-template-hash": "6d5f8c7b9"}, podState{running: true})
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
			gvr := ephemeralRunnersGVR
			if inc.res == "runners" {
				gvr = legacyRunnersGVR
			}
			if inc.after == "gone" {
				delete(want, inc.res+"/"+inc.name)
			} else {
				want[inc.res+"/"+inc.name] = inc.after
			}
			assert.Equal(t, want, w.arcObjects(), "only the incident's object changed")
			assert.Equal(t, inc.after, w.arcState(gvr, inc.name))
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
	gvr := ephemeralRunnersGVR
	if inc.res == "runners" {
		gvr = legacyRunnersGVR
	}
	u, err := dyn(t).Resource(gvr).Namespace(w.ns).Get(context.Background(), inc.name, metav1.GetOptions{})
	require.NoError(t, err)
	return reconcile.EphemeralRunnerMarkKey(string(u.GetUID()))
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
