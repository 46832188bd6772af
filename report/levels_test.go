package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// levelled is a sweep with one diagnostic of each level Log writes (a
// skipped scope: WARN; deferred scopes: INFO), an action that went (INFO),
// one that failed (ERROR), and a complete summary (INFO).
func levelled() sweep.Result {
	pod := &fleet.Pod{Namespace: "arc", Name: "acme-dead", RunnerName: "acme-dead"}
	return sweep.Result{Looked: true,
		Status:   sweep.StatusComplete,
		Deferred: []string{"org:later"},
		Class:    reconcile.Classification{Skipped: []reconcile.Skip{{ScopeKey: "org:beta", Reason: "502", Kind: fleet.SkipFailed}}},
		Outcomes: []reap.Outcome{
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod,
				Exit: &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost}}},
				Action: reap.DeletePod, Result: fleet.Deleted, ObjectResult: fleet.Deleted},
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod}},
				Action: reap.DeletePod, Result: fleet.Failed, Err: errors.New("delete pod: 500")},
		},
	}
}

// The action lines and the summary are the product's output and
// are written at every log level, with the level they carry; the level
// filters the diagnostics alone (Log's own warnings and info lines, and any
// other line of the process).
func TestProductLinesAtEveryLevel(t *testing.T) {
	cases := []struct {
		level slog.Level
		diags []string // the diagnostics that pass
	}{
		{slog.LevelDebug, []string{"debug diagnostic", "info diagnostic", "scope skipped", "scopes deferred"}},
		{slog.LevelInfo, []string{"info diagnostic", "scope skipped", "scopes deferred"}},
		{slog.LevelWarn, []string{"scope skipped"}},
		{slog.LevelError, nil},
	}
	for _, c := range cases {
		t.Run(c.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(Diagnostics(c.level, slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: min(c.level, slog.LevelInfo)})))
			ctx := context.Background()
			log.DebugContext(ctx, "debug diagnostic")
			log.InfoContext(ctx, "info diagnostic")
			Log(ctx, log, levelled())
			log.With(slog.String("k", "v")).InfoContext(ctx, "info diagnostic")

			var diags []string
			var product []map[string]any
			for _, l := range decode(t, buf.Bytes()) {
				switch l["msg"] {
				case "action", "sweep":
					product = append(product, l)
				default:
					diags = append(diags, l["msg"].(string))
				}
			}
			want := append([]string(nil), c.diags...)
			if c.level <= slog.LevelInfo {
				want = append(want, "info diagnostic") // the one logged after Log, With
			}
			assert.ElementsMatch(t, want, diags)
			require.Len(t, product, 3, "two action lines and the summary, whatever the level")
			assert.Equal(t, "action", product[0]["msg"])
			assert.Equal(t, "INFO", product[0]["level"])
			assert.EqualValues(t, 137, product[0]["exit_code"])
			assert.Equal(t, "oom-host", product[0]["exit_class"])
			assert.Equal(t, "action", product[1]["msg"])
			assert.Equal(t, "ERROR", product[1]["level"])
			assert.Equal(t, "sweep", product[2]["msg"])
			assert.Equal(t, "INFO", product[2]["level"])
		})
	}
}

// decode is one decoded JSON object per line of b.
func decode(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		lines = append(lines, m)
	}
	return lines
}
