package report

import (
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
	res := sweep.Result{WebHost: "ghe.example.com", Outcomes: []reap.Outcome{
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
