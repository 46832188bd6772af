package e2e_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// incident is what one verdict test plants: the thing that must go.
type incident struct {
	// key is how its action line is found: the pod's name, or the
	// runner's name for a ghost.
	key string
	// pod is nil for a ghost.
	pod *corev1.Pod
	// reg is the registration that must go with it; ID 0 when none.
	reg ghsim.Runner
}

// neighbours plants what must survive every sweep whatever the incident: a
// healthy runner, a runner GitHub reports busy (offline, too: rule 2 beats
// every GitHub-based verdict), and a stamped pod whose runner is running a
// job, i.e. a live claim.
func neighbours(w *world) (pods []string, regs []ghsim.Runner) {
	regs = append(regs, w.runner("acme-healthy", "online", false))
	w.pod("acme-healthy", testenv.Running())
	regs = append(regs, w.runner("acme-busy", "offline", true))
	w.pod("acme-busy", testenv.Running())
	regs = append(regs, w.runner("acme-claimed", "online", true))
	w.stampedPod("acme-claimed", testenv.Running())
	return []string{"acme-healthy", "acme-busy", "acme-claimed"}, regs
}

// One test per incident of docs/design.md's verdict table, each through separate
// processes that share nothing but the ledger ConfigMap: a GitHub-based
// verdict is only marked by the first sweep, is still held by a sweep
// before confirm-after, and acts on the first sweep after it; a terminal pod
// goes at once, on the kubelet's word alone. The neighbours are never
// touched, and nothing but the incident is deleted on either side.
func TestVerdictIncidents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		extra map[string]string
		plant func(w *world) incident
		// between runs after the marking sweep.
		between   func(w *world, inc incident)
		verdict   string
		action    string
		immediate bool
	}{{
		name: "zombie: registration offline while the pod runs",
		plant: func(w *world) incident {
			return incident{key: "acme-zombie", reg: w.runner("acme-zombie", "offline", false), pod: w.pod("acme-zombie", testenv.Running())}
		},
		verdict: "zombie",
		action:  "delete-registration-then-pod",
	}, {
		name: "zombie whose registration vanished after it was marked",
		plant: func(w *world) incident {
			return incident{key: "acme-vanished", reg: w.runner("acme-vanished", "offline", false), pod: w.pod("acme-vanished", testenv.Running())}
		},
		between: func(w *world, inc incident) {
			require.True(t, w.sim.RemoveRunner(scope, inc.reg.ID))
		},
		verdict: "zombie",
		action:  "delete-pod",
	}, {
		name: "unregistered: running past the registration deadline",
		plant: func(w *world) incident {
			p := w.pod("acme-unregistered", testenv.Running())
			time.Sleep(pastDeadline)
			return incident{key: "acme-unregistered", pod: p}
		},
		verdict: "unregistered",
		action:  "delete-pod",
	}, {
		name:  "orphan-stamped: stamped pod, runner online and idle",
		extra: map[string]string{"REAPER_OWNER_STAMP_LABEL": stampLabel},
		plant: func(w *world) incident {
			return incident{key: "acme-stamped", reg: w.runner("acme-stamped", "online", false),
				pod: w.stampedPod("acme-stamped", testenv.Running())}
		},
		verdict: "orphan-stamped",
		action:  "delete-registration-then-pod",
	}, {
		name: "terminal: the runner exited and its registration lingers",
		plant: func(w *world) incident {
			return incident{key: "acme-done", reg: w.runner("acme-done", "offline", false),
				pod: w.pod("acme-done", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})}
		},
		verdict:   "terminal",
		action:    "delete-registration-then-pod",
		immediate: true,
	}, {
		name:  "ghost: an owned offline registration no pod backs",
		extra: map[string]string{"REAPER_GHOST_NAME_PREFIX": "acme-"},
		plant: func(w *world) incident {
			return incident{key: "acme-ghost", reg: w.runner("acme-ghost", "offline", false)}
		},
		verdict: "ghost",
		action:  "delete-registration",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.extra)
			podNames, regs := neighbours(w)
			inc := tc.plant(w)
			markKey := fleet.RegistrationMarkKey(scope, inc.reg.ID)
			if inc.pod != nil {
				markKey = podMarkKey(inc.pod)
			}
			gone := func() {
				t.Helper()
				if inc.pod != nil {
					assert.False(t, w.podExists(inc.pod.Name), "the incident's pod is gone")
					assert.Equal(t, 1, w.reapedEvents()[inc.pod.Name], "one RunnerReaped Event on the pod")
				}
				if inc.reg.ID != 0 {
					assert.False(t, w.runnerExists(inc.reg.ID), "the incident's registration is gone")
				}
			}

			first := w.sweep()
			first.requireCode(t, 0)
			if tc.immediate {
				acted := first.actions(t)
				require.Len(t, acted, 1)
				line := acted[inc.key]
				require.NotNil(t, line, "action line for %s", inc.key)
				assert.Equal(t, tc.verdict, line["verdict"])
				assert.Equal(t, tc.action, line["action"])
				assert.Equal(t, "deleted", line["result"])
				assert.Equal(t, "deleted", line["registration_result"])
				assert.Equal(t, "deleted", line["pod_result"])
				assert.Equal(t, false, line["dry_run"])
				gone()
			} else {
				assert.Empty(t, first.msg("action"), "a GitHub-based verdict only marks on its first sight")
				s := first.summary(t)
				assert.Equal(t, map[string]any{tc.verdict: float64(1)}, s["verdicts"])
				assert.Equal(t, map[string]any{"pending-confirmation": float64(1)}, s["results"])
				m := w.marks()
				require.Contains(t, m, markKey)
				assert.EqualValues(t, tc.verdict, m[markKey].Verdict)
				if inc.pod != nil {
					assert.True(t, w.podExists(inc.pod.Name))
				}
				if inc.reg.ID != 0 {
					assert.True(t, w.runnerExists(inc.reg.ID))
				}
			}

			if tc.between != nil {
				tc.between(w, inc)
			}
			if !tc.immediate {
				firstSeen := w.marks()[markKey].FirstSeen
				early := w.sweep()
				early.requireCode(t, 0)
				// Only a sweep that certainly ran before the mark
				// matured proves the hold; on a machine slow enough
				// to have let it mature, there is nothing to check.
				if time.Now().Before(firstSeen.Add(confirmAfter)) {
					assert.Empty(t, early.msg("action"), "not before confirm-after")
					assert.Contains(t, w.marks(), markKey, "the mark is held while it matures")
					if inc.pod != nil {
						assert.True(t, w.podExists(inc.pod.Name))
					}
				} else {
					t.Logf("the early sweep ended after the mark matured; its hold is not checked")
				}
			}

			time.Sleep(pastConfirm)
			final := w.sweep()
			final.requireCode(t, 0)
			if tc.immediate {
				assert.Empty(t, final.msg("action"), "nothing is left to do")
			} else {
				acted := final.actions(t)
				require.Len(t, acted, 1, "only the incident acts; stdout:\n%s", final.Stdout)
				line := acted[inc.key]
				require.NotNil(t, line, "action line for %s", inc.key)
				assert.Equal(t, tc.verdict, line["verdict"])
				assert.Equal(t, tc.action, line["action"])
				assert.Equal(t, "deleted", line["result"])
				assert.Equal(t, false, line["dry_run"])
				assert.Equal(t, scope, line["scope"])
				assert.NotEmpty(t, line["evidence"])
				assert.Greater(t, line["mark_age_seconds"], confirmAfter.Seconds()-0.001)
				if inc.pod != nil {
					assert.Equal(t, inc.pod.Name, line["pod"])
					assert.Equal(t, w.ns, line["namespace"])
					assert.Equal(t, "deleted", line["pod_result"])
				} else {
					assert.Equal(t, "", line["pod"])
				}
				if inc.reg.ID != 0 && tc.action != "delete-pod" {
					assert.EqualValues(t, inc.reg.ID, line["runner_id"])
					assert.Equal(t, "deleted", line["registration_result"])
				}
				if tc.between != nil { // the vanished zombie
					assert.Equal(t, true, line["registration_gone"])
					found := false
					for _, q := range w.requests(ghsim.EndpointList) {
						found = found || strings.Contains(q.Query, "name="+inc.key)
					}
					assert.True(t, found, "the absence was re-checked by name right before the pod went")
				}
				gone()
				assert.Empty(t, w.marks(), "the acted mark is cleared")
			}

			// Nothing else was touched, on either side.
			for _, name := range podNames {
				assert.True(t, w.podExists(name), "neighbour pod %s survives", name)
				assert.Zero(t, w.reapedEvents()[name], "no Event on neighbour %s", name)
			}
			for _, r := range regs {
				assert.True(t, w.runnerExists(r.ID), "neighbour registration %s survives", r.Name)
			}
			var deletes []string
			for _, q := range w.requests(ghsim.EndpointDelete) {
				deletes = append(deletes, q.Path)
			}
			if inc.reg.ID != 0 && tc.action != "delete-pod" {
				assert.Len(t, deletes, 1, "only the incident's registration is deleted")
			} else {
				assert.Empty(t, deletes)
			}
		})
	}
}

