package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// The Lambda's response and the summary log line carry the same keys and
// values, so one dashboard reads both.
func TestSummaryMatchesTheLogLine(t *testing.T) {
	res := sweep.Result{Looked: true,
		Status: sweep.StatusDegraded,
		Class:  reconcile.Classification{Skipped: []reconcile.Skip{{ScopeKey: "org:acme", Reason: "502"}}},
		Confirmation: reconcile.Confirmation{Candidates: []reconcile.Candidate{
			{Finding: reconcile.Finding{Verdict: fleet.Zombie}}, {Finding: reconcile.Finding{Verdict: fleet.Terminal}}}},
		Outcomes: []reap.Outcome{{Result: fleet.Deleted}},
		GitHub:   httpcount.Counts{Requests: 3, NotModified: 2},
		Kube:     httpcount.Counts{Requests: 4, Bytes: 52_000},
	}
	var buf bytes.Buffer
	Log(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), res)
	var line map[string]any
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &line))

	b, err := json.Marshal(Summary(res))
	require.NoError(t, err)
	var summary map[string]any
	require.NoError(t, json.Unmarshal(b, &summary))
	for k, v := range summary {
		assert.Equal(t, v, line[k], k)
	}
	assert.EqualValues(t, 3, summary["status"])
	assert.Equal(t, map[string]any{"terminal": 1.0, "zombie": 1.0}, summary["verdicts"])
	assert.Equal(t, []any{"org:acme"}, summary["scopes_skipped"])
	assert.EqualValues(t, 2, summary["github_not_modified"])
	assert.EqualValues(t, 4, summary["kube_requests"])
	assert.EqualValues(t, 52_000, summary["kube_bytes"])
}

// An unobserved namespace is warned about before the actions, by name and
// with the reason, and the summary lists it.
func TestUnobservedNamespaceIsWarnedAndSummarised(t *testing.T) {
	res := sweep.Result{Looked: true,
		Status: sweep.StatusDegraded,
		Class: reconcile.Classification{Unobserved: []fleet.UnobservedNamespace{
			{Namespace: "arc-runnres", Reason: "namespace arc-runnres does not exist"}}},
		Outcomes: []reap.Outcome{{Result: fleet.Deleted, Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal}}}},
	}
	lines := logged(t, res)
	require.Len(t, lines, 3)
	assert.Equal(t, "namespace not observed", lines[0]["msg"])
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, "arc-runnres", lines[0]["namespace"])
	assert.Equal(t, "namespace arc-runnres does not exist", lines[0]["reason"])
	assert.Contains(t, lines[0]["effect"], "no ghost verdict")
	assert.Equal(t, "action", lines[1]["msg"])
	assert.Equal(t, "sweep", lines[2]["msg"])
	assert.Equal(t, []any{"arc-runnres"}, lines[2]["namespaces_unobserved"])
	assert.Equal(t, []string{"arc-runnres"}, Summary(res)["namespaces_unobserved"])

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	assert.Contains(t, table.String(), "namespace arc-runnres not observed, no ghost verdicts: namespace arc-runnres does not exist\n")
}

// A scope whose list moved while it was read was judged: an info line, not
// a warning, the summary's scopes_moved (never scopes_skipped), and a line
// of the audit that says what the list proved.
func TestMovedScopeIsJudgedAndSaysSo(t *testing.T) {
	res := sweep.Result{Looked: true, Status: sweep.StatusComplete, Moved: []string{"org:acme"}}
	lines := logged(t, res)
	require.Len(t, lines, 2)
	assert.Equal(t, "runner lists moved while read", lines[0]["msg"])
	assert.Equal(t, "INFO", lines[0]["level"])
	assert.Equal(t, []any{"org:acme"}, lines[0]["scopes"])
	assert.Contains(t, lines[0]["effect"], "look-up by name")
	assert.Equal(t, "sweep", lines[1]["msg"])
	assert.Equal(t, []any{"org:acme"}, lines[1]["scopes_moved"])
	assert.Equal(t, []any{}, lines[1]["scopes_skipped"])

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	assert.Contains(t, table.String(), "scope org:acme judged: its runner list moved while it was read")
	assert.NotContains(t, table.String(), "skipped")
}

