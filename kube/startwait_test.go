package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func stateWaiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

func unschedulable(reason, message string) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message}
}

// TestViewStartWait: View says what holds a runner back from starting, the
// most telling wait first, and nothing for a runner that has started, run
// or ended, or whose pod has ended.
func TestViewStartWait(t *testing.T) {
	var none corev1.ContainerState
	scheduledAt := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	later := scheduledAt.Add(time.Minute)
	tests := []struct {
		name       string
		phase      corev1.PodPhase
		conditions []corev1.PodCondition
		init       []corev1.ContainerStatus
		containers []corev1.ContainerStatus
		want       *fleet.StartWait
	}{
		{name: "running runner", phase: corev1.PodRunning,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateRunning(), none)}},
		{name: "ended runner", phase: corev1.PodRunning,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateTerminated(1, 0, "Error"), none)}},
		{name: "crash loop: the runner ran before", phase: corev1.PodRunning,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("CrashLoopBackOff", "back-off"), stateTerminated(1, 0, "Error"))}},
		{name: "ended pod", phase: corev1.PodFailed,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("ImagePullBackOff", "x"), none)}},
		{name: "image pull back-off", phase: corev1.PodPending,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/acme/runner:nope"`), none)},
			want:       &fleet.StartWait{Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/acme/runner:nope"`, Container: "runner"}},
		{name: "the runner's own wait, not a sidecar's", phase: corev1.PodRunning,
			containers: []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none), containerStatus("runner", stateWaiting("CreateContainerConfigError", `secret "jit" not found`), none)},
			want:       &fleet.StartWait{Reason: "CreateContainerConfigError", Message: `secret "jit" not found`, Container: "runner"}},
		{name: "a sidecar's wait is no runner's", phase: corev1.PodRunning,
			containers: []corev1.ContainerStatus{containerStatus("dind", stateWaiting("ImagePullBackOff", "x"), none), containerStatus("runner", stateRunning(), none)}},
		{name: "unschedulable over the runner's ContainerCreating", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}, unschedulable("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")},
			want:       &fleet.StartWait{Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}},
		{name: "scheduling gated", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{unschedulable("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")},
			want:       &fleet.StartWait{Reason: "SchedulingGated", Message: "Scheduling is blocked due to non-empty scheduling gates"}},
		{name: "scheduled", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
		{name: "not scheduled for another reason says nothing", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{unschedulable("SomethingElse", "x")}},
		{name: "init container cannot pull", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus("setup", stateWaiting("ErrImagePull", "not found"), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "ErrImagePull", Message: "not found", Container: "setup", Init: true}},
		{name: "init container failed", phase: corev1.PodPending,
			init: []corev1.ContainerStatus{containerStatus("done", stateTerminated(0, 0, "Completed"), none),
				containerStatus("setup", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: "no config"}}, none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "Error", Message: "exit code 2: no config", Container: "setup", Init: true}},
		{name: "init container still running", phase: corev1.PodPending,
			init: []corev1.ContainerStatus{containerStatus("done", stateTerminated(0, 0, "Completed"), none),
				containerStatus("setup", stateRunning(), none), containerStatus("later", stateWaiting("PodInitializing", ""), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "Running", Container: "setup", Init: true}},
		{name: "a running sidecar init container does not hold a runner being created", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("ContainerCreating", ""), none)},
			want:       &fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}},
		{name: "a running sidecar init container does not hide the runner's fault", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("InvalidImageName", `couldn't parse image name "invalid::name"`), none)},
			want:       &fleet.StartWait{Reason: "InvalidImageName", Message: `couldn't parse image name "invalid::name"`, Container: "runner"}},
		{name: "pod initializing with every init container done", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus("setup", stateTerminated(0, 0, "Completed"), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "PodInitializing", Container: "runner"}},
		{name: "scheduled and pulling: when it got its node", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(later)},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduledAt)}},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("ContainerCreating", ""), none)},
			want:       &fleet.StartWait{Reason: "ContainerCreating", Container: "runner", ScheduledAt: fleet.StampOf(scheduledAt)}},
		{name: "scheduled, nothing said of a wait", phase: corev1.PodPending,
			conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduledAt)}},
			want:       &fleet.StartWait{ScheduledAt: fleet.StampOf(scheduledAt)}},
		{name: "the init container being created after a running sidecar, not the sidecar", phase: corev1.PodPending,
			init: []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none), containerStatus("setup", stateWaiting("ContainerCreating", ""), none),
				containerStatus("later", stateWaiting("PodInitializing", ""), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "ContainerCreating", Container: "setup", Init: true}},
		{name: "a sidecar not yet started holds the next init container back", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none), containerStatus("setup", stateWaiting("PodInitializing", ""), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: "Running", Container: "dind", Init: true}},
		{name: "texts bounded", phase: corev1.PodPending,
			init:       []corev1.ContainerStatus{containerStatus(strings.Repeat("c", 5000), stateWaiting(strings.Repeat("R", 100_000), strings.Repeat("é", 3000)), none)},
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("PodInitializing", ""), none)},
			want:       &fleet.StartWait{Reason: strings.Repeat("R", 4096), Message: strings.Repeat("é", 2048), Container: strings.Repeat("c", 4096), Init: true}},
		{name: "no status at all", phase: corev1.PodPending},
		{name: "a waiting runner with no reason", phase: corev1.PodPending,
			containers: []corev1.ContainerStatus{containerStatus("runner", stateWaiting("", ""), none)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner"}}},
				Status: corev1.PodStatus{Phase: tc.phase, Conditions: tc.conditions,
					InitContainerStatuses: tc.init, ContainerStatuses: tc.containers},
			}
			assert.Equal(t, tc.want, Mapping{}.View(p).StartWait)
		})
	}
}
