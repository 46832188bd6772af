package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// hostile is a runner name as an annotation can hold it: a line break to
// forge a row, a tab to shift a column, a CSI to clear the screen, a
// right-to-left override and a C1 CSI.
const hostile = "acme-x\n\rterminal\tarc/forged\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m"

// hostileEscaped is hostile as a person must see it.
const hostileEscaped = `acme-x\n\rterminal\tarc/forged\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m`

// rawControl finds a byte or rune in s that a terminal would act on: C0
// but the line feed, DEL, C1, the bidirectional controls, the separators.
func rawControl(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029, r == 0xfffd:
			return r, true
		}
	}
	return 0, false
}

func hostileSweep() sweep.Result {
	started := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	dead := &fleet.Pod{Namespace: "arc", Name: "acme-dead", RunnerName: hostile, CreatedAt: fleet.StampOf(started.Add(-time.Hour))}
	zombie := &fleet.Pod{Namespace: "arc", Name: "acme-zombie", RunnerName: hostile, CreatedAt: fleet.StampOf(started.Add(-time.Hour))}
	return sweep.Result{Looked: true,
		Mode:    sweep.Audit,
		Status:  sweep.StatusDegraded,
		Started: started,
		Class: reconcile.Classification{
			Skipped:    []reconcile.Skip{{ScopeKey: "org:beta", Reason: "502 Bad Gateway\n<html>\x1b]0;owned\x07</html>", Kind: fleet.SkipFailed}},
			Unobserved: []fleet.UnobservedNamespace{{Namespace: "arc-x", Reason: "forbidden:\nnamespace \u202eevil"}},
		},
		Observed: sweep.Observed{Pods: 2},
		Outcomes: []reap.Outcome{{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: dead,
			Evidence: "pod phase Failed; reason " + hostile,
			Exit:     &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost}}},
			Action: reap.DeletePod, Result: fleet.WouldDelete}},
		Pending: []reconcile.Candidate{{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: zombie,
			Evidence: "registration offline"}, MatureAt: started.Add(time.Minute), Mark: fleet.Mark{FirstSeen: started}}},
	}
}

// A runner name with a line break, a tab, a CSI, a right-to-left
// override and a C1 CSI adds no row and no column to the audit table, and
// reaches it only in its visible escaped form; so does a skipped scope's
// or an unobserved namespace's reason.
func TestAuditTableEscapesOutsideText(t *testing.T) {
	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, hostileSweep()))
	out := table.String()
	if r, ok := rawControl(out); ok {
		t.Fatalf("the table holds a raw %U:\n%q", r, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 6, "header, two rows, the skipped scope, the unobserved namespace, the totals:\n%s", out)
	assert.True(t, strings.HasPrefix(lines[0], "VERDICT"))
	assert.Regexp(t, `^terminal\s+arc/acme-dead\s+`, lines[1])
	assert.Regexp(t, `^zombie\s+arc/acme-zombie\s+`, lines[2])
	for _, row := range lines[1:3] {
		assert.Contains(t, row, hostileEscaped)
	}
	// The columns line up: each row's WOULD column starts where the
	// header's does, whatever the runner name held.
	col := strings.Index(lines[0], "WOULD")
	assert.True(t, strings.HasPrefix(lines[1][col:], "now: delete pod"), lines[1])
	assert.True(t, strings.HasPrefix(lines[2][col:], "mark: first seen now"), lines[2])
	assert.Equal(t, `scope org:beta skipped (failed): 502 Bad Gateway\n<html>\x1b]0;owned\a</html>`, lines[3])
	assert.Equal(t, `namespace arc-x not observed, no ghost verdicts: forbidden:\nnamespace \u202eevil`, lines[4])
	assert.Equal(t, "2 pod(s), 2 finding(s), 1 ready, 1 waiting for confirmation", lines[5])
}

// The audit's JSON carries the same escaped fields: decoded, a runner name
// reads in its visible escaped form, and the raw bytes hold no rune that
// encoding/json leaves raw (U+202E, the C1 range).
func TestAuditJSONEscapesOutsideText(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, hostileSweep()))
	if r, ok := rawControl(buf.String()); ok {
		t.Fatalf("the JSON holds a raw %U:\n%q", r, buf.String())
	}
	var rows []Row
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rows))
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.Equal(t, hostileEscaped, r.RunnerName)
	}
	assert.Equal(t, "pod phase Failed; reason "+hostileEscaped, rows[0].Evidence)
}

