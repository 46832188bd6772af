package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
)

const loggerSecret = "ghp_loggerSECRET0123456789"

// terminalSweep is a sweep that deleted one terminal pod (exit 137,
// OOMKilled) whose runner is called runnerName, with a warning before it
// and an error that echoes the token.
func terminalSweep(runnerName string) sweep.Result {
	started := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	pod := &fleet.Pod{Namespace: "arc", Name: "acme-dead", RunnerName: runnerName, CreatedAt: fleet.StampOf(started.Add(-time.Hour))}
	return sweep.Result{
		Mode:    sweep.Act,
		Status:  sweep.StatusComplete,
		Started: started,
		Class:   reconcile.Classification{Unobserved: []fleet.UnobservedNamespace{{Namespace: "arc-x", Reason: "not found"}}},
		Outcomes: []reap.Outcome{{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod,
			Evidence: "pod phase Failed; runner exit oom-host (code 137)",
			Exit:     &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost}}},
			Action: reap.DeletePod, Result: fleet.Deleted, ObjectResult: fleet.Deleted,
			EventErr: errors.New("record event: echoed Bearer " + loggerSecret + " for " + runnerName)}},
	}
}

func lines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%q", l)
		out = append(out, m)
	}
	return out
}

// The process's logger writes the action line and the summary at
// every configured level, warn and error included, and filters only the
// diagnostics; the redactor stays on that path.
func TestLoggerWritesTheRecordAtEveryLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		t.Run(level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			log := Logger(&buf, level, redact.New(loggerSecret))
			log.Info("a diagnostic")
			report.Log(context.Background(), log, terminalSweep("acme-dead"))

			got := map[string][]map[string]any{}
			for _, l := range lines(t, buf.Bytes()) {
				got[l["msg"].(string)] = append(got[l["msg"].(string)], l)
			}
			require.Len(t, got["action"], 1, "the action line, at %s", level)
			require.Len(t, got["sweep"], 1, "the summary, at %s", level)
			a := got["action"][0]
			assert.EqualValues(t, 137, a["exit_code"])
			assert.Equal(t, "oom-host", a["exit_class"])
			assert.Equal(t, "ERROR", a["level"], "an action whose Event failed is an error line")
			assert.Equal(t, "INFO", got["sweep"][0]["level"])
			assert.Equal(t, level <= slog.LevelInfo, len(got["a diagnostic"]) == 1, "an info diagnostic passes only at info and below")
			assert.Equal(t, level <= slog.LevelWarn, len(got["namespace not observed"]) == 1, "a warning passes only at warn and below")
			assert.NotContains(t, buf.String(), loggerSecret)
			assert.Contains(t, a["event_error"], redact.Marker)
		})
	}
}

// An action whose runner name holds a line break, a carriage
// return, a CSI, a right-to-left override and a C1 CSI is written as one
// line whose raw bytes hold none of them; decoded, the name reads in its
// visible escaped form, and an error quoting it is redacted, then escaped.
func TestLoggerEscapesOutsideText(t *testing.T) {
	const name = "acme-x\n\rforged\x1b[2J\u202eevil\u009b31m"
	const escaped = `acme-x\n\rforged\x1b[2J\u202eevil\u009b31m`
	var buf bytes.Buffer
	log := Logger(&buf, slog.LevelInfo, redact.New(loggerSecret))
	report.Log(context.Background(), log, terminalSweep(name))
	log.Warn("a diagnostic "+name, slog.String("reason", name), slog.Any("pods", []string{name}))

	raw := buf.String()
	for _, bad := range []string{"\r", "\x1b", "\u202e", "\u009b"} {
		assert.NotContains(t, raw, bad)
	}
	assert.Equal(t, 4, strings.Count(raw, "\n"), "the warning, the action, the summary, the diagnostic: one line each")
	var action, diag map[string]any
	for _, l := range lines(t, buf.Bytes()) {
		switch l["msg"] {
		case "action":
			action = l
		case "a diagnostic " + escaped:
			diag = l
		}
	}
	require.NotNil(t, action)
	require.NotNil(t, diag, "the message is escaped too")
	assert.Equal(t, escaped, action["runner_name"])
	assert.Equal(t, "record event: echoed Bearer "+redact.Marker+" for "+escaped, action["event_error"])
	assert.Equal(t, escaped, diag["reason"])
	assert.Equal(t, []any{escaped}, diag["pods"])
}
