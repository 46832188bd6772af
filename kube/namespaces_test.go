package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestUnobservedNamespaces checks the namespace existence check against the
// real API server: a namespace that does not exist, or is being deleted, or
// whose existence the user may not check, is reported with the reason; an
// existing one, empty or not, is fine; a namespace that listed a pod, or a
// list of all namespaces, costs no request at all.
func TestUnobservedNamespaces(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	full := env.Namespace(t, "kube")
	empty := env.Namespace(t, "kube")
	missing := full + "-misspelt"
	terminating := env.Namespace(t, "kube")
	// With no namespace controller running, a deleted namespace stays
	// Terminating.
	require.NoError(t, env.Client.CoreV1().Namespaces().Delete(ctx, terminating, metav1.DeleteOptions{}))
	running := podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))
	env.RunnerPod(t, full, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"}, Status: running})

	// lister may list pods in both namespaces but create Events nowhere.
	lister := "ns-lister-" + full
	for _, ns := range []string{full, empty} {
		env.Grant(t, ns, "list-pods", lister,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	}

	tests := []struct {
		name         string
		client       *Client
		namespaces   []string
		want         map[string]string // namespace: a fragment of the reason
		wantRequests int64             // beyond the pod list
	}{
		{"a namespace with a pod: no check", newClient(t, Options{}), []string{full}, nil, 0},
		{"all namespaces: no check", newClient(t, Options{}), nil, nil, 0},
		{"an existing empty namespace is fine", newClient(t, Options{}), []string{full, empty}, nil, 1},
		{"a namespace that does not exist", newClient(t, Options{}), []string{full, missing},
			map[string]string{missing: "namespace " + missing + " does not exist"}, 1},
		{"a namespace being deleted", newClient(t, Options{}), []string{terminating},
			map[string]string{terminating: "being terminated"}, 1},
		{"named twice, checked once", newClient(t, Options{}), []string{missing, empty, missing},
			map[string]string{missing: "does not exist"}, 2},
		{"a user who may not create Events cannot tell: unobserved", userClient(t, lister), []string{full, empty},
			map[string]string{empty: "forbidden"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := tc.client.ListPods(ctx, tc.namespaces, "app=runner", Mapping{})
			require.NoError(t, err)
			listed := tc.client.Counts().Requests
			got := tc.client.UnobservedNamespaces(ctx, tc.namespaces, pods)
			reasons := map[string]string{}
			for _, u := range got {
				reasons[u.Namespace] = u.Reason
			}
			require.Len(t, reasons, len(tc.want), "unobserved: %v", got)
			for ns, fragment := range tc.want {
				assert.Contains(t, reasons[ns], fragment)
			}
			assert.Equal(t, tc.wantRequests, tc.client.Counts().Requests-listed, "requests")
		})
	}

	t.Run("the check stores no Event", func(t *testing.T) {
		c := newClient(t, Options{})
		assert.Empty(t, c.UnobservedNamespaces(ctx, []string{empty}, []fleet.Pod{}))
		evs, err := env.Client.CoreV1().Events(empty).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, evs.Items)
	})
}
