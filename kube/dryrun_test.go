package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The pre-flight must never write: a pre-flight that deleted a pod would
// kill the job its registration delete then finds (422). Every write of
// DryRun(), the Events included, is answered as the write would be and
// leaves every object as it was: same resourceVersion, nothing marked for
// deletion, no Event stored.
func TestDryRunWritesNothing(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"},
		Status: podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))})
	_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	live := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "er-live", Finalizers: []string{testenv.EphemeralRunnerFinalizer},
		Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 7}})
	env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "er-stuck", Finalizers: []string{testenv.EphemeralRunnerFinalizer}})
	require.NoError(t, env.Dynamic.Resource(testenv.EphemeralRunners).Namespace(ns).Delete(ctx, "er-stuck", metav1.DeleteOptions{}))

	c := newClient(t, Options{})
	pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{})
	require.NoError(t, err)
	require.Len(t, pods, 1)
	ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
	require.NoError(t, err)
	byName := ersByName(ers)
	require.Len(t, byName, 2)

	rv := func() map[string]string {
		out := map[string]string{}
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "runner-1", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, p.DeletionTimestamp)
		out["pod"] = p.ResourceVersion
		sa, err := env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "runner-1", metav1.GetOptions{})
		require.NoError(t, err)
		out["sa"] = sa.ResourceVersion
		for _, name := range []string{"er-live", "er-stuck"} {
			u, err := env.Dynamic.Resource(testenv.EphemeralRunners).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			out[name] = u.GetResourceVersion()
			assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, u.GetFinalizers(), name)
		}
		out["er-live-deleting"] = ""
		if u, _ := env.Dynamic.Resource(testenv.EphemeralRunners).Namespace(ns).Get(ctx, "er-live", metav1.GetOptions{}); u.GetDeletionTimestamp() != nil {
			out["er-live-deleting"] = "yes"
		}
		return out
	}
	before := rv()

	d := c.DryRun()
	owner := fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "er-live", UID: string(live.GetUID())}
	for name, write := range map[string]func() (fleet.Result, error){
		"pod":                     func() (fleet.Result, error) { return d.DeletePod(ctx, pods[0]) },
		"service account":         func() (fleet.Result, error) { return d.DeleteServiceAccount(ctx, ns, "runner-1") },
		"owner":                   func() (fleet.Result, error) { return d.DeleteOwner(ctx, ns, owner) },
		"ephemeralrunner":         func() (fleet.Result, error) { return d.DeleteEphemeralRunner(ctx, byName[ns+"/er-live"]) },
		"finalizers of the stuck": func() (fleet.Result, error) { return d.RemoveFinalizers(ctx, byName[ns+"/er-stuck"]) },
	} {
		res, err := write()
		require.NoError(t, err, name)
		assert.Equal(t, fleet.Deleted, res, "%s: answered as the write would be", name)
	}
	dc, ok := d.(*Client)
	require.True(t, ok)
	require.NoError(t, dc.RecordEvent(ctx, pods[0], "RunnerReaped", "dry run"))
	require.NoError(t, dc.RecordEphemeralRunnerEvent(ctx, byName[ns+"/er-live"], "RunnerReaped", "dry run"))

	assert.Equal(t, before, rv(), "nothing changed")
	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, evs.Items, "no Event stored")
}
