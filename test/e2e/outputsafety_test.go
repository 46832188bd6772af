package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// nameAnnotation is where the runner names of TestOutsideTextIsShownNotObeyed
// come from.
const nameAnnotation = "runner.example.com/name"

// forging is what a hostile runner name appends to its own: a line break
// and a carriage return to start a row of its own, tabs to shift columns,
// a row that says there is nothing to do, a CSI that clears the screen and
// one that recolours it, a right-to-left override, and a C1 CSI.
const forging = "\n\rterminal\tarc/forged\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m"

// forgingShown is forging as a person must see it.
const forgingShown = `\n\rterminal\tarc/forged\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m`

// annotate sets the pod's runner-name annotation, as whoever can annotate a
// runner pod can.
func (w *world) annotate(pod, runnerName string) {
	w.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nameAnnotation: runnerName}}})
	require.NoError(w.t, err)
	_, err = env.Client.CoreV1().Pods(w.ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(w.t, err)
}

// assertShownNotObeyed fails on any rune in out that a terminal or a log
// viewer would act on (C0 but the line feed, DEL, C1, the bidirectional
// controls, the separators).
func assertShownNotObeyed(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
			t.Errorf("%s holds a raw %U: %q", what, r, out)
			return
		}
	}
}

// A runner name taken from a pod annotation can hold line breaks,
// tabs, escape sequences, a C1 CSI and a right-to-left override. The audit
// table shows it escaped in its one row and gains no forged row; no raw
// control byte reaches stdout or stderr of the audit or of a sweep; the
// action line and the Event carry the visible escaped form. Before the fix,
// the audit printed the name raw: a forged "nothing to do" row, and a
// cleared, recoloured terminal.
func TestOutsideTextIsShownNotObeyed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_RUNNER_NAME_FROM": "annotation:" + nameAnnotation})
	deadName, zombieName := "acme-dead"+forging, "acme-zombie"+forging
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
	w.annotate("acme-dead", deadName)
	w.pod("acme-zombie", testenv.Running())
	w.annotate("acme-zombie", zombieName)
	w.runner(zombieName, "offline", false)

	audit := w.exec("audit")
	audit.requireCode(t, 0)
	assertShownNotObeyed(t, "the audit's stdout", audit.Stdout)
	assertShownNotObeyed(t, "the audit's stderr", audit.Stderr)
	table := strings.Split(strings.TrimSuffix(audit.Stdout, "\n"), "\n")
	require.Len(t, table, 4, "the header, one row per runner pod, the totals; no forged row:\n%q", audit.Stdout)
	assert.True(t, strings.HasPrefix(table[0], "VERDICT"))
	assert.Regexp(t, `^terminal\s+`+w.ns+`/acme-dead\s+`, table[1])
	assert.Contains(t, table[1], "acme-dead"+forgingShown)
	assert.Regexp(t, `^zombie\s+`+w.ns+`/acme-zombie\s+`, table[2])
	assert.Contains(t, table[2], "acme-zombie"+forgingShown)
	assert.True(t, strings.HasPrefix(table[3], "2 pod(s), 2 finding(s)"), table[3])
	col := strings.Index(table[0], "WOULD")
	assert.True(t, strings.HasPrefix(table[1][col:], "now: delete pod"), "the columns hold: %q", table[1])
	assert.True(t, strings.HasPrefix(table[2][col:], "mark: first seen now"), "the columns hold: %q", table[2])

	first := w.sweep()
	first.requireCode(t, 0)
	assertShownNotObeyed(t, "the sweep's stdout", first.Stdout)
	assertShownNotObeyed(t, "the sweep's stderr", first.Stderr)
	acted := first.actions(t)
	require.Contains(t, acted, "acme-dead")
	assert.Equal(t, "acme-dead"+forgingShown, acted["acme-dead"]["runner_name"])
	assert.Equal(t, "deleted", acted["acme-dead"]["result"])

	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)
	assertShownNotObeyed(t, "the second sweep's stdout", second.Stdout)
	assertShownNotObeyed(t, "the second sweep's stderr", second.Stderr)
	acted = second.actions(t)
	require.Contains(t, acted, "acme-zombie")
	assert.Equal(t, "acme-zombie"+forgingShown, acted["acme-zombie"]["runner_name"])
	assert.Equal(t, "deleted", acted["acme-zombie"]["result"])

	evs, err := env.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	messages := map[string]string{}
	for _, ev := range evs.Items {
		if ev.Reason == "RunnerReaped" {
			messages[ev.InvolvedObject.Name] = ev.Message
		}
	}
	require.Contains(t, messages, "acme-zombie")
	for pod, msg := range messages {
		assertShownNotObeyed(t, "the Event on "+pod, msg)
	}
	assert.Contains(t, messages["acme-zombie"], "acme-zombie"+forgingShown, "the Event names the runner in its escaped form")
}
