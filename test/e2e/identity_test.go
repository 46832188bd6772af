package e2e_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// ambiguity finds the "ambiguous runner name" warning about a name.
func (r run) ambiguity(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, l := range r.msg("ambiguous runner name") {
		if l["runner_name"] == name {
			assert.Equal(t, "WARN", l["level"])
			assert.Equal(t, scope, l["scope"])
			assert.NotEmpty(t, l["reason"])
			return l
		}
	}
	require.Failf(t, "no ambiguity warning", "for runner name %q in:\n%s", name, r.Stdout)
	return nil
}

// A terminal pod that shares its runner name with a live,
// healthy pod in another namespace of the same scope goes without the
// registration, which may be the live pod's. Before, reaping the dead pod
// deleted the live runner's registration, and later sweeps took the live
// pod as unregistered.
func TestIdentityNamesakeAcrossNamespaces(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	other := env.Namespace(t, "e2e")
	w.env["REAPER_NAMESPACES"] = w.ns + "," + other

	reg := w.runner("acme-shared", "online", false)
	w.pod("acme-shared", testenv.Running())
	env.RunnerPod(t, other, testenv.RunnerPod{Name: "acme-shared", Org: "acme",
		PodState: testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")}})
	// Past the deadline, so that a live pod whose registration went would
	// be judged unregistered by the sweeps below.
	time.Sleep(pastDeadline)

	first := w.sweep()
	first.requireCode(t, 0)
	acts := first.actions(t)
	require.Len(t, acts, 1, "only the dead pod: %v", acts)
	dead := acts["acme-shared"]
	assert.Equal(t, other, dead["namespace"])
	assert.Equal(t, "terminal", dead["verdict"])
	assert.Equal(t, "delete-pod", dead["action"], "no registration action on an ambiguous name")
	assert.Equal(t, "deleted", dead["result"])
	assert.NotContains(t, dead, "registration_result")
	assert.Contains(t, dead["evidence"], `no registration is deleted: runner "acme-shared" is ambiguous`)
	amb := first.ambiguity(t, "acme-shared")
	assert.ElementsMatch(t, []any{w.ns + "/acme-shared", other + "/acme-shared"}, amb["pods"])
	assert.Equal(t, 1, num(t, first.summary(t), "ambiguous_runners"))
	assert.Empty(t, w.requests(ghsim.EndpointDelete), "no registration was deleted")

	assert.False(t, env.PodExists(t, other, "acme-shared"), "the dead pod is gone")
	assert.True(t, w.podExists("acme-shared"), "the live pod stays")
	assert.True(t, w.runnerExists(reg.ID), "the live pod's registration stays")

	// With the dead pod gone the name is the live pod's alone again, and
	// its registration online: it stays, sweep after sweep.
	for range 2 {
		time.Sleep(pastConfirm)
		r := w.sweep()
		r.requireCode(t, 0)
		assert.Empty(t, r.msg("action"))
		assert.Equal(t, 0, num(t, r.summary(t), "ambiguous_runners"))
	}
	assert.True(t, w.podExists("acme-shared"))
	assert.True(t, w.runnerExists(reg.ID))
	assert.Empty(t, w.marks(), "nothing was ever suspect")
}

// One scope's list holds the same name twice, once online
// and busy, once offline. The pod is protected, not judged by the stale
// entry; and two offline registrations of one name are never ghosts.
func TestIdentityDuplicateNamesInTheList(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_GHOST_NAME_PREFIX": "acme-"})
	busy := w.runner("acme-dup", "online", true)
	stale := w.runner("acme-dup", "offline", false)
	twin1 := w.runner("acme-twin", "offline", false)
	twin2 := w.runner("acme-twin", "offline", false)
	w.pod("acme-dup", testenv.Running())

	first := w.sweep()
	first.requireCode(t, 0)
	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)

	for _, r := range []run{first, second} {
		assert.Empty(t, r.msg("action"), "nothing is deleted by a duplicated name")
		s := r.summary(t)
		assert.Equal(t, 1, num(t, s, "protected_busy"), "the pod is protected by its busy namesake registration")
		assert.Equal(t, 2, num(t, s, "ambiguous_runners"))
		dup := r.ambiguity(t, "acme-dup")
		assert.Equal(t, []any{float64(busy.ID), float64(stale.ID)}, dup["registration_ids"])
		assert.Equal(t, []any{w.ns + "/acme-dup"}, dup["pods"])
		twin := r.ambiguity(t, "acme-twin")
		assert.Equal(t, []any{float64(twin1.ID), float64(twin2.ID)}, twin["registration_ids"])
	}
	assert.True(t, w.podExists("acme-dup"))
	for _, reg := range []ghsim.Runner{busy, stale, twin1, twin2} {
		assert.True(t, w.runnerExists(reg.ID), "registration %d %s", reg.ID, reg.Name)
	}
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	assert.Empty(t, w.marks())
}

// A selector of exclusions only would select nearly every
// pod; it is refused before anything is listed.
func TestPodSelectorWithoutPositiveRequirement(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_POD_SELECTOR": "!runners.example.com/ignore"})
	env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: "postgres-0",
		Containers: []corev1.Container{{Name: "postgres", Image: "postgres:16"}},
		PodState:   testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")}})
	for _, args := range [][]string{{"sweep"}, {"sweep", "--dry-run"}, {"audit"}} {
		r := w.exec(args...)
		r.requireCode(t, 2)
		assert.Contains(t, r.Stderr, "REAPER_POD_SELECTOR")
		assert.Contains(t, r.Stderr, "no positive requirement")
		assert.Contains(t, r.Stderr, "example: REAPER_POD_SELECTOR=")
		assert.Empty(t, r.Stdout)
	}
	assert.Empty(t, w.sim.Requests(), "GitHub was never asked")
	assert.True(t, w.podExists("postgres-0"))
}

// A pod the selector matches but that has no runner
// container is never a candidate, Failed or Running past the deadline; it
// is counted as not a runner. A real runner beside it is still judged.
func TestPodsWithoutTheRunnerContainerAreNeverReaped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	postgres := []corev1.Container{{Name: "postgres", Image: "postgres:16"}}
	env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: "postgres-0", Org: "acme", Containers: postgres, PodState: testenv.Running()})
	env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: "postgres-1", Org: "acme", Containers: postgres,
		PodState: testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}})
	w.pod("acme-unregistered", testenv.Running())
	time.Sleep(pastDeadline)

	first := w.sweep()
	first.requireCode(t, 0)
	assert.Empty(t, first.msg("action"))
	assert.Equal(t, 2, num(t, first.summary(t), "not_runner_pods"))
	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)
	acts := second.actions(t)
	require.Len(t, acts, 1, "only the runner: %v", acts)
	assert.Equal(t, "unregistered", acts["acme-unregistered"]["verdict"])
	assert.Equal(t, 2, num(t, second.summary(t), "not_runner_pods"))

	assert.True(t, w.podExists("postgres-0"))
	assert.True(t, w.podExists("postgres-1"))
	assert.False(t, w.podExists("acme-unregistered"))
}