// Every row of docs/design.md's exit fingerprint table, as a terminal pod the
// kubelet left: one sweep logs each pod's exit (class, code, signal,
// reason) on its action line, records the RunnerReaped Event while the pod
// still exists to point at, and removes the pod. The fingerprint is the one
// datum that explains a "lost communication" failure, so it must be on the
// line of the run that destroys it.
func TestExitFingerprints(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	cases := map[string]struct {
		st       testenv.PodState
		class    string
		code     int
		signal   int
		reason   string
		fromLast bool
	}{
		"acme-clean":    {testenv.PodState{Phase: corev1.PodSucceeded, Terminated: testenv.Terminated(0, 0, "Completed")}, "clean", 0, 0, "Completed", false},
		"acme-oom":      {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}, "oom-host", 137, 0, "OOMKilled", false},
		"acme-sigkill":  {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "Error")}, "sigkill", 137, 0, "Error", false},
		"acme-143":      {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(143, 0, "Error")}, "sigterm", 143, 0, "Error", false},
		"acme-signal15": {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 15, "Error")}, "sigterm", 1, 15, "Error", false},
		"acme-outdated": {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(7, 0, "Error")}, "outdated", 7, 0, "Error", false},
		"acme-crash":    {testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(139, 0, "Error")}, "crash", 139, 0, "Error", false},
		"acme-laststate": {testenv.PodState{Phase: corev1.PodFailed, LastTerminated: testenv.Terminated(137, 0, "OOMKilled")},
			"oom-host", 137, 0, "OOMKilled", true},
		"acme-nostatus": {testenv.PodState{Phase: corev1.PodFailed, NoStatus: true}, "unknown", 0, 0, "", false},
		// The runner container died, the pod still says Running.
		"acme-inrunning": {testenv.PodState{Phase: corev1.PodRunning, Terminated: testenv.Terminated(1, 0, "Error")}, "crash", 1, 0, "Error", false},
	}
	for name, tc := range cases {
		w.pod(name, tc.st)
	}

	r := w.sweep()
	r.requireCode(t, 0)
	acted := r.actions(t)
	assert.Len(t, acted, len(cases))
	events := w.reapedEvents()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			line := acted[name]
			require.NotNil(t, line, "action line for %s", name)
			assert.Equal(t, "terminal", line["verdict"])
			assert.Equal(t, "delete-pod", line["action"], "no registration was listed for it")
			assert.Equal(t, "deleted", line["result"])
			assert.Equal(t, tc.class, line["exit_class"])
			assert.EqualValues(t, tc.code, line["exit_code"])
			assert.EqualValues(t, tc.signal, line["signal"])
			assert.Equal(t, tc.reason, line["reason"])
			assert.Equal(t, tc.fromLast, line["exit_from_last_state"])
			if tc.class == "unknown" {
				assert.Contains(t, line["evidence"], "no runner container status")
			}
			assert.Equal(t, 1, events[name], "the Event was recorded before the pod went")
			assert.False(t, w.podExists(name))
		})
	}
	s := r.summary(t)
	assert.Equal(t, map[string]any{"terminal": float64(len(cases))}, s["verdicts"])
	assert.Equal(t, map[string]any{"deleted": float64(len(cases))}, s["results"])
}

