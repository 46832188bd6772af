package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestReleaseRegistration: on the real API server, ARC's registration
// finalizer, and only it, leaves an EphemeralRunner being deleted; the
// object found is held to the UID judged; a live one is refused (ARC would
// skip its runner's removal later) but may be checked as a dry run, which
// changes nothing.
func TestReleaseRegistration(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const name = "set-runner-rel"
	setup := func(t *testing.T, finalizers []string, deleting bool) (string, fleet.EphemeralRunner) {
		ns := env.Namespace(t, "arc")
		u := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name, Finalizers: finalizers,
			Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 77}})
		if deleting {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
		}
		return ns, fleet.EphemeralRunner{Namespace: ns, Name: name, UID: string(u.GetUID()), RunnerID: 77}
	}
	finalizersOf := func(t *testing.T, ns string) []string {
		left := env.ARCObject(t, testenv.EphemeralRunners, ns, name)
		require.NotNil(t, left)
		return left.GetFinalizers()
	}

	t.Run("deleting: only the registration finalizer goes, ARC's own stays", func(t *testing.T) {
		ns, er := setup(t, testenv.ARCFinalizers(), true)
		c := newClient(t, Options{})
		got, err := c.DryRun().ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Deleted, got)
		assert.Equal(t, testenv.ARCFinalizers(), finalizersOf(t, ns), "the dry run changed nothing")
		before := c.Counts()
		got, err = c.ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Deleted, got)
		assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, finalizersOf(t, ns))
		assert.Equal(t, int64(2), c.Counts().Sub(before).Requests, "a read and a patch")
	})
	t.Run("the registration finalizer is the only one: the object goes", func(t *testing.T) {
		ns, er := setup(t, []string{testenv.RunnerRegistrationFinalizer}, true)
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Deleted, got)
		assert.Nil(t, env.ARCObject(t, testenv.EphemeralRunners, ns, name))
	})
	t.Run("ARC released it first: nothing to do", func(t *testing.T) {
		ns, er := setup(t, []string{testenv.EphemeralRunnerFinalizer}, true)
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.AlreadyGone, got)
		assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, finalizersOf(t, ns))
	})
	t.Run("gone: nothing to do", func(t *testing.T) {
		_, er := setup(t, nil, true)
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.AlreadyGone, got)
	})
	t.Run("another object under the name: Changed, untouched", func(t *testing.T) {
		ns, er := setup(t, testenv.ARCFinalizers(), true)
		er.UID = string(types.UID("someone-else"))
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Changed, got)
		assert.Equal(t, testenv.ARCFinalizers(), finalizersOf(t, ns))
	})
	t.Run("the finalizer twice: every copy goes, ARC would wait on any one left", func(t *testing.T) {
		ns, er := setup(t, []string{testenv.RunnerRegistrationFinalizer, testenv.EphemeralRunnerFinalizer, testenv.RunnerRegistrationFinalizer}, true)
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Deleted, got)
		assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, finalizersOf(t, ns))
	})
	t.Run("it holds another runner now: the proof was about another, Changed", func(t *testing.T) {
		ns, er := setup(t, testenv.ARCFinalizers(), true)
		er.RunnerID = 78
		got, err := newClient(t, Options{}).ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Changed, got)
		assert.Equal(t, testenv.ARCFinalizers(), finalizersOf(t, ns))
	})
	t.Run("live: refused; as a dry run, allowed and unchanged", func(t *testing.T) {
		ns, er := setup(t, testenv.ARCFinalizers(), false)
		c := newClient(t, Options{})
		_, err := c.ReleaseRegistration(ctx, er)
		require.ErrorContains(t, err, "not being deleted, refusing")
		got, err := c.DryRun().ReleaseRegistration(ctx, er)
		require.NoError(t, err)
		assert.Equal(t, fleet.Deleted, got)
		assert.Equal(t, testenv.ARCFinalizers(), finalizersOf(t, ns))
	})
	t.Run("no UID to hold to: refused without a request", func(t *testing.T) {
		c := newClient(t, Options{})
		_, err := c.ReleaseRegistration(ctx, fleet.EphemeralRunner{Namespace: "ns", Name: name})
		require.Error(t, err)
		assert.Zero(t, c.Counts().Requests)
	})
}
