package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Safety rule 4 as an operator lives through it: GitHub invalidates every
// registration of a scope at once. The first sweep reaps nothing and says so
// loudly; once confirm-after has passed, each sweep (each a fresh process)
// reaps at most REAPER_MAX_ACTIONS and defers the rest, so the fleet drains
// at a bounded rate: 4, 4, 4, then nothing.
func TestMassInvalidationDrainsAtTheBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_MAX_ACTIONS": "4", "REAPER_MAX_FRACTION": "1"})
	const fleet = 12
	for i := 0; i < fleet; i++ {
		name := fmt.Sprintf("acme-z-%02d", i)
		w.runner(name, "offline", false)
		w.pod(name, testenv.Running())
	}
	ok := w.runner("acme-ok", "online", false)
	w.pod("acme-ok", testenv.Running())

	first := w.sweep()
	first.requireCode(t, 0)
	assert.Empty(t, first.msg("action"), "nothing is reaped on first sight, however many")
	alarms := first.msg("mass suspicion")
	require.Len(t, alarms, 1)
	assert.Equal(t, "WARN", alarms[0]["level"])
	assert.Equal(t, scope, alarms[0]["scope"])
	assert.EqualValues(t, fleet, alarms[0]["newly_suspect"])
	assert.EqualValues(t, fleet+1, alarms[0]["pods"])
	assert.Equal(t, "mass suspicion", first.Logs[0]["msg"], "the warning comes first")
	assert.Len(t, w.marks(), fleet)

	time.Sleep(pastConfirm)
	var deleted, deferred, left []int
	for i := 0; i < 4; i++ {
		r := w.sweep()
		r.requireCode(t, 0)
		assert.Empty(t, r.msg("mass suspicion"), "marks already seen are not newly suspect")
		res := r.results()
		deleted = append(deleted, res["deleted"])
		deferred = append(deferred, res["deferred"])
		left = append(left, w.podCount()-1)
	}
	assert.Equal(t, []int{4, 4, 4, 0}, deleted)
	assert.Equal(t, []int{8, 4, 0, 0}, deferred, "what the bound holds back is reported and kept marked")
	assert.Equal(t, []int{8, 4, 0, 0}, left)
	assert.True(t, w.podExists("acme-ok"))
	regs := w.sim.Runners(scope)
	require.Len(t, regs, 1)
	assert.Equal(t, ok.ID, regs[0].ID)
	assert.Empty(t, w.marks())
}

// podCount counts the pods left in the world's namespace.
func (w *world) podCount() int {
	w.t.Helper()
	l, err := env.Client.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	return len(l.Items)
}

// Safety rules 1 and 3: a scope whose list failed (5xx, timeout), was
// rate-limited (primary or secondary) or contradicts itself (a runner
// listed twice) yields no verdict for its pods; the zombie's mature mark is neither confirmed nor
// cleared (the ledger's marks.json is byte-identical before and after), and
// the run exits 3. A terminal pod still goes: the kubelet's word needs no
// list. Once the list reads whole again, the held mark acts at once.
func TestScopeFaultHoldsMarks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault ghsim.Fault
		extra map[string]string
	}{
		{"500", ghsim.Fault{Status: 500}, nil},
		{"primary rate limit", ghsim.Fault{PrimaryLimit: true}, nil},
		{"secondary rate limit 429", ghsim.Fault{Secondary: 429}, nil},
		{"a runner listed twice", ghsim.Fault{RepeatItems: 1}, nil},
		// The hang ends as soon as the client gives up, so it costs
		// the test only the timeout.
		{"timeout", ghsim.Fault{Hang: time.Minute}, map[string]string{"REAPER_GITHUB_TIMEOUT": "2s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.extra)
			zombie := w.runner("acme-zombie", "offline", false)
			zpod := w.pod("acme-zombie", testenv.Running())
			healthy := w.runner("acme-healthy", "online", false)
			w.pod("acme-healthy", testenv.Running())

			first := w.sweep()
			first.requireCode(t, 0)
			before, ok := w.marksJSON()
			require.True(t, ok)
			require.Contains(t, before, podMarkKey(zpod))

			w.sim.Fault(scope, ghsim.EndpointList, tc.fault)
			w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "Error")})
			time.Sleep(pastConfirm) // the mark is mature: only the fault holds it
			faulted := w.sweep()
			faulted.requireCode(t, 3)
			skipped := faulted.msg("scope skipped")
			require.Len(t, skipped, 1)
			assert.Equal(t, scope, skipped[0]["scope"])
			assert.NotEmpty(t, skipped[0]["reason"])
			assert.Equal(t, "scope skipped", faulted.Logs[0]["msg"], "the warning comes first")
			s := faulted.summary(t)
			assert.Equal(t, []any{scope}, s["scopes_skipped"])
			assert.EqualValues(t, 3, s["status"])
			assert.EqualValues(t, 1, s["marks_held"])
			assert.EqualValues(t, 0, s["marks_cleared"])

			acted := faulted.actions(t)
			require.Len(t, acted, 1, "only the terminal pod acts; stdout:\n%s", faulted.Stdout)
			require.Contains(t, acted, "acme-dead")
			assert.Equal(t, "terminal", acted["acme-dead"]["verdict"])
			assert.Equal(t, "deleted", acted["acme-dead"]["result"])
			assert.False(t, w.podExists("acme-dead"))

			after, _ := w.marksJSON()
			assert.Equal(t, before, after, "marks neither confirmed nor cleared")
			assert.True(t, w.podExists("acme-zombie"), "no verdict from a list that was not read whole")
			assert.True(t, w.runnerExists(zombie.ID))
			assert.Empty(t, w.requests(ghsim.EndpointDelete))

			w.sim.ClearFaults()
			recovered := w.sweep()
			recovered.requireCode(t, 0)
			acted = recovered.actions(t)
			require.Len(t, acted, 1)
			require.Contains(t, acted, "acme-zombie")
			assert.Equal(t, "zombie", acted["acme-zombie"]["verdict"])
			assert.Equal(t, "deleted", acted["acme-zombie"]["result"])
			assert.False(t, w.podExists("acme-zombie"))
			assert.False(t, w.runnerExists(zombie.ID))
			assert.True(t, w.podExists("acme-healthy"))
			assert.True(t, w.runnerExists(healthy.ID))
		})
	}
}

