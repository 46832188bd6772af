package e2e_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Three scopes, one a sweep. Each run lists
// one scope, names the two it left in one info line and in the summary,
// exits 0, and leaves the rotation's position in the ledger ConfigMap, so
// that the next process lists the next scope; a terminal pod of a scope not
// listed still goes on the first run.
func TestScopeCapRotatesAcrossProcesses(t *testing.T) {
	w := newWorld(t, map[string]string{
		"REAPER_SCOPES":               scope + ",org:beta,org:gamma",
		"REAPER_MAX_SCOPES_PER_SWEEP": "1",
	})
	w.sim.AddScope("org:beta")
	w.sim.AddScope("org:gamma")
	env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: "gamma-dead", Org: "gamma",
		PodState: testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}})

	for i, want := range []string{"org:acme", "org:beta", "org:gamma", "org:acme"} {
		w.sim.ResetRequests()
		r := w.sweep()
		r.requireCode(t, 0)
		lists := w.requests(ghsim.EndpointList)
		require.Len(t, lists, 1, "run %d lists one scope", i+1)
		assert.Equal(t, want, lists[0].Scope, "run %d", i+1)

		s := r.summary(t)
		assert.Len(t, s["scopes_deferred"], 2, "run %d", i+1)
		assert.NotContains(t, s["scopes_deferred"], want)
		assert.Equal(t, []any{}, s["scopes_skipped"])
		assert.Empty(t, r.msg("scope skipped"))
		require.Len(t, r.msg("scopes deferred"), 1)

		cm, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
		require.NoError(t, err)
		next := map[string]string{"org:acme": "org:beta", "org:beta": "org:gamma", "org:gamma": "org:acme"}[want]
		assert.Equal(t, next, cm.Data["next-scope"], "run %d leaves the rotation's position in the ledger", i+1)
		if i == 0 {
			assert.False(t, w.podExists("gamma-dead"), "a terminal pod goes though its scope was not listed")
		}
	}
}