// PlainError keeps a configuration error's one problem a line, however it
// is wrapped, and escapes each problem on its own, so that a line break in
// a variable's name cannot add a problem; any other error becomes one
// escaped, redacted line. Both still unwrap to what they wrap.
func TestPlainError(t *testing.T) {
	const secret = "ghp_plainSECRET0123456789"
	sentinel := errors.New("bad configuration")
	cfg := &config.Error{Problems: []config.Problem{
		{Var: "REAPER_X\n  REAPER_FORGED", What: "is not a variable\x1b[2J"},
		{Var: "REAPER_SCOPES", What: "\u202eorg:acme is bad", Example: "org:acme"},
	}}
	got := PlainError(fmt.Errorf("%w: %w", sentinel, cfg), nil)
	assert.Equal(t, "bad configuration: invalid configuration:\n"+
		`  REAPER_X\n  REAPER_FORGED: is not a variable\x1b[2J`+"\n"+
		`  REAPER_SCOPES: \u202eorg:acme is bad (example: REAPER_SCOPES=org:acme)`, got.Error())
	assert.ErrorIs(t, got, sentinel)
	var back *config.Error
	require.ErrorAs(t, got, &back)

	other := fmt.Errorf("kubernetes: %w", errors.New("server said\nBearer "+secret+"\u009b"))
	got = PlainError(other, redact.New(secret))
	assert.Equal(t, `kubernetes: server said\nBearer [REDACTED]\u009b`, got.Error())
	assert.ErrorIs(t, got, other)

	plain := errors.New("plain")
	assert.Same(t, plain, PlainError(plain, nil))
	assert.NoError(t, PlainError(nil, nil))
}

// A never-started runner's action line and audit row carry what held it
// back, the cluster's reason and message; a message with a line break, an
// escape sequence and a right-to-left override reaches them only made safe,
// and a token in it only redacted, as all outside text does.
func TestNeverStartedCarriesItsWaitMadeSafe(t *testing.T) {
	const secret = "ghp_waitSECRET0123456789"
	started := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	wait := &fleet.StartWait{Reason: "ErrImagePull", Container: "runner",
		Message: "pull access denied\n{\"msg\":\"action\"}\x1b[2J\u202eevil token " + secret}
	pod := &fleet.Pod{Namespace: "arc", Name: "acme-stuck", RunnerName: "acme-stuck", CreatedAt: fleet.StampOf(started.Add(-time.Hour)), StartWait: wait}
	c := reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.NeverStarted, Pod: pod, ScopeKey: "org:acme",
		Evidence: "runner container not started: " + reconcile.StartWaitWords(wait)}}
	res := sweep.Result{Looked: true, Mode: sweep.Audit, Started: started, Observed: sweep.Observed{Pods: 1},
		Outcomes: []reap.Outcome{{Candidate: c, Action: reap.DeletePod, Result: fleet.WouldDelete, DryRun: true}}}

	var buf bytes.Buffer
	log := slog.New(redact.New(secret).Handler(safetext.Handler(slog.NewJSONHandler(&buf, nil))))
	Log(context.Background(), log, res)
	out := buf.String()
	if r, ok := rawControl(out); ok {
		t.Fatalf("the log holds a raw %U:\n%q", r, out)
	}
	assert.NotContains(t, out, secret)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "one action line and the summary:\n%s", out)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	assert.Equal(t, "ErrImagePull", line["wait_reason"])
	assert.Equal(t, "runner", line["wait_container"])
	assert.Equal(t, `pull access denied\n{"msg":"action"}\x1b[2J\u202eevil token [REDACTED]`, line["wait_message"])

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	if r, ok := rawControl(table.String()); ok {
		t.Fatalf("the table holds a raw %U:\n%q", r, table.String())
	}
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	require.Len(t, rows, 3, "header, one row, the totals:\n%s", table.String())
	assert.Regexp(t, `^never-started\s+arc/acme-stuck\s+`, rows[1])
	assert.Contains(t, rows[1], `[ErrImagePull] runner container not started: container "runner" waiting: ErrImagePull ("pull access denied\n`)
}