// Safety rule 2 against GitHub's documented lag: the runner takes a job
// between two sweeps, but the list still reads it idle (and offline), so
// the zombie verdict stands and the mark matures. The registration delete
// meets the job and GitHub answers 422: the pod survives, no Event is
// recorded, the line says spared-busy, and the mark is cleared. A busy:false
// reading alone is never trusted.
func TestBusyLagSparesThePod(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	z := w.runner("acme-zombie", "offline", false)
	zpod := w.pod("acme-zombie", testenv.Running())
	w.runner("acme-healthy", "online", false)
	w.pod("acme-healthy", testenv.Running())

	w.sweep().requireCode(t, 0)
	require.Contains(t, w.marks(), podMarkKey(zpod))

	require.True(t, w.sim.SetRunner(scope, z.ID, func(r *ghsim.Runner) { r.Busy, r.ListedIdle = true, true }))
	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)
	acted := second.actions(t)
	require.Len(t, acted, 1)
	line := acted["acme-zombie"]
	require.NotNil(t, line)
	assert.Equal(t, "zombie", line["verdict"])
	assert.Equal(t, "spared-busy", line["result"])
	assert.Equal(t, "busy", line["registration_result"])
	assert.NotContains(t, line, "pod_result", "the pod was never deleted")

	deletes := w.requests(ghsim.EndpointDelete)
	require.Len(t, deletes, 1)
	assert.Equal(t, 422, deletes[0].Status)
	assert.True(t, w.podExists("acme-zombie"))
	assert.True(t, w.runnerExists(z.ID))
	assert.Zero(t, w.reapedEvents()["acme-zombie"])
	assert.NotContains(t, w.marks(), podMarkKey(zpod), "the mark is cleared")
}

// Safety rule 5 where a leak is likeliest: GitHub refuses the token (401),
// the log level is debug, and the errors that travel into the log lines come
// straight from the HTTP client. Neither the token sent nor the one the
// simulator expects may appear; exec checks every other run the same way.
func TestTokenNeverLogged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_LOG_LEVEL": "debug"})
	sent := "ghp_wrong_" + randomHex(t)
	w.env["REAPER_GITHUB_TOKEN"] = sent
	w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})

	for _, args := range [][]string{{"sweep"}, {"sweep", "--dry-run"}, {"audit"}, {"audit", "--output", "json"}} {
		r := w.exec(args...)
		r.requireCode(t, 3)
		assertNoSecret(t, sent, r.Run)
		assert.NotContains(t, r.Stdout+r.Stderr, strings.TrimPrefix(sent, "ghp_"), "not even partly")
		require.NotEmpty(t, r.msg("scope skipped"), "the 401 is reported, without the token")
		assert.Contains(t, r.msg("scope skipped")[0]["reason"], "401")
	}
	for _, q := range w.sim.Requests() {
		assert.Equal(t, 401, q.Status)
	}
}