// Every ambiguous runner name is a warning of its own, before the
// summary, and the summary counts them and the pods that are not runners.
func TestLogAmbiguitiesAndNotRunners(t *testing.T) {
	res := sweep.Result{Looked: true,
		Status: sweep.StatusComplete,
		Class: reconcile.Classification{
			NotRunner: 2,
			Ambiguities: []reconcile.Ambiguity{
				{ScopeKey: "org:acme", RunnerName: "acme-x", Reason: "runner name claimed by 2 observed pods; no registration is deleted by it",
					Pods: []string{"team-a/acme-x", "team-b/acme-x"}},
				{ScopeKey: "org:acme", RunnerName: "acme-g", Reason: "2 registrations share the name; nothing is deleted by it",
					Registrations: []int64{5, 6}},
			},
		},
	}
	lines := logged(t, res)
	require.Len(t, lines, 3)
	for i, a := range res.Class.Ambiguities {
		l := lines[i]
		assert.Equal(t, "WARN", l["level"])
		assert.Equal(t, "ambiguous runner name", l["msg"])
		assert.Equal(t, a.ScopeKey, l["scope"])
		assert.Equal(t, a.RunnerName, l["runner_name"])
		assert.Equal(t, a.Reason, l["reason"])
	}
	assert.Equal(t, []any{"team-a/acme-x", "team-b/acme-x"}, lines[0]["pods"])
	assert.Equal(t, []any{}, lines[1]["pods"])
	assert.Equal(t, []any{5.0, 6.0}, lines[1]["registration_ids"])
	summary := lines[2]
	assert.Equal(t, "sweep", summary["msg"])
	assert.EqualValues(t, 2, summary["ambiguous_runners"])
	assert.EqualValues(t, 2, summary["not_runner_pods"])
}

// A rate limit says until when: on the skipped scope's warning and the
// audit's skip line, on a held action's line and audit row, and in the
// summary (the latest until).
func TestRateLimitSaysUntilWhen(t *testing.T) {
	until := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	later := until.Add(time.Minute)
	limit := &fleet.RateLimitError{Until: later, Secondary: true, Err: errors.New("429")}
	res := sweep.Result{Looked: true,
		Mode:   sweep.Audit,
		Status: sweep.StatusDegraded,
		Class: reconcile.Classification{Skipped: []reconcile.Skip{
			{ScopeKey: "org:acme", Reason: "403 API rate limit exceeded", Kind: fleet.SkipRateLimited, Until: until},
			{ScopeKey: "org:beta", Reason: "page 2 changed", Kind: fleet.SkipInconsistent},
		}},
		Outcomes: []reap.Outcome{{Result: fleet.RateLimited, Err: fmt.Errorf("no GitHub call this sweep: %w", limit),
			Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, ScopeKey: "org:gamma"}}}},
	}
	lines := logged(t, res)
	require.Len(t, lines, 4)
	assert.Equal(t, "scope skipped", lines[0]["msg"])
	assert.Equal(t, "rate-limited", lines[0]["kind"])
	assert.Equal(t, "2026-03-14T10:00:00Z", lines[0]["until"])
	assert.Equal(t, "inconsistent", lines[1]["kind"])
	assert.NotContains(t, lines[1], "until")
	assert.Equal(t, "rate-limited", lines[2]["result"])
	assert.Equal(t, "INFO", lines[2]["level"])
	assert.Equal(t, "2026-03-14T10:01:00Z", lines[2]["until"])
	assert.Equal(t, "2026-03-14T10:01:00Z", lines[3]["github_rate_limited_until"])

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	assert.Contains(t, table.String(), "rate-limited: no GitHub call this sweep (until 2026-03-14T10:01:00Z)")
	assert.Contains(t, table.String(), "scope org:acme skipped (rate-limited until 2026-03-14T10:00:00Z): 403 API rate limit exceeded\n")
	assert.Contains(t, table.String(), "scope org:beta skipped (inconsistent): page 2 changed\n")
}

