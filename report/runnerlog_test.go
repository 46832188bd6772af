package report

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/runnerlog"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

func logOutcomes() sweep.Result {
	pod := func(name string) *fleet.Pod { return &fleet.Pod{Namespace: "ns", Name: name, RunnerName: name} }
	zombie := func(name string) reconcile.Candidate {
		return reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod(name)}}
	}
	noRight := func(name string) *reap.LogRead {
		return &reap.LogRead{Err: fmt.Errorf("read the log of pod ns/%s container runner: %w: pods %q is forbidden", name, fleet.ErrNoLogRight, name)}
	}
	return sweep.Result{Looked: true, Outcomes: []reap.Outcome{
		{Candidate: zombie("busy"), Action: reap.DeleteRegistrationThenPod, Result: fleet.ProtectedJob,
			RunnerLog: &reap.LogRead{Word: runnerlog.Word{Kind: runnerlog.Running, Job: `build\x1b[31m`}}},
		{Candidate: zombie("done"), Action: reap.DeleteRegistrationThenPod, Result: fleet.Deleted,
			RunnerLog: &reap.LogRead{Word: runnerlog.Word{Kind: runnerlog.Completed, Job: "build", Result: "Succeeded"}}},
		{Candidate: zombie("refused-1"), Action: reap.DeleteRegistrationThenPod, Result: fleet.Deleted, RunnerLog: noRight("refused-1")},
		{Candidate: zombie("refused-2"), Action: reap.DeleteRegistrationThenPod, Result: fleet.Deleted, RunnerLog: noRight("refused-2")},
		{Candidate: zombie("gone"), Action: reap.DeleteRegistrationThenPod, Result: fleet.AlreadyGone,
			RunnerLog: &reap.LogRead{Err: errors.New(`pods "gone" not found`)}},
		{Candidate: zombie("unread"), Action: reap.DeleteRegistrationThenPod, Result: fleet.Deleted},
		{Candidate: zombie("trace-cut"), Action: reap.DeleteRegistrationThenPod, Result: fleet.Deleted,
			RunnerLog: &reap.LogRead{Word: runnerlog.Word{Cut: true}}},
		{Candidate: zombie("trace-only"), Action: reap.DeleteRegistrationThenPod, Result: fleet.WouldDelete, RunnerLog: &reap.LogRead{}},
	}}
}

// TestActionLineSaysWhatTheRunnersLogSaid: the line of a runner whose log
// was read says what it said and names the job it named; a log that could
// not be read says why; a runner whose log was not read gets none of it.
func TestActionLineSaysWhatTheRunnersLogSaid(t *testing.T) {
	lines := map[string]map[string]any{}
	var warnings []map[string]any
	for _, m := range logged(t, logOutcomes()) {
		switch m["msg"] {
		case "action":
			lines[m["pod"].(string)] = m
		case "runner logs not readable":
			warnings = append(warnings, m)
		}
	}
	require.Len(t, lines, 8)
	assert.Equal(t, "running", lines["busy"]["runner_log"])
	assert.Equal(t, `build\x1b[31m`, lines["busy"]["job_name"])
	assert.Equal(t, "protected-job", lines["busy"]["result"])
	assert.Equal(t, "completed", lines["done"]["runner_log"])
	assert.Equal(t, "Succeeded", lines["done"]["job_result"])
	assert.Equal(t, "unread", lines["gone"]["runner_log"])
	assert.Contains(t, lines["gone"]["runner_log_error"], "not found")
	assert.NotContains(t, lines["unread"], "runner_log")
	assert.NotContains(t, lines["unread"], "job_name")

	// One warning for the sweep, however many runners it refused,
	// naming the right and how to grant it or turn the read off.
	require.Len(t, warnings, 1)
	w := warnings[0]
	assert.Equal(t, "WARN", w["level"])
	assert.EqualValues(t, 2, w["runners"])
	assert.Equal(t, "get pods/log", w["right"])
	assert.Contains(t, w["reason"], "refused-1")
	assert.Contains(t, w["fix"], "runnerLog.enabled")
	assert.Contains(t, w["fix"], "components/runner-log")
	assert.Contains(t, w["fix"], "REAPER_READ_RUNNER_LOG=false")
}

func TestNoWarningWhenTheLogsWereRead(t *testing.T) {
	res := logOutcomes()
	res.Outcomes = res.Outcomes[:2]
	for _, m := range logged(t, res) {
		assert.NotEqual(t, "runner logs not readable", m["msg"])
		assert.NotEqual(t, "runner log guard blind", m["msg"])
		if m["msg"] == "sweep" {
			assert.EqualValues(t, 0, m["runner_log_blind"])
		}
	}
}

// TestWarningWhenTheGuardWasBlind: runners removed with no word from their
// logs (a read that failed, a tail cut or holding none of the runner's
// lines, as worker trace copied to stdout makes it) are counted in the
// summary and named in one warning a sweep, by why; a runner not removed,
// or whose log said something, is not.
func TestWarningWhenTheGuardWasBlind(t *testing.T) {
	var warnings []map[string]any
	var summary map[string]any
	for _, m := range logged(t, logOutcomes()) {
		switch m["msg"] {
		case "runner log guard blind":
			warnings = append(warnings, m)
		case "sweep":
			summary = m
		}
	}
	require.Len(t, warnings, 1)
	w := warnings[0]
	assert.Equal(t, "WARN", w["level"])
	assert.EqualValues(t, 4, w["runners"], "refused-1, refused-2, trace-cut, trace-only")
	assert.EqualValues(t, 2, w["unread"])
	assert.EqualValues(t, 1, w["cut"])
	assert.EqualValues(t, 1, w["silent"])
	assert.Contains(t, w["fix"], "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT")
	assert.Contains(t, w["effect"], "no word from their own logs")
	require.NotNil(t, summary)
	assert.EqualValues(t, 4, summary["runner_log_blind"])
}

// The audit names the job the runner's own log named, where nothing else
// named one.
func TestAuditShowsTheRunnersLogJob(t *testing.T) {
	jobs := map[string]string{}
	for _, r := range Rows(logOutcomes()) {
		jobs[r.Pod] = r.Job
	}
	assert.Equal(t, `running build\x1b[31m (runner's log)`, jobs["busy"])
	assert.Equal(t, "completed build (runner's log)", jobs["done"])
	assert.Empty(t, jobs["refused-1"])
}
