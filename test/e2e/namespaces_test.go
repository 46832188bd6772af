package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// A misspelt REAPER_NAMESPACES entry lists no pods, exactly like an empty
// namespace. Seen as empty, it made the offline
// registration of a real pod that lives elsewhere look like a ghost, and the
// second sweep deleted it. Now the namespace is not observed: each sweep
// warns naming it, makes no ghost verdict, and exits 3, however long the
// registration stays offline.
func TestMisspeltNamespaceInventsNoGhost(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_GHOST_NAME_PREFIX": "acme-"})
	misspelt := w.ns + "-misspelt"
	w.env["REAPER_NAMESPACES"] = misspelt
	// The pod lives in the world's namespace, which is not configured.
	reg := w.runner("acme-runner", "offline", false)
	w.pod("acme-runner", testenv.Running())

	runs := []run{w.sweep(), sweepAfter(w, pastConfirm)}
	// What matters most first: confirm-after has passed, so a ghost
	// verdict would have deleted the registration by now.
	assert.True(t, w.runnerExists(reg.ID), "the real pod's registration is kept")
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	assert.True(t, w.podExists("acme-runner"))
	for i, r := range runs {
		assert.Equal(t, 3, r.Code, "sweep %d exits 3; stdout:\n%s", i, r.Stdout)
		warned := r.msg("namespace not observed")
		require.Len(t, warned, 1, "sweep %d", i)
		assert.Equal(t, "WARN", warned[0]["level"])
		assert.Equal(t, misspelt, warned[0]["namespace"])
		assert.Contains(t, warned[0]["reason"], "does not exist")
		assert.Equal(t, "namespace not observed", r.Logs[0]["msg"], "the warning comes first")
		assert.Empty(t, r.msg("action"), "sweep %d: no ghost verdict", i)
		s := r.summary(t)
		assert.Equal(t, []any{misspelt}, s["namespaces_unobserved"])
		assert.EqualValues(t, 3, s["status"])
	}
}

// With a real namespace and a misspelt one configured, the real namespace's
// pods are judged as usual (a terminal pod goes at once, a zombie after
// confirm-after), while an offline registration that no observed pod backs
// is not judged a ghost: the misspelt namespace could hold its pod. Every
// sweep exits 3 and names the misspelt namespace.
func TestMisspeltNamespaceBesideARealOne(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_GHOST_NAME_PREFIX": "acme-"})
	misspelt := w.ns + "-misspelt"
	w.env["REAPER_NAMESPACES"] = w.ns + "," + misspelt
	zombie := w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())
	unbacked := w.runner("acme-unbacked", "offline", false)
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

	first := w.sweep()
	second := sweepAfter(w, pastConfirm)
	assert.True(t, w.runnerExists(unbacked.ID), "no ghost while a namespace is unobserved")

	assert.Equal(t, 3, first.Code, "stdout:\n%s", first.Stdout)
	require.Len(t, first.msg("namespace not observed"), 1)
	assert.Equal(t, misspelt, first.msg("namespace not observed")[0]["namespace"])
	acted := first.actions(t)
	require.Len(t, acted, 1, "stdout:\n%s", first.Stdout)
	assert.Equal(t, "terminal", acted["acme-dead"]["verdict"])
	assert.Equal(t, "deleted", acted["acme-dead"]["result"])
	assert.False(t, w.podExists("acme-dead"))

	assert.Equal(t, 3, second.Code, "stdout:\n%s", second.Stdout)
	require.Len(t, second.msg("namespace not observed"), 1)
	acted = second.actions(t)
	require.Len(t, acted, 1, "only the zombie acts; stdout:\n%s", second.Stdout)
	assert.Equal(t, "zombie", acted["acme-zombie"]["verdict"])
	assert.Equal(t, "deleted", acted["acme-zombie"]["result"])
	assert.False(t, w.podExists("acme-zombie"))
	assert.False(t, w.runnerExists(zombie.ID))
}

// sweepAfter waits d, then sweeps.
func sweepAfter(w *world, d time.Duration) run {
	w.t.Helper()
	time.Sleep(d)
	return w.sweep()
}
