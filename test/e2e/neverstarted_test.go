package e2e_test

import (
	"context"
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

// startDeadline is the start deadline of the worlds whose runner pods must
// be past it: as short as the registration deadline, and slept past the
// same way.
const startDeadline = registrationDeadline

const pullMessage = `Back-off pulling image "ghcr.io/acme/runner:nope"`

const initMessage = "back-off 10s restarting failed container=setup"

// pullBackOff is the status a kubelet writes for a runner pod whose image
// cannot be pulled: Pending, the runner container waiting.
func pullBackOff() *corev1.PodStatus {
	return &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "runner", Image: testenv.RunnerImage,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: pullMessage}},
	}}}
}

// noRoom is the status the scheduler writes for a pod no node has room for.
func noRoom() *corev1.PodStatus {
	return &corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient cpu.",
	}}}
}

// stuckPod creates a runner pod of org acme whose status is st.
func (w *world) stuckPod(name string, st *corev1.PodStatus) *corev1.Pod {
	w.t.Helper()
	return env.RunnerPod(w.t, w.ns, testenv.RunnerPod{Name: name, Org: "acme", Status: st})
}

// TestNeverStarted: through the binary against a real API server, a
// runner pod whose runner container never starts is never-started once it
// is older than REAPER_START_DEADLINE: marked by one sweep, deleted by the
// first sweep after confirm-after, with its waiting reason and message on
// the action line and in the audit; one that only waits for room in the
// cluster is reported and left unless REAPER_DELETE_UNSCHEDULABLE is set;
// one younger than the deadline is not judged; an init container that does
// not finish is named; a pod that waited for room past the deadline and
// then got a node is judged from its scheduling, the mark made while it
// waited cleared; a dry run writes nothing.
// The neighbours are never touched.
func TestNeverStarted(t *testing.T) {
	t.Parallel()
	deadline := map[string]string{"REAPER_START_DEADLINE": startDeadline.String()}

	t.Run("image pull back-off: marked, then deleted after confirmation", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, deadline)
		neighbours(w)
		pod := w.stuckPod("acme-pull", pullBackOff())
		time.Sleep(pastDeadline)

		first := w.sweep()
		first.requireCode(t, 0)
		assert.Empty(t, first.msg("action"), "marked, not acted on, on its first sight")
		assert.Equal(t, map[string]any{"never-started": float64(1)}, first.summary(t)["verdicts"])
		require.Contains(t, w.marks(), podMarkKey(pod))
		assert.EqualValues(t, fleet.NeverStarted, w.marks()[podMarkKey(pod)].Verdict)

		audit := w.exec("audit")
		audit.requireCode(t, 0)
		assert.Contains(t, audit.Stdout, "never-started")
		assert.Contains(t, audit.Stdout, `[ImagePullBackOff] runner container not started`)
		assert.Contains(t, audit.Stdout, `Back-off pulling image \"ghcr.io/acme/runner:nope\"`)

		time.Sleep(pastConfirm)
		final := w.sweep()
		final.requireCode(t, 0)
		acted := final.actions(t)
		require.Len(t, acted, 1, "only the stuck pod acts; stdout:\n%s", final.Stdout)
		line := acted["acme-pull"]
		require.NotNil(t, line)
		assert.Equal(t, "never-started", line["verdict"])
		assert.Equal(t, "delete-pod", line["action"])
		assert.Equal(t, "deleted", line["result"])
		assert.Equal(t, "ImagePullBackOff", line["wait_reason"])
		assert.Equal(t, pullMessage, line["wait_message"])
		assert.Equal(t, "runner", line["wait_container"])
		assert.Contains(t, line["evidence"], `container "runner" waiting: ImagePullBackOff`)
		assert.False(t, w.podExists("acme-pull"))
		for _, n := range []string{"acme-healthy", "acme-busy", "acme-claimed"} {
			assert.True(t, w.podExists(n), "neighbour %s", n)
		}
	})

	t.Run("unschedulable: reported every sweep, never deleted by default", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, deadline)
		pod := w.stuckPod("acme-noroom", noRoom())
		time.Sleep(pastDeadline)
		for i, sweep := range []func() run{func() run { return w.sweep() }, func() run { time.Sleep(pastConfirm); return w.sweep() }} {
			r := sweep()
			r.requireCode(t, 0)
			acted := r.actions(t)
			require.Len(t, acted, 1, "sweep %d; stdout:\n%s", i, r.Stdout)
			line := acted["acme-noroom"]
			require.NotNil(t, line)
			assert.Equal(t, "never-started", line["verdict"])
			assert.Equal(t, "report", line["action"])
			assert.Equal(t, "reported", line["result"])
			assert.Equal(t, "Unschedulable", line["wait_reason"])
			assert.Contains(t, line["evidence"], "reported only")
			assert.NotContains(t, line, "error", "a report by choice is no fault")
			assert.NotContains(t, w.marks(), podMarkKey(pod), "a report keeps no mark")
			assert.True(t, w.podExists("acme-noroom"), "sweep %d", i)
		}
	})

	t.Run("unschedulable: deleted with REAPER_DELETE_UNSCHEDULABLE", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, map[string]string{"REAPER_START_DEADLINE": startDeadline.String(), "REAPER_DELETE_UNSCHEDULABLE": "true"})
		w.stuckPod("acme-noroom", noRoom())
		time.Sleep(pastDeadline)
		first := w.sweep()
		first.requireCode(t, 0)
		assert.Empty(t, first.msg("action"))
		time.Sleep(pastConfirm)
		final := w.sweep()
		final.requireCode(t, 0)
		line := final.actions(t)["acme-noroom"]
		require.NotNil(t, line, "stdout:\n%s", final.Stdout)
		assert.Equal(t, "never-started", line["verdict"])
		assert.Equal(t, "delete-pod", line["action"])
		assert.Equal(t, "deleted", line["result"])
		assert.False(t, w.podExists("acme-noroom"))
	})

	t.Run("younger than the deadline: not judged", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, map[string]string{"REAPER_START_DEADLINE": "1h"})
		w.stuckPod("acme-pull", pullBackOff())
		w.stuckPod("acme-noroom", noRoom())
		first := w.sweep()
		first.requireCode(t, 0)
		time.Sleep(pastConfirm)
		final := w.sweep()
		final.requireCode(t, 0)
		for _, r := range []run{first, final} {
			assert.Empty(t, r.msg("action"))
			assert.Empty(t, r.summary(t)["verdicts"])
		}
		assert.Empty(t, w.marks())
		assert.True(t, w.podExists("acme-pull"))
		assert.True(t, w.podExists("acme-noroom"))
	})

	t.Run("an init container that does not finish: deleted after confirmation, the init container named", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, deadline)
		st := &corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup", Image: "busybox",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: initMessage}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: testenv.RunnerImage,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}
		pod := env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: "acme-init", Org: "acme", Status: st,
			InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}}})
		time.Sleep(pastDeadline)
		first := w.sweep()
		first.requireCode(t, 0)
		assert.Empty(t, first.msg("action"), "marked, not acted on, on its first sight")
		require.Contains(t, w.marks(), podMarkKey(pod))

		time.Sleep(pastConfirm)
		final := w.sweep()
		final.requireCode(t, 0)
		line := final.actions(t)["acme-init"]
		require.NotNil(t, line, "stdout:\n%s", final.Stdout)
		assert.Equal(t, "never-started", line["verdict"])
		assert.Equal(t, "delete-pod", line["action"])
		assert.Equal(t, "deleted", line["result"])
		assert.Equal(t, "CrashLoopBackOff", line["wait_reason"])
		assert.Equal(t, initMessage, line["wait_message"])
		assert.Equal(t, "setup", line["wait_container"])
		assert.Equal(t, true, line["wait_init"])
		assert.Contains(t, line["evidence"], `init container "setup" has not finished: CrashLoopBackOff`)
		assert.Contains(t, line["evidence"], "after the pod was scheduled")
		assert.False(t, w.podExists("acme-init"))
	})

	t.Run("scheduled after waiting past the deadline: judged from its scheduling", func(t *testing.T) {
		t.Parallel()
		// Longer than the others: the pod must be past it since its
		// creation and well within it since its scheduling at once.
		const longer = 5 * time.Second
		w := newWorld(t, map[string]string{"REAPER_START_DEADLINE": longer.String(), "REAPER_DELETE_UNSCHEDULABLE": "true"})
		pod := w.stuckPod("acme-late", noRoom())
		time.Sleep(longer + 200*time.Millisecond)
		waited := w.sweep()
		waited.requireCode(t, 0)
		require.Contains(t, w.marks(), podMarkKey(pod), "marked while it waited for room, which acts here")

		// A node at last: the scheduler's condition turns True, and
		// the runner's image is being pulled.
		ctx := context.Background()
		got, err := env.Client.CoreV1().Pods(w.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		got.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", Image: testenv.RunnerImage,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		_, err = env.Client.CoreV1().Pods(w.ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
		require.NoError(t, err)

		young := w.sweep()
		young.requireCode(t, 0)
		assert.Empty(t, young.msg("action"), "young since it got its node; stdout:\n%s", young.Stdout)
		assert.Empty(t, young.summary(t)["verdicts"])
		assert.NotContains(t, w.marks(), podMarkKey(pod), "the mark made while it waited is cleared")
		assert.True(t, w.podExists("acme-late"))

		time.Sleep(longer + 200*time.Millisecond)
		late := w.sweep()
		late.requireCode(t, 0)
		assert.Empty(t, late.msg("action"), "marked again, from its scheduling, not acted on")
		require.Contains(t, w.marks(), podMarkKey(pod))
		assert.True(t, w.podExists("acme-late"))
	})

	t.Run("dry run: the same decisions, nothing written", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, map[string]string{"REAPER_START_DEADLINE": startDeadline.String(), "REAPER_DRY_RUN": "true"})
		reg := w.runner("acme-pull", "offline", false)
		w.stuckPod("acme-pull", pullBackOff())
		time.Sleep(pastDeadline)
		w.sweep().requireCode(t, 0)
		time.Sleep(pastConfirm)
		final := w.sweep()
		final.requireCode(t, 0)
		line := final.actions(t)["acme-pull"]
		require.NotNil(t, line, "stdout:\n%s", final.Stdout)
		assert.Equal(t, "never-started", line["verdict"])
		assert.Equal(t, "delete-registration-then-pod", line["action"])
		assert.Equal(t, "would-delete", line["result"])
		assert.Equal(t, true, line["dry_run"])
		assert.True(t, w.podExists("acme-pull"))
		assert.True(t, w.runnerExists(reg.ID))
		assert.Empty(t, w.requests(ghsim.EndpointDelete))
		assert.Empty(t, w.reapedEvents())
	})
}
