package e2e_test

// The job guard through the binary, against the GitHub simulator lying as
// GitHub has been seen to (terraform-aws-github-runner #5085; actions/runner
// #3448): a runner running a job listed offline and idle, its DELETE
// answered 204. ARC's EphemeralRunner says which job the runner took, as
// its listener records it; the reaper asks GitHub about that job, with the
// real go-github client, before it deletes anything.

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// lyingRunner plants an ARC runner (EphemeralRunner and running pod) whose
// registration GitHub lists offline and idle while the job it took runs,
// and answers its DELETE with 204. With evidence, the EphemeralRunner's
// status names the job, as ARC's listener writes it.
func (w *world) lyingRunner(name string, run int64, evidence bool) (ghsim.Runner, ghsim.Job) {
	w.t.Helper()
	reg := w.sim.AddRunner(scope, ghsim.Runner{Name: name, Status: "online", Ephemeral: true,
		Lie: ghsim.Lie{BusyLag: 10 * time.Minute, Offline: true}})
	job := w.sim.StartJob("acme/api", run, "build (linux)", name)
	require.NotZero(w.t, job.ID, "the job started on %s", name)
	st := &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID}
	if evidence {
		st.Job = &testenv.ARCJob{RequestID: 9000 + run, Repository: "acme/api", RunID: run, Name: "build (linux)"}
	}
	w.arcRunner(name, st, ptr(testenv.Running()))
	return reg, job
}

func ptr[T any](v T) *T { return &v }

func TestJobGuardHoldsWhenGitHubsFlagsLie(t *testing.T) {
	w := newWorld(t, arcEnv(nil))
	guarded := erName("g0ard")
	guardedReg, guardedJob := w.lyingRunner(guarded, 101, true)
	bare := erName("b4re")
	bareReg, bareJob := w.lyingRunner(bare, 102, false)
	// A runner whose job finished and that hangs: the guard asks, hears
	// "completed", and lets the reaper act; the line names the job.
	over := erName("0ver")
	overReg := w.sim.AddRunner(scope, ghsim.Runner{Name: over, Status: "online", Ephemeral: true})
	overJob := w.sim.StartJob("acme/api", 103, "test (linux)", over)
	_, ok := w.sim.FinishJob(overJob.ID, "failure")
	require.True(t, ok)
	require.True(t, w.sim.SetRunner(scope, overReg.ID, func(r *ghsim.Runner) { r.Status = "offline" }))
	w.arcRunner(over, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: overReg.ID,
		Job: &testenv.ARCJob{RequestID: 9103, Repository: "acme/api", RunID: 103, Name: "test (linux)"}}, ptr(testenv.Running()))

	first := w.sweep()
	first.requireCode(t, 0)
	require.Empty(t, first.msg("action"), "the first sweep only marks: %s", first.Stdout)
	time.Sleep(pastConfirm)
	before := w.sim.RequestCount(ghsim.EndpointRunJobs, 200)
	second := w.sweep()
	second.requireCode(t, 0)
	acts := second.actions(t)

	t.Run("a runner whose job ARC recorded is protected, whatever the flags say", func(t *testing.T) {
		a := acts[guarded]
		require.NotNil(t, a, "%s", second.Stdout)
		assert.Equal(t, "zombie", a["verdict"], "GitHub's flags made it a zombie: %v", a)
		assert.Equal(t, "protected-job", a["result"], "%v", a)
		assert.Equal(t, "in_progress", a["job_status"], "%v", a)
		assert.Equal(t, "acme/api", a["job_repository"], "%v", a)
		assert.EqualValues(t, 101, a["job_run_id"], "%v", a)
		assert.Equal(t, "build (linux)", a["job_name"], "%v", a)
		assert.True(t, w.runnerExists(guardedReg.ID), "its registration was not deleted")
		assert.Equal(t, "live", env.ARCState(t, testenv.EphemeralRunners, w.ns, guarded), "its EphemeralRunner was not deleted")
		j, _ := w.sim.JobByID(guardedJob.ID)
		assert.False(t, j.LostRunner, "the job kept its runner")
		assert.Equal(t, ghsim.JobInProgress, j.Status)
	})
	t.Run("a runner with no job evidence rests on the flags, and GitHub's lie kills its job", func(t *testing.T) {
		// The remaining risk, measured rather than hidden: nothing said
		// a job ran there, the flags said idle and offline, and the
		// DELETE answered 204.
		a := acts[bare]
		require.NotNil(t, a, "%s", second.Stdout)
		assert.Equal(t, "deleted", a["result"], "%v", a)
		assert.NotContains(t, a, "job_repository")
		assert.False(t, w.runnerExists(bareReg.ID))
		j, _ := w.sim.JobByID(bareJob.ID)
		assert.True(t, j.LostRunner, "the sim saw the job lose its runner")
	})
	t.Run("a runner whose job finished is reaped, its line naming the job", func(t *testing.T) {
		a := acts[over]
		require.NotNil(t, a, "%s", second.Stdout)
		assert.Equal(t, "deleted", a["result"], "%v", a)
		assert.Equal(t, "completed", a["job_status"], "%v", a)
		assert.Equal(t, "failure", a["job_conclusion"], "%v", a)
		// On the GitHub the API URL names: here the sim's host, as a
		// GHES host's web pages are on the API's host.
		api, err := url.Parse(w.env["REAPER_GITHUB_API_URL"])
		require.NoError(t, err)
		assert.Equal(t, "https://"+api.Host+"/acme/api/actions/runs/103", a["job_run_url"], "%v", a)
		assert.False(t, w.runnerExists(overReg.ID))
	})
	sum := second.msg("sweep")
	require.Len(t, sum, 1)
	assert.EqualValues(t, 1, sum[0]["reaped_holding_job"], "the finished one; the bare runner's job was known to nobody: %v", sum[0])
	asked := w.sim.RequestCount(ghsim.EndpointRunJobs, 200) - before
	assert.Equal(t, 2, asked, "one page of one run's job list per runner with a job, no more")
	t.Logf("job guard: %d job-list requests for 2 runners with a recorded job; sweep's GitHub requests %v", asked, sum[0]["github_requests"])
}