// Ghosts are judged only among the registrations this deployment owns (here
// by name prefix): an owned offline registration with no pod is removed
// after confirmation, by a registration delete alone; one named otherwise
// (another team's), an online one and a busy one are never touched, nor
// even marked.
func TestGhostsOnlyOwnedOfflineIdle(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_GHOST_NAME_PREFIX": "acme-"})
	ghost := w.runner("acme-gone-7", "offline", false)
	spared := []ghsim.Runner{
		w.runner("build-box-7", "offline", false),
		w.runner("other-acme-3", "offline", false),
		w.runner("acme-online", "online", false),
		w.runner("acme-busy-offline", "offline", true),
	}

	first := w.sweep()
	first.requireCode(t, 0)
	assert.Empty(t, first.msg("action"))
	assert.Equal(t, []string{fleet.RegistrationMarkKey(scope, ghost.ID)}, keys(w.marks()), "only the owned ghost is marked")

	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)
	acted := second.actions(t)
	require.Len(t, acted, 1)
	line := acted["acme-gone-7"]
	require.NotNil(t, line)
	assert.Equal(t, "ghost", line["verdict"])
	assert.Equal(t, "delete-registration", line["action"])
	assert.Equal(t, "deleted", line["result"])
	assert.Equal(t, "deleted", line["registration_result"])
	assert.EqualValues(t, ghost.ID, line["runner_id"])
	assert.False(t, w.runnerExists(ghost.ID))

	third := w.sweep()
	third.requireCode(t, 0)
	assert.Empty(t, third.msg("action"))
	assert.Empty(t, w.marks())
	for _, r := range spared {
		assert.True(t, w.runnerExists(r.ID), "%s is never touched", r.Name)
	}
	deletes := w.requests(ghsim.EndpointDelete)
	require.Len(t, deletes, 1, "one registration delete in all three sweeps")
	assert.True(t, strings.HasSuffix(deletes[0].Path, "/"+strconv.FormatInt(ghost.ID, 10)), deletes[0].Path)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