// An action line names its object's result for what the object is: a pod's
// under object_result and pod_result, an EphemeralRunner's under
// object_result only; a terminal runner's line says when it ended, and a
// pod's line how old the pod was when the sweep began.
func TestActionLineNamesItsObject(t *testing.T) {
	finished := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	pod := &fleet.Pod{Namespace: "arc", Name: "p", CreatedAt: fleet.StampOf(finished.Add(-90 * time.Minute))}
	er := &fleet.EphemeralRunner{Namespace: "arc", Name: "e"}
	res := sweep.Result{Looked: true, Started: finished.Add(30 * time.Second), Outcomes: []reap.Outcome{
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod,
			Exit: &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost, FinishedAt: finished}}},
			Action: reap.DeletePod, Result: fleet.Deleted, ObjectResult: fleet.Deleted},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.ARCStuckDeleting, EphemeralRunner: er}},
			Action: reap.RemoveFinalizers, Result: fleet.Deleted, ObjectResult: fleet.Deleted},
	}}
	var lines []map[string]any
	for _, m := range logged(t, res) {
		if m["msg"] == "action" {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 2)
	assert.Equal(t, "deleted", lines[0]["object_result"])
	assert.Equal(t, "deleted", lines[0]["pod_result"])
	assert.Equal(t, "2026-11-23T10:00:00Z", lines[0]["exit_finished_at"])
	assert.Equal(t, 5430.0, lines[0]["pod_age_seconds"], "90 minutes and 30 seconds")
	assert.Equal(t, "deleted", lines[1]["object_result"])
	assert.NotContains(t, lines[1], "pod_result", "an EphemeralRunner is not a pod")
	assert.NotContains(t, lines[1], "pod_age_seconds", "an EphemeralRunner has no pod to be old")
}

// The summary says when the ledger's save had to leave marks, list caches
// or records of actions out to fit the backend's limit, and says nothing
// of it otherwise.
func TestSummaryReportsATrimmedLedger(t *testing.T) {
	cases := []struct {
		name string
		trim state.Trim
		want map[string]any // nil: neither key present
	}{
		{"nothing left out", state.Trim{LimitBytes: 100}, nil},
		{"list cache dropped", state.Trim{DroppedLists: 3, LimitBytes: 100},
			map[string]any{"ledger_trimmed_marks": 0.0, "ledger_trimmed_lists": 3.0, "ledger_trimmed_records": 0.0}},
		{"records dropped", state.Trim{DroppedLists: 3, DroppedRecords: 40, LimitBytes: 100},
			map[string]any{"ledger_trimmed_marks": 0.0, "ledger_trimmed_lists": 3.0, "ledger_trimmed_records": 40.0}},
		{"marks dropped", state.Trim{DroppedLists: 2, DroppedRecords: 200, DroppedMarks: 7, LimitBytes: 100},
			map[string]any{"ledger_trimmed_marks": 7.0, "ledger_trimmed_lists": 2.0, "ledger_trimmed_records": 200.0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := sweep.Result{Looked: true, Status: sweep.StatusComplete, LedgerTrim: c.trim}
			var buf bytes.Buffer
			Log(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), res)
			var line map[string]any
			require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line))
			b, err := json.Marshal(Summary(res))
			require.NoError(t, err)
			var summary map[string]any
			require.NoError(t, json.Unmarshal(b, &summary))
			for _, got := range []map[string]any{line, summary} {
				if c.want == nil {
					assert.NotContains(t, got, "ledger_trimmed_marks")
					assert.NotContains(t, got, "ledger_trimmed_lists")
					assert.NotContains(t, got, "ledger_trimmed_records")
					continue
				}
				for k, v := range c.want {
					assert.Equal(t, v, got[k], k)
				}
			}
		})
	}
}

// logged is what Log writes for res, one decoded JSON object per line.
func logged(t *testing.T, res sweep.Result) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	Log(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), res)
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		lines = append(lines, m)
	}
	return lines
}

