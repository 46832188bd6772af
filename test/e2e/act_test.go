package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// A word the command does not take is refused with exit 2
// and the usage, wherever it stands; before the fix, `sweep extra-arg
// --dry-run` ran a real, deleting sweep, because flag parsing stopped at
// the stray word and --dry-run was never read. Flags are read wherever
// they stand.
func TestStrayArgumentsExitTwo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	dead := w.runner("acme-dead", "offline", false)
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
	untouched := func(what string) {
		t.Helper()
		assert.True(t, w.podExists("acme-dead"), "%s: nothing deleted", what)
		assert.True(t, w.runnerExists(dead.ID), "%s: no registration deleted", what)
		assert.Empty(t, w.requests(ghsim.EndpointDelete), "%s: no GitHub delete", what)
		assert.Empty(t, w.reapedEvents(), "%s: no Event", what)
	}

	for _, args := range [][]string{
		{"sweep", "extra-arg", "--dry-run"},
		{"sweep", "--dry-run", "extra"},
		{"--dry-run", "sweep", "extra"},
		{"audit", "now"},
	} {
		r := w.exec(args...)
		r.requireCode(t, 2)
		assert.Contains(t, r.Stderr, "unexpected argument", "%v", args)
		assert.Contains(t, r.Stderr, "usage:", "%v", args)
		assert.Empty(t, r.Stdout, "%v", args)
		assert.Empty(t, w.sim.Requests(), "%v: GitHub was never asked", args)
		_, exists := w.marksJSON()
		assert.False(t, exists, "%v: no ledger written", args)
		untouched(strings.Join(args, " "))
	}

	// Flags after the command, and before it, still work.
	for _, args := range [][]string{{"sweep", "--dry-run"}, {"--dry-run", "sweep"}} {
		r := w.exec(args...)
		r.requireCode(t, 0)
		assert.Equal(t, "dry-run", r.summary(t)["mode"], "%v", args)
		acted := r.actions(t)
		require.Contains(t, acted, "acme-dead", "%v", args)
		assert.Equal(t, "would-delete", acted["acme-dead"]["result"], "%v", args)
		untouched(strings.Join(args, " "))
	}
}

// As the operator meets it: the reaper's Role lets it list
// pods but not delete them. Its pre-flight (a server-side dry-run delete)
// is refused, so the registration of the dead runner is not deleted on
// GitHub, no Event is recorded, the pod stays, the action line says why,
// and the sweep exits 1. Before, the registration went first and the pod
// stayed for good.
func TestRefusedPodDeleteDeletesNoRegistration(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	user := "reaper-list-only-" + w.ns
	env.Grant(t, w.ns, "runner-reaper", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "create"}},
	)
	kc, err := env.UserKubeconfig(t.TempDir(), user)
	require.NoError(t, err)
	w.env["KUBECONFIG"] = kc

	dead := w.runner("acme-dead", "offline", false)
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

	for _, args := range [][]string{{"--dry-run"}, {}} {
		r := w.sweep(args...)
		r.requireCode(t, 1)
		line := r.actions(t)["acme-dead"]
		require.NotNil(t, line, "%v: %s", args, r.Stdout)
		assert.Equal(t, "error", line["result"], "%v", args)
		msg, _ := line["error"].(string)
		assert.Contains(t, msg, "the Kubernetes write would be refused, so registration", "%v", args)
		assert.Contains(t, msg, "left alone", "%v", args)
		assert.Contains(t, msg, "forbidden", "%v", args)
		assert.EqualValues(t, 1, r.summary(t)["status"], "%v", args)

		assert.Empty(t, w.requests(ghsim.EndpointDelete), "%v: no registration DELETE reached GitHub", args)
		assert.True(t, w.runnerExists(dead.ID), "%v", args)
		assert.True(t, w.podExists("acme-dead"), "%v", args)
		assert.Empty(t, w.reapedEvents(), "%v: no Event for an action that did not happen", args)
	}
}

// The Lambda with REAPER_DRY_RUN=true (the template's
// default) says so everywhere: the answer's mode and dry_run, every action
// line, and the EMF Mode dimension. Before, the answer said "mode":"sweep",
// "dry_run":false and EMF said Mode=sweep while the actions said dry_run
// true. Nothing is deleted.
func TestLambdaDryRunSaysDryRunEverywhere(t *testing.T) {
	bin, d := lambdaParts(t)
	w := newWorld(t, nil)
	sm, _ := secretsManager(t, w.token)
	table := newTable(t, d)
	dead := w.runner("acme-dead", "offline", false)
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

	e := lambdaEnv(t, w, d, sm, table)
	e["REAPER_DRY_RUN"] = "true"
	em := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 50 * time.Second, Env: e})

	inv := invokeScheduled(t, em)
	summary := answer(t, em, inv)
	assert.Equal(t, "dry-run", summary["mode"], "%s", inv.Response)
	assert.Equal(t, true, summary["dry_run"], "%s", inv.Response)
	assert.Equal(t, map[string]any{"would-delete": 1.0}, summary["results"])

	// The invocation's log: every line the function wrote, all JSON.
	var actions, emf int
	for _, line := range strings.Split(inv.Log, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == "action" {
			actions++
			assert.Equal(t, true, m["dry_run"], line)
		}
		if _, ok := m["_aws"]; ok {
			emf++
			assert.Equal(t, "dry-run", m["Mode"], "the EMF Mode dimension: %s", line)
		}
	}
	assert.Equal(t, 1, actions)
	assert.GreaterOrEqual(t, emf, 1)

	assert.True(t, w.podExists("acme-dead"), "a dry run deletes nothing")
	assert.True(t, w.runnerExists(dead.ID))
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	assert.Empty(t, w.reapedEvents())
}