// The registration deadline counts from when the runner
// started, not from when the pod was created; a Running pod whose runner
// container has not started has no verdict yet; and one whose runner
// container waits after a termination (CrashLoopBackOff) is terminal,
// fingerprinted from lastState.
func TestDeadlineCountsFromTheRunnerStart(t *testing.T) {
	t.Parallel()
	const deadline = 4 * time.Second
	w := newWorld(t, map[string]string{"REAPER_REGISTRATION_DEADLINE": deadline.String()})
	pending := w.pod("acme-pending", testenv.PodState{Phase: corev1.PodPending, Waiting: "ErrImagePull"})
	creating := w.pod("acme-creating", testenv.PodState{Waiting: "ContainerCreating"})
	w.pod("acme-crashloop", testenv.PodState{Waiting: "CrashLoopBackOff", LastTerminated: testenv.Terminated(137, 0, "OOMKilled")})
	time.Sleep(deadline + 200*time.Millisecond)

	first := w.sweep()
	first.requireCode(t, 0)
	acts := first.actions(t)
	require.Len(t, acts, 1, "only the crash-looping pod: %v", acts)
	crash := acts["acme-crashloop"]
	assert.Equal(t, "terminal", crash["verdict"])
	assert.Equal(t, "oom-host", crash["exit_class"])
	assert.Equal(t, true, crash["exit_from_last_state"])
	assert.Equal(t, "deleted", crash["result"])
	assert.False(t, w.podExists("acme-crashloop"))
	assert.NotContains(t, w.marks(), podMarkKey(creating), "a runner container still being created has no verdict")

	// Both runners start now, long after their pods were created.
	for _, name := range []string{"acme-pending", "acme-creating"} {
		env.WritePodState(t, w.ns, name, testenv.PodState{Running: true, StartedAt: time.Now()})
	}
	second := w.sweep()
	second.requireCode(t, 0)
	assert.Empty(t, second.msg("action"))
	marks := w.marks()
	assert.NotContains(t, marks, podMarkKey(pending), "not unregistered moments after its runner started")
	assert.NotContains(t, marks, podMarkKey(creating), "not unregistered moments after its runner started")

	// Past the deadline from the runners' start they are unregistered,
	// and the evidence gives the time actually running.
	time.Sleep(deadline + 1200*time.Millisecond)
	audit := w.exec("audit", "--output", "json")
	audit.requireCode(t, 0)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(audit.Stdout), &rows))
	require.Len(t, rows, 2, "%s", audit.Stdout)
	re := regexp.MustCompile(`^runner running for (\S+) \(pod created (\S+) ago\), past the 4s registration deadline`)
	for _, r := range rows {
		assert.Equal(t, "unregistered", r["verdict"])
		m := re.FindStringSubmatch(r["evidence"].(string))
		require.NotNil(t, m, "evidence %q", r["evidence"])
		running, err := time.ParseDuration(m[1])
		require.NoError(t, err)
		age, err := time.ParseDuration(m[2])
		require.NoError(t, err)
		assert.GreaterOrEqual(t, running, deadline)
		assert.GreaterOrEqual(t, age-running, deadline, "the pod waited before its runner started")
	}
}