// A time written on the API server's clock can read a moment after the
// sweep's now (the two agree to within refclock.Tolerance): an age is never
// negative.
func TestAgesAreNeverNegative(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	pod := &fleet.Pod{Namespace: "arc", Name: "p", CreatedAt: fleet.StampOf(now.Add(time.Second))}
	res := sweep.Result{Looked: true, Started: now, Outcomes: []reap.Outcome{
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod},
			Mark: fleet.Mark{Verdict: fleet.Zombie, FirstSeen: now.Add(1500 * time.Millisecond)}},
			Action: reap.DeletePod, Result: fleet.Deleted, ObjectResult: fleet.Deleted},
	}}
	for _, m := range logged(t, res) {
		if m["msg"] == "action" {
			assert.Equal(t, 0.0, m["pod_age_seconds"])
			assert.Equal(t, 0.0, m["mark_age_seconds"])
		}
	}
	rows := Rows(res)
	require.Len(t, rows, 1)
	assert.Equal(t, 0.0, rows[0].AgeSeconds)
}

// An audit that could not look (an API server that cannot be reached)
// prints no table, neither empty rows nor "0 finding(s)", but one plain
// line that says what it could not reach and why; as JSON, an error object,
// never an empty list.
func TestAuditThatCouldNotLookShowsNothing(t *testing.T) {
	res := sweep.Result{Status: sweep.StatusFailed, Err: errors.New(`observe pods: Get "https://10.0.0.1:6443/api/v1/pods": dial tcp 10.0.0.1:6443: connect: connection refused`)}
	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	assert.Equal(t, "audit could not look, so it shows nothing: observe pods: Get \"https://10.0.0.1:6443/api/v1/pods\": dial tcp 10.0.0.1:6443: connect: connection refused\n", table.String())
	assert.NotContains(t, table.String(), "finding(s)")

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, res))
	var got map[string]string
	require.NoError(t, json.Unmarshal(js.Bytes(), &got), js.String())
	assert.Contains(t, got["error"], "connection refused")
}

// The audit shows a reap loop: a line below the table naming the group,
// how often and for what it was reaped, and what to fix; and each row of
// a looping group says so, in the table's JSON too. A loop-held runner
// says why it waits.
func TestAuditShowsReapLoops(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	broken := fleet.GroupOf(fleet.GroupScaleSet, "arc", "broken")
	healthy := fleet.GroupOf(fleet.GroupScaleSet, "arc", "healthy")
	pod := func(name string, g fleet.Group) *fleet.Pod {
		return &fleet.Pod{Namespace: "arc", Name: name, CreatedAt: fleet.StampOf(now.Add(-time.Hour)), Group: g}
	}
	res := sweep.Result{Mode: sweep.Audit, Looked: true, Started: now,
		Outcomes: []reap.Outcome{
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.NeverStarted, Pod: pod("broken-1", broken)}}, Result: fleet.WouldDelete, Action: reap.DeletePod},
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.NeverStarted, Pod: pod("broken-2", broken)}}, Result: fleet.LoopHeld, Action: reap.DeletePod},
			{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod("healthy-1", healthy)}}, Result: fleet.WouldDelete, Action: reap.DeletePod},
		},
		Loops: []loops.Loop{{Group: broken, Count: 6, Fingerprint: "ImagePullBackOff", Verdict: "never-started",
			First: now.Add(-25 * time.Minute), Last: now.Add(-time.Minute), Fix: loops.Fix("ImagePullBackOff")}},
	}
	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, res))
	assert.Contains(t, table.String(), "reap loop: AutoscalingRunnerSet arc/broken reaped 6 times for ImagePullBackOff, from 2026-11-23T09:35:00Z to 2026-11-23T09:59:00Z: the runner image cannot be pulled: check the image name and pull secret\n")
	assert.Contains(t, table.String(), "loop-held: its group is in a reap loop, one action a sweep")

	rows := Rows(res)
	require.Len(t, rows, 3)
	assert.Equal(t, "AutoscalingRunnerSet arc/broken", rows[0].Group)
	assert.Equal(t, "ImagePullBackOff: the runner image cannot be pulled: check the image name and pull secret", rows[0].Loop)
	assert.Equal(t, rows[0].Loop, rows[1].Loop)
	assert.Equal(t, "AutoscalingRunnerSet arc/healthy", rows[2].Group)
	assert.Empty(t, rows[2].Loop, "another group's row says no loop")

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, res))
	assert.Contains(t, js.String(), `"loop": "ImagePullBackOff: the runner image cannot be pulled: check the image name and pull secret"`)
}
