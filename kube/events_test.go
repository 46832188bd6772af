package kube

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

func TestRecordEvent(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	host, err := os.Hostname()
	require.NoError(t, err)
	tests := []struct {
		name          string
		opts          Options
		wantComponent string
		wantInstance  string
	}{
		{"defaults", Options{}, "runner-reaper", host},
		{"configured", Options{Component: "reaper-test", Instance: "lambda-1"}, "reaper-test", "lambda-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "kube")
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"},
				Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), corev1.ContainerState{}))})
			c := newClient(t, tc.opts)
			pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{})
			require.NoError(t, err)
			require.Len(t, pods, 1)
			p := pods[0]

			start := time.Now().Add(-time.Second)
			before := c.Counts()
			msg := "terminal: runner exited 137 OOMKilled (oom-host); deleting pod"
			require.NoError(t, c.RecordEvent(ctx, p, "RunnerReaped", msg))
			assert.Equal(t, int64(1), c.Counts().Sub(before).Requests, "one request per event")

			evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + p.UID})
			require.NoError(t, err)
			require.Len(t, evs.Items, 1)
			ev := evs.Items[0]
			assert.Regexp(t, `^runner-1\.[a-z0-9]+$`, ev.Name)
			assert.Equal(t, corev1.ObjectReference{
				APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "runner-1",
				UID: ev.InvolvedObject.UID, ResourceVersion: p.ResourceVersion,
			}, ev.InvolvedObject)
			assert.Equal(t, p.UID, string(ev.InvolvedObject.UID))
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			assert.Equal(t, "RunnerReaped", ev.Reason)
			assert.Equal(t, msg, ev.Message)
			assert.Equal(t, tc.wantComponent, ev.Source.Component)
			assert.Equal(t, tc.wantComponent, ev.ReportingController)
			assert.Equal(t, tc.wantInstance, ev.ReportingInstance)
			assert.Equal(t, int32(1), ev.Count)
			assert.True(t, !ev.FirstTimestamp.Time.Before(start.Truncate(time.Second)), "first timestamp is now")
			assert.Equal(t, ev.FirstTimestamp, ev.LastTimestamp)
		})
	}
}

// An EphemeralRunner the reaper acts on directly carries the Event itself.
func TestRecordEphemeralRunnerEvent(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	c, err := New(env.Config, Options{})
	require.NoError(t, err)
	u := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "set-runner-x", Status: &testenv.EphemeralRunnerStatus{Phase: "Failed"}})
	er := fleet.EphemeralRunner{Namespace: ns, Name: u.GetName(), UID: string(u.GetUID()), ResourceVersion: u.GetResourceVersion()}
	require.NoError(t, c.RecordEphemeralRunnerEvent(ctx, er, "RunnerReaped", "arc-failed: test"))
	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	ev := evs.Items[0]
	assert.Equal(t, fleet.EphemeralRunnerKind, ev.InvolvedObject.Kind)
	assert.Equal(t, fleet.EphemeralRunnerAPIVersion, ev.InvolvedObject.APIVersion)
	assert.Equal(t, u.GetUID(), ev.InvolvedObject.UID)
	assert.Equal(t, "RunnerReaped", ev.Reason)
	assert.Equal(t, "Warning", ev.Type)
}

// An Event outlives the process and anyone who can describe the pod reads
// it: its message goes through the process's redactor, on a pod and on an
// EphemeralRunner alike.
func TestRecordEventRedacts(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const secret = "ghp_eventSECRET0123456789"
	secrets := redact.New(secret)
	ns := env.Namespace(t, "kube")
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"},
		Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(1, 0, "Error"), corev1.ContainerState{}))})
	u := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "set-runner-x", Status: &testenv.EphemeralRunnerStatus{Phase: "Failed"}})
	c := newClient(t, Options{Redact: secrets.String})
	pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{})
	require.NoError(t, err)
	require.Len(t, pods, 1)

	require.NoError(t, c.RecordEvent(ctx, pods[0], "RunnerReaped", "terminal: echoed Bearer "+secret))
	er := fleet.EphemeralRunner{Namespace: ns, Name: u.GetName(), UID: string(u.GetUID()), ResourceVersion: u.GetResourceVersion()}
	require.NoError(t, c.RecordEphemeralRunnerEvent(ctx, er, "RunnerReaped", "arc-failed: token "+secret))

	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	got := map[string]string{}
	for _, ev := range evs.Items {
		got[ev.InvolvedObject.Name] = ev.Message
	}
	assert.Equal(t, map[string]string{
		"runner-1":     "terminal: echoed Bearer [REDACTED]",
		"set-runner-x": "arc-failed: token [REDACTED]",
	}, got)
}
