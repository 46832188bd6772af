package e2e_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// A quieter log level never deletes without a record. With
// REAPER_LOG_LEVEL=warn or error, the audit still prints its table and its
// summary, and a sweep that deletes a terminal pod (exit 137, OOMKilled)
// still writes the pod's action line, with its exit fingerprint, and the
// summary: they are the product's output, not diagnostics. Before the fix
// both runs wrote nothing at all at these levels but the table.
func TestQuietLogLevelsKeepTheRecord(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"warn", "error"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, map[string]string{"REAPER_LOG_LEVEL": level})
			w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

			audit := w.exec("audit")
			audit.requireCode(t, 0)
			assert.Regexp(t, `(?m)^terminal\s+`+w.ns+`/acme-dead\s.*now: delete pod\s.*\[oom-host\]`, audit.Stdout)
			assert.Equal(t, "audit", audit.summary(t)["mode"], "the audit's summary, on stderr")

			r := w.sweep()
			r.requireCode(t, 0)
			assert.False(t, w.podExists("acme-dead"), "the terminal pod was deleted")
			acted := r.actions(t)
			require.Contains(t, acted, "acme-dead", "the deleted pod's action line; stdout:\n%s", r.Stdout)
			line := acted["acme-dead"]
			assert.Equal(t, "INFO", line["level"])
			assert.Equal(t, "deleted", line["result"])
			assert.EqualValues(t, 137, line["exit_code"])
			assert.Equal(t, "OOMKilled", line["reason"])
			assert.Equal(t, "oom-host", line["exit_class"])
			s := r.summary(t)
			assert.Equal(t, "INFO", s["level"])
			assert.Equal(t, map[string]any{"deleted": 1.0}, s["results"])
		})
	}
}

// The level still filters the diagnostics: at error, a namespace that
// cannot be observed is not warned about, while the summary (a warning
// itself, the sweep being degraded) still names it.
func TestQuietLogLevelFiltersDiagnostics(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_LOG_LEVEL": "error"})
	w.env["REAPER_NAMESPACES"] = w.ns + "," + w.ns + "-absent"
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

	r := w.sweep()
	r.requireCode(t, 3)
	assert.Empty(t, r.msg("namespace not observed"), "a warning is a diagnostic, below error")
	assert.Len(t, r.msg("action"), 1)
	s := r.summary(t)
	assert.Equal(t, "WARN", s["level"])
	assert.Equal(t, []any{w.ns + "-absent"}, s["namespaces_unobserved"])
}
