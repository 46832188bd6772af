package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The read path a -tags stdread build takes (readThroughWatch), called
// here directly: one read through the reflectors gives the views the
// hand-written lists give of the same objects, at one watch-list a
// namespace for each resource (the EphemeralRunners' read sends no pod
// request).
func TestReadOnceGivesWhatListsGive(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nss := []string{env.Namespace(t, "readpath"), env.Namespace(t, "readpath")}
	for i, ns := range nss {
		for j := range 3 {
			name := fmt.Sprintf("runner-%d-%d", i, j)
			cfg := "https://github.com/acme"
			require.NoError(t, testenv.CreateARCRunner(ctx, env.Client, env.Dynamic, ns, testenv.ARCRunner{
				ARCPod: testenv.ARCPod{Name: name, Org: "acme"}, ConfigURL: cfg, RunnerID: int64(100*i + j + 1),
			}))
		}
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "er-alone", Finalizers: testenv.ARCFinalizers(),
			Status: &testenv.EphemeralRunnerStatus{Phase: "Failed", Reason: "TooManyPodFailures"}})
	}
	m := Mapping{Scopes: mustScopes(t, "org:acme")}
	opts := Options{GitHubHost: "github.com"}
	lists := newClient(t, opts)
	wantPods, err := lists.ListPods(ctx, nss, "", m)
	require.NoError(t, err)
	require.Len(t, wantPods, 6)
	wantERs, err := lists.ListEphemeralRunners(ctx, nss, wantPods)
	require.NoError(t, err)
	require.Len(t, wantERs, 8)

	c := newClient(t, opts)
	pods, err := c.listPodsThroughWatch(ctx, nss, "", m)
	require.NoError(t, err)
	assert.Equal(t, sorted(wantPods), sorted(pods))
	assert.Equal(t, int64(3), c.Counts().Requests, "one pod watch-list a namespace, and the resourceVersion read that proves the store fresh")

	before := c.Counts()
	ers, err := c.listEphemeralRunnersThroughWatch(ctx, nss)
	require.NoError(t, err)
	assert.Equal(t, sortedERs(wantERs), sortedERs(ers))
	assert.Equal(t, int64(3), c.Counts().Sub(before).Requests, "one EphemeralRunner watch-list a namespace and the resourceVersion read, no pods")
}

// A read that cannot sync waits until its context ends, and then says
// it is incomplete and why each store was not live.
func TestReadOnceForbiddenSaysWhy(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "readpath")
	user := "readpath-" + ns
	env.Grant(t, ns, "pods-"+ns, user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	cfg, err := env.AddUser(user)
	require.NoError(t, err)
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pods, err := c.listPodsThroughWatch(ctx, []string{ns}, "", Mapping{})
	require.ErrorIs(t, err, ErrIncomplete)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, pods)
	assert.Contains(t, err.Error(), "list pods through the reflectors")
	assert.Contains(t, err.Error(), fmt.Sprintf("pods in %s: ", ns))
	assert.Contains(t, err.Error(), "forbidden")
}
