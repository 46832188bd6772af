package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The first scope lists whole, the second
// is rate-limited (403, x-ratelimit-remaining: 0, a reset an hour away).
// The mature zombie of the first scope needs a registration delete, which
// go-github would refuse from memory: it is reported rate-limited with
// until when, not failed, and no delete is sent. The terminal pod without a
// registration goes. The sweep exits 3, promptly, and says until when.
func TestRateLimitExitsThreeAndSaysUntilWhen(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_SCOPES": scope + ",org:beta"})
	w.sim.AddScope("org:beta")
	zombie := w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())
	w.sweep().requireCode(t, 0)
	before := marks(t, w)
	require.Len(t, before, 1)

	w.sim.Fault("org:beta", ghsim.Any, ghsim.Fault{PrimaryLimit: true})
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "Error")})
	time.Sleep(pastConfirm)
	start := time.Now()
	limited := w.sweep()
	limited.requireCode(t, 3)
	assert.Less(t, time.Since(start), 20*time.Second, "no wait for the reset")

	skipped := limited.msg("scope skipped")
	require.Len(t, skipped, 1)
	assert.Equal(t, "org:beta", skipped[0]["scope"])
	assert.Equal(t, "rate-limited", skipped[0]["kind"])
	until, err := time.Parse(time.RFC3339Nano, skipped[0]["until"].(string))
	require.NoError(t, err)
	// GitHub's x-ratelimit-reset: the simulator's hour began with the
	// first sweep's first request.
	assert.True(t, until.After(start) && !until.After(start.Add(time.Hour)), "until %s", until)

	acted := limited.actions(t)
	require.Len(t, acted, 2)
	assert.Equal(t, "rate-limited", acted["acme-zombie"]["result"])
	assert.Equal(t, "INFO", acted["acme-zombie"]["level"], "not an error")
	assert.Equal(t, skipped[0]["until"], acted["acme-zombie"]["until"])
	assert.Equal(t, "deleted", acted["acme-dead"]["result"])
	assert.True(t, w.podExists("acme-zombie"))
	assert.True(t, w.runnerExists(zombie.ID))
	assert.False(t, w.podExists("acme-dead"))
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	assert.Empty(t, w.requests(ghsim.EndpointGet))
	after := marks(t, w)
	require.Len(t, after, 1)
	for key, m := range before {
		assert.Equal(t, m["first_seen"], after[key]["first_seen"], "the zombie's mark stays")
	}

	s := limited.summary(t)
	assert.EqualValues(t, 3, s["status"])
	assert.Equal(t, skipped[0]["until"], s["github_rate_limited_until"])
	assert.NotContains(t, s, "error")

	w.sim.ClearFaults()
	recovered := w.sweep()
	recovered.requireCode(t, 0)
	assert.Equal(t, "deleted", recovered.actions(t)["acme-zombie"]["result"])
}

// marks decodes the ledger's marks.
func marks(t *testing.T, w *world) map[string]map[string]any {
	t.Helper()
	raw, ok := w.marksJSON()
	require.True(t, ok)
	var m map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	return m
}
