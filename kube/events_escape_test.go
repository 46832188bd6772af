package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// An Event's message quotes runner names and servers' errors,
// and `kubectl describe` prints it to a terminal; it is stored redacted,
// then escaped, so that a line break, an escape sequence, a C1 CSI or a
// right-to-left override shows in its visible form, on a pod and on an
// EphemeralRunner alike.
func TestRecordEventEscapes(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const secret = "ghp_eventSECRET0123456789"
	const hostile = "acme-x\n\rforged\x1b[2J\u202eevil\u009b31m"
	const escaped = `acme-x\n\rforged\x1b[2J\u202eevil\u009b31m`
	ns := env.Namespace(t, "kube")
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"},
		Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), corev1.ContainerState{}))})
	u := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "set-runner-x", Status: &testenv.EphemeralRunnerStatus{Phase: "Failed"}})
	c := newClient(t, Options{Redact: redact.New(secret).String})
	pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{})
	require.NoError(t, err)
	require.Len(t, pods, 1)

	require.NoError(t, c.RecordEvent(ctx, pods[0], "RunnerReaped", "terminal: runner "+hostile+" echoed Bearer "+secret))
	er := fleet.EphemeralRunner{Namespace: ns, Name: u.GetName(), UID: string(u.GetUID()), ResourceVersion: u.GetResourceVersion()}
	require.NoError(t, c.RecordEphemeralRunnerEvent(ctx, er, "RunnerReaped", "arc-failed: "+hostile))

	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	got := map[string]string{}
	for _, ev := range evs.Items {
		got[ev.InvolvedObject.Name] = ev.Message
	}
	assert.Equal(t, map[string]string{
		"runner-1":     "terminal: runner " + escaped + " echoed Bearer [REDACTED]",
		"set-runner-x": "arc-failed: " + escaped,
	}, got)
}
