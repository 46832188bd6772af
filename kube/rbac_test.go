package kube

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestForbidden: a user RBAC refuses gets errors that IsForbidden names, and
// never a partial pod list.
func TestForbidden(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nsA := env.Namespace(t, "kube")
	nsB := env.Namespace(t, "kube")
	running := podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))
	pod := env.RunnerPod(t, nsA, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"}, Status: running})
	env.RunnerPod(t, nsB, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"}, Status: running})
	view := Mapping{}.View(pod)

	// lister may list pods in nsA and nothing else.
	env.Grant(t, nsA, "list-pods", "lister-"+nsA,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})

	nobody := userClient(t, "nobody-"+nsA)
	lister := userClient(t, "lister-"+nsA)

	listIn := func(c *Client, ns ...string) func() error {
		return func() error {
			pods, err := c.ListPods(ctx, ns, "", Mapping{})
			assert.Nil(t, pods, "no partial list")
			return err
		}
	}
	assertForbidden(t, []forbiddenCase{
		{"no rights: list one namespace", listIn(nobody, nsA)},
		{"no rights: list all namespaces", listIn(nobody)},
		{"no rights: delete pod", refusedWrite(t, func() (fleet.Result, error) { return nobody.DeletePod(ctx, view) })},
		{"no rights: delete service account", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.DeleteServiceAccount(ctx, nsA, "runner-1")
		})},
		{"no rights: record event", func() error { return nobody.RecordEvent(ctx, view, "RunnerReaped", "test") }},
		{"list rights in one namespace: listing two fails whole", listIn(lister, nsA, nsB)},
		{"list rights in one namespace: all namespaces", listIn(lister)},
		{"list rights: delete pod", refusedWrite(t, func() (fleet.Result, error) { return lister.DeletePod(ctx, view) })},
		{"list rights: dry-run delete pod", refusedWrite(t, func() (fleet.Result, error) { return lister.DryRun().DeletePod(ctx, view) })},
		{"no rights: dry-run delete service account", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.DryRun().DeleteServiceAccount(ctx, nsA, "runner-1")
		})},
	})

	t.Run("list rights in one namespace: that namespace lists", func(t *testing.T) {
		pods, err := lister.ListPods(ctx, []string{nsA}, "", Mapping{})
		require.NoError(t, err)
		assert.Len(t, pods, 1)
	})
	t.Run("the refused delete left the pod", func(t *testing.T) {
		_, err := env.Client.CoreV1().Pods(nsA).Get(ctx, "runner-1", metav1.GetOptions{})
		require.NoError(t, err)
	})
	t.Run("an error that is not RBAC's is no refusal", func(t *testing.T) {
		assert.False(t, apierrors.IsForbidden(nil))
		_, err := nobody.ListPods(ctx, []string{nsA, ""}, "", Mapping{})
		require.Error(t, err)
		assert.False(t, apierrors.IsForbidden(err))
	})
}
