package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// TestActionLineNamesTheJob: a line for a runner known to have held a job
// names it (repository, run, its page, the job's name), adds what GitHub
// said of it when the guard asked, and the summary counts the runners
// reaped holding one. A runner with no known job gets no job fields.
func TestActionLineNamesTheJob(t *testing.T) {
	job := &fleet.Job{Owner: "acme", Repo: "api", RunID: 4242, Name: "build (linux)", RequestID: 991}
	pod := func(name string) *fleet.Pod { return &fleet.Pod{Namespace: "arc", Name: name, RunnerName: name} }
	res := sweep.Result{Looked: true, WebHost: "ghe.example.com", Outcomes: []reap.Outcome{
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod("held"), Job: job}},
			Action: reap.DeleteEphemeralRunner, Result: fleet.Deleted},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod("guarded"), Job: job}},
			Action: reap.DeleteRegistrationThenEphemeralRunner, Result: fleet.ProtectedJob,
			Job: &fleet.JobStatus{Status: "in_progress", HTMLURL: "https://ghe.example.com/acme/api/actions/runs/4242/job/7"}},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod("unaskable"), Job: &fleet.Job{RequestID: 5}}},
			Action: reap.DeletePod, Result: fleet.JobUnchecked},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod("no-job")}},
			Action: reap.DeletePod, Result: fleet.Deleted},
	}}
	lines := map[string]map[string]any{}
	var summary map[string]any
	for _, m := range logged(t, res) {
		switch m["msg"] {
		case "action":
			lines[m["pod"].(string)] = m
		case "sweep":
			summary = m
		}
	}
	require.Len(t, lines, 4)
	held := lines["held"]
	assert.Equal(t, "acme/api", held["job_repository"])
	assert.EqualValues(t, 4242, held["job_run_id"])
	assert.Equal(t, "https://ghe.example.com/acme/api/actions/runs/4242", held["job_run_url"])
	assert.Equal(t, "build (linux)", held["job_name"])
	assert.EqualValues(t, 991, held["job_request_id"])
	assert.NotContains(t, held, "job_status", "the guard did not ask about a terminal pod's job")
	guarded := lines["guarded"]
	assert.Equal(t, "protected-job", guarded["result"])
	assert.Equal(t, "in_progress", guarded["job_status"])
	assert.Equal(t, "https://ghe.example.com/acme/api/actions/runs/4242/job/7", guarded["job_url"])
	assert.NotContains(t, lines["unaskable"], "job_repository")
	assert.EqualValues(t, 5, lines["unaskable"]["job_request_id"])
	for k := range lines["no-job"] {
		assert.NotContains(t, k, "job_", "a runner with no known job names none")
	}
	require.NotNil(t, summary)
	assert.EqualValues(t, 1, summary["reaped_holding_job"])
}

// TestAuditShowsTheJob: the audit's table and rows name the job, what
// GitHub said of it when the guard asked, and escape its name.
func TestAuditShowsTheJob(t *testing.T) {
	job := &fleet.Job{Owner: "acme", Repo: "api", RunID: 4711, Name: "build\x1b[31m"}
	pod := func(name string) *fleet.Pod { return &fleet.Pod{Namespace: "arc", Name: name, RunnerName: name} }
	res := sweep.Result{Looked: true, Outcomes: []reap.Outcome{
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod("guarded"), Job: job}},
			Result: fleet.ProtectedJob, Job: &fleet.JobStatus{Status: "in_progress"}},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod("over"), Job: job}},
			Result: fleet.WouldDelete, Job: &fleet.JobStatus{Status: "completed", Conclusion: "failure"}},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Pod: pod("unaskable"), Job: &fleet.Job{RequestID: 3}}},
			Result: fleet.JobUnchecked},
		{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Terminal, Pod: pod("no-job")}}, Result: fleet.WouldDelete},
	}}
	jobs := map[string]string{}
	for _, r := range Rows(res) {
		jobs[r.Pod] = r.Job
	}
	assert.Equal(t, map[string]string{
		"guarded":   `acme/api run 4711 build\x1b[31m (in_progress)`,
		"over":      `acme/api run 4711 build\x1b[31m (completed, failure)`,
		"unaskable": "recorded, not askable",
		"no-job":    "",
	}, jobs)
	var table strings.Builder
	require.NoError(t, WriteTable(&table, res))
	assert.Contains(t, table.String(), "JOB")
	assert.Contains(t, table.String(), "protected-job")
	assert.NotContains(t, table.String(), "\x1b", "the job's name is shown, never obeyed")
}
