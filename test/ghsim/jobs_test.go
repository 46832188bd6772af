package ghsim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listed is what the runner list says of runner id in scope: busy, status,
// and whether it is listed at all.
func listed(t *testing.T, base, scope string, id int64) (busy bool, status string, ok bool) {
	t.Helper()
	path := "/orgs/" + strings.TrimPrefix(scope, "org:") + "/actions/runners"
	resp, body := do(t, http.MethodGet, base, path, testToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	for _, r := range decodeMap(t, body)["runners"].([]any) {
		m := r.(map[string]any)
		if int64(m["id"].(float64)) == id {
			return m["busy"].(bool), m["status"].(string), true
		}
	}
	return false, "", false
}

// deleteRunner sends the reaper's DELETE and returns its status.
func deleteRunner(t *testing.T, base, scope string, id int64) int {
	t.Helper()
	path := fmt.Sprintf("/orgs/%s/actions/runners/%d", strings.TrimPrefix(scope, "org:"), id)
	resp, _ := do(t, http.MethodDelete, base, path, testToken, nil)
	return resp.StatusCode
}

// getJob reads job id of acme/web as the jobs endpoint answers it.
func getJob(t *testing.T, base string, id int64) (int, map[string]any) {
	t.Helper()
	resp, body := do(t, http.MethodGet, base, fmt.Sprintf("/repos/acme/web/actions/jobs/%d", id), testToken, nil)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, decodeMap(t, body)
}

// TestJobLifecycle: a queued job has no runner; started, it names its
// runner and makes the registration busy, so a DELETE meets it; finished,
// the registration is idle again and a DELETE removes it.
func TestJobLifecycle(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	reg := s.AddRunner("org:acme", Runner{Name: "rr-a", Status: "offline", RunnerGroupID: 4,
		Labels: []Label{{Name: "self-hosted", Type: "read-only"}, {Name: "gpu"}}})

	q := s.QueueJob("acme/web", 42, "build")
	require.NotZero(t, q.ID)
	code, j := getJob(t, base, q.ID)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "queued", j["status"])
	assert.Nil(t, j["runner_name"])
	assert.Nil(t, j["runner_id"])
	assert.Nil(t, j["conclusion"])
	assert.NotEmpty(t, j["started_at"], "a queued job carries a date, as the description requires")

	started := s.StartJob("acme/web", 42, "build", "rr-a")
	assert.Equal(t, q.ID, started.ID, "the queued job of that name is the one started")
	assert.Equal(t, reg.ID, started.RunnerID)
	busy, status, _ := listed(t, base, "org:acme", reg.ID)
	assert.True(t, busy, "a job makes its runner busy")
	assert.Equal(t, "online", status, "a runner that took a job is online")
	code, j = getJob(t, base, q.ID)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "in_progress", j["status"])
	assert.Equal(t, "rr-a", j["runner_name"])
	assert.Equal(t, float64(reg.ID), j["runner_id"])
	assert.Equal(t, float64(4), j["runner_group_id"])
	assert.Equal(t, []any{"self-hosted", "gpu"}, j["labels"])
	assert.Equal(t, Job{}, s.StartJob("acme/web", 42, "test", "rr-a"), "a runner runs one job at a time")

	assert.Equal(t, http.StatusUnprocessableEntity, deleteRunner(t, base, "org:acme", reg.ID), "the DELETE meets the job")

	done, ok := s.FinishJob(q.ID, "failure")
	require.True(t, ok)
	assert.Equal(t, JobCompleted, done.Status)
	_, ok = s.FinishJob(q.ID, "success")
	assert.False(t, ok, "a job ends once")
	code, j = getJob(t, base, q.ID)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "completed", j["status"])
	assert.Equal(t, "failure", j["conclusion"])
	assert.NotNil(t, j["completed_at"])
	busy, _, _ = listed(t, base, "org:acme", reg.ID)
	assert.False(t, busy)

	assert.Equal(t, http.StatusNoContent, deleteRunner(t, base, "org:acme", reg.ID))
	got, _ := s.JobByID(q.ID)
	assert.False(t, got.LostRunner, "the job had ended")
}

// TestJobLists: a run's job list by attempt (filter=latest, the default,
// and all), in pages with GitHub's Link header and total_count, and
// GitHub's 404s for what the repository does not hold.
func TestJobLists(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	s.AddRunner("repo:acme/web", Runner{Name: "rr-a"})
	for i := range 5 {
		j := s.StartJob("acme/web", 42, fmt.Sprintf("test (%d)", i), fmt.Sprintf("elsewhere-%d", i))
		s.FinishJob(j.ID, "failure")
	}
	attempt, ok := s.NewAttempt("acme/web", 42)
	require.True(t, ok)
	assert.Equal(t, 2, attempt)
	rerun := s.StartJob("acme/web", 42, "test (0)", "rr-a")
	assert.Equal(t, 2, rerun.RunAttempt)
	other := s.StartJob("acme/api", 7, "lint", "rr-b")
	_, ok = s.NewAttempt("acme/web", 99)
	assert.False(t, ok, "no such run")

	list := func(query string) (*http.Response, []map[string]any, int) {
		resp, body := do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs"+query, testToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		m := decodeMap(t, body)
		var jobs []map[string]any
		for _, j := range m["jobs"].([]any) {
			jobs = append(jobs, j.(map[string]any))
		}
		return resp, jobs, int(m["total_count"].(float64))
	}
	_, jobs, total := list("")
	assert.Equal(t, 1, total, "latest is the default: the re-run's job only")
	assert.Equal(t, float64(rerun.ID), jobs[0]["id"])
	_, _, total = list("?filter=latest")
	assert.Equal(t, 1, total)

	resp, jobs, total := list("?filter=all&per_page=4")
	assert.Equal(t, 6, total)
	require.Len(t, jobs, 4)
	assert.Contains(t, resp.Header.Get("Link"), `page=2>; rel="next"`)
	assert.Regexp(t, etagRE, resp.Header.Get("ETag"))
	resp, jobs, _ = list("?filter=all&per_page=4&page=2")
	require.Len(t, jobs, 2)
	assert.NotContains(t, resp.Header.Get("Link"), `rel="next"`)
	assert.Equal(t, float64(rerun.ID), jobs[1]["id"], "by id: the re-run's job last")
	assert.Equal(t, float64(2), jobs[1]["run_attempt"])

	for _, path := range []string{
		"/repos/acme/web/actions/runs/43/jobs",
		fmt.Sprintf("/repos/acme/web/actions/jobs/%d", other.ID), // acme/api's job
		"/repos/acme/web/actions/jobs/999999",
		"/repos/acme/web/actions/jobs/x",
		"/repos/acme/nothing/actions/runs/42/jobs",
		"/orgs/acme/actions/jobs/1",
	} {
		resp, body := do(t, http.MethodGet, base, path, testToken, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		assert.Equal(t, "Not Found", decodeMap(t, body)["message"], path)
	}
	resp, _ = do(t, http.MethodDelete, base, fmt.Sprintf("/repos/acme/web/actions/jobs/%d", rerun.ID), testToken, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "jobs are only read")
	code, j := getJob(t, base, rerun.ID)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "rr-a", j["runner_name"])

	assert.Len(t, s.Jobs("acme/web"), 6)
	assert.Len(t, s.Jobs("acme/api"), 1)
}

// TestJobsAccounting: the jobs endpoints log, authenticate, spend the
// budget and take faults like the runner endpoints: a 200 or a 404 spends
// one, a 304 and a 401 none, a spent budget refuses, and a fault on the
// repository's endpoint answers first.
func TestJobsAccounting(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken, RateLimit: 4})
	j := s.StartJob("acme/web", 42, "build", "rr-a")
	path := fmt.Sprintf("/repos/acme/web/actions/jobs/%d", j.ID)

	resp, _ := do(t, http.MethodGet, base, path, "", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, 4, s.RateRemaining(), "a 401 spends nothing")

	resp, _ = do(t, http.MethodGet, base, path, testToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("X-RateLimit-Remaining"))
	etag := resp.Header.Get("ETag")
	resp, _ = do(t, http.MethodGet, base, path, testToken, map[string]string{"If-None-Match": etag})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.Equal(t, 3, s.RateRemaining(), "a 304 spends nothing")

	s.FinishJob(j.ID, "success")
	resp, _ = do(t, http.MethodGet, base, path, testToken, map[string]string{"If-None-Match": etag})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a finished job is a new body")
	assert.Equal(t, 2, s.RateRemaining())

	s.Fault("repo:acme/web", EndpointRunJobs, Fault{Secondary: 429, Times: 1})
	resp, _ = do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs", testToken, nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "60", resp.Header.Get("Retry-After"))
	assert.Equal(t, 2, s.RateRemaining(), "a faulted answer spends nothing")
	s.Fault("repo:acme/web", EndpointRunJobs, Fault{PrimaryLimit: true, Times: 1})
	resp, _ = do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs", testToken, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))

	resp, _ = do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/41/jobs", testToken, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs", testToken, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 0, s.RateRemaining(), "a 404 and a 200 spent one each")
	resp, _ = do(t, http.MethodGet, base, path, testToken, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a spent budget refuses")

	assert.Equal(t, 5, s.RequestCount(EndpointJob, 0))
	assert.Equal(t, 4, s.RequestCount(EndpointRunJobs, 0))
	for _, r := range s.Requests() {
		assert.Equal(t, "repo:acme/web", r.Scope)
	}
}

// TestLies puts a DELETE and a list read at moments of a job on a runner
// with each Lie, on the sim's clock, and checks what GitHub says against
// the truth the jobs endpoint keeps.
func TestLies(t *testing.T) {
	type moment struct {
		at time.Duration // into the job
		// listed busy and status, and what a DELETE answers then.
		busy   bool
		status string
		delete int
	}
	tests := []struct {
		name    string
		lie     Lie
		idle    bool // ListedIdle, the older model
		moments []moment
	}{
		{
			name: "truth",
			moments: []moment{
				{0, true, "online", 422},
				{30 * time.Minute, true, "online", 422},
			},
		},
		{
			name: "busy lags the job's start: listed idle, the DELETE goes through",
			lie:  Lie{BusyLag: 45 * time.Second},
			moments: []moment{
				{0, false, "online", 204},
				{44 * time.Second, false, "online", 204},
				{45 * time.Second, true, "online", 422},
				{10 * time.Minute, true, "online", 422},
			},
		},
		{
			name: "busy flips to false in the middle of the job",
			lie:  Lie{IdleAfter: 12 * time.Minute, IdleFor: 90 * time.Second},
			moments: []moment{
				{0, true, "online", 422},
				{12*time.Minute - time.Second, true, "online", 422},
				{12 * time.Minute, false, "online", 204},
				{13 * time.Minute, false, "online", 204},
				{12*time.Minute + 90*time.Second, true, "online", 422},
			},
		},
		{
			name: "listed offline while running: the DELETE still meets the job",
			lie:  Lie{Offline: true},
			moments: []moment{
				{0, true, "offline", 422},
				{20 * time.Minute, true, "offline", 422},
			},
		},
		{
			name: "ListedIdle still refuses the DELETE",
			idle: true,
			moments: []moment{
				{0, false, "online", 422},
				{20 * time.Minute, false, "online", 422},
			},
		},
	}
	for _, tc := range tests {
		for _, m := range tc.moments {
			t.Run(fmt.Sprintf("%s/%s", tc.name, m.at), func(t *testing.T) {
				clock := newFakeClock()
				s, base := startSim(t, Options{Token: testToken, Now: clock.Now})
				reg := s.AddRunner("org:acme", Runner{Name: "rr-a", Lie: tc.lie, ListedIdle: tc.idle})
				bystander := s.AddRunner("org:acme", Runner{Name: "rr-b", Lie: tc.lie})
				job := s.StartJob("acme/web", 42, "build", "rr-a")
				require.NotZero(t, job.ID)
				clock.Advance(m.at)

				busy, status, ok := listed(t, base, "org:acme", reg.ID)
				require.True(t, ok)
				assert.Equal(t, m.busy, busy, "listed busy")
				assert.Equal(t, m.status, status, "listed status")
				busy, status, _ = listed(t, base, "org:acme", bystander.ID)
				assert.False(t, busy, "a lie without a job changes nothing")
				assert.Equal(t, "online", status)

				code, j := getJob(t, base, job.ID)
				require.Equal(t, http.StatusOK, code)
				assert.Equal(t, "in_progress", j["status"], "the job endpoint tells the truth")
				assert.Equal(t, "rr-a", j["runner_name"])

				assert.Equal(t, m.delete, deleteRunner(t, base, "org:acme", reg.ID))
				got, _ := s.JobByID(job.ID)
				_, stillListed := s.RunnerByName("org:acme", "rr-a")
				assert.Equal(t, m.delete == http.StatusNoContent, got.LostRunner, "the job lost its runner")
				assert.Equal(t, m.delete != http.StatusNoContent, stillListed, "the registration is gone only after a 204")
			})
		}
	}
}

// TestLieEndsWithTheJob: once the job is done, a lying runner is listed
// as it is, idle and online, and a DELETE of it costs no job.
func TestLieEndsWithTheJob(t *testing.T) {
	clock := newFakeClock()
	s, base := startSim(t, Options{Token: testToken, Now: clock.Now})
	reg := s.AddRunner("org:acme", Runner{Name: "rr-a", Lie: Lie{BusyLag: time.Minute, Offline: true}})
	job := s.StartJob("acme/web", 42, "build", "rr-a")
	busy, status, _ := listed(t, base, "org:acme", reg.ID)
	assert.Equal(t, []any{false, "offline"}, []any{busy, status}, "both lies at once")
	clock.Advance(10 * time.Second)
	_, ok := s.FinishJob(job.ID, "success")
	require.True(t, ok)
	busy, status, _ = listed(t, base, "org:acme", reg.ID)
	assert.Equal(t, []any{false, "online"}, []any{busy, status})

	// A second job restarts the lag from its own start.
	clock.Advance(5 * time.Minute)
	second := s.StartJob("acme/web", 43, "build", "rr-a")
	require.NotZero(t, second.ID)
	clock.Advance(59 * time.Second)
	busy, _, _ = listed(t, base, "org:acme", reg.ID)
	assert.False(t, busy, "the lag counts from the second job's start")
	clock.Advance(time.Second)
	busy, _, _ = listed(t, base, "org:acme", reg.ID)
	assert.True(t, busy)

	_, ok = s.FinishJob(second.ID, "success")
	require.True(t, ok)
	assert.Equal(t, http.StatusNoContent, deleteRunner(t, base, "org:acme", reg.ID))
	for _, j := range s.Jobs("acme/web") {
		assert.False(t, j.LostRunner, "job %d", j.ID)
	}
}

// TestLieMutableBySetRunner: a test may arm a lie on a runner mid-job.
func TestLieMutableBySetRunner(t *testing.T) {
	clock := newFakeClock()
	s, base := startSim(t, Options{Token: testToken, Now: clock.Now})
	reg := s.AddRunner("org:acme", Runner{Name: "rr-a"})
	job := s.StartJob("acme/web", 42, "build", "rr-a")
	clock.Advance(12 * time.Minute)
	assert.Equal(t, http.StatusUnprocessableEntity, deleteRunner(t, base, "org:acme", reg.ID))
	require.True(t, s.SetRunner("org:acme", reg.ID, func(r *Runner) { r.Lie = Lie{IdleAfter: 12 * time.Minute, IdleFor: time.Minute} }))
	assert.Equal(t, http.StatusNoContent, deleteRunner(t, base, "org:acme", reg.ID))
	got, _ := s.JobByID(job.ID)
	assert.True(t, got.LostRunner)
	assert.Equal(t, JobInProgress, got.Status, "the job runs on, its runner gone")
}

// TestStartJobFindsTheRegistration: a job's runner is looked for in the
// repository, then its organization, then the enterprises; a name nobody
// registered still runs the job, on no registration.
func TestStartJobFindsTheRegistration(t *testing.T) {
	s := New(Options{})
	ent := s.AddRunner("enterprise:big", Runner{Name: "in-both"})
	org := s.AddRunner("org:acme", Runner{Name: "in-both"})
	repo := s.AddRunner("repo:acme/web", Runner{Name: "mine"})
	entOnly := s.AddRunner("enterprise:big", Runner{Name: "ent-only"})

	for _, tc := range []struct {
		runner string
		want   int64
	}{
		{"mine", repo.ID},
		{"in-both", org.ID},
		{"ent-only", entOnly.ID},
		{"ghost", 0},
	} {
		j := s.StartJob("acme/web", 1, "job-"+tc.runner, tc.runner)
		require.NotZero(t, j.ID, tc.runner)
		assert.Equal(t, tc.want, j.RunnerID, tc.runner)
		assert.Equal(t, tc.runner, j.RunnerName)
	}
	r, _ := s.RunnerByName("enterprise:big", "in-both")
	assert.Equal(t, ent.ID, r.ID)
	assert.False(t, r.Busy, "the organization's runner of that name took the job")

	for _, bad := range []func() Job{
		func() Job { return s.StartJob("acme", 1, "x", "mine") },
		func() Job { return s.StartJob("acme/web/x", 1, "x", "mine") },
		func() Job { return s.StartJob("acme/web", 0, "x", "mine") },
		func() Job { return s.StartJob("acme/web", 1, "", "mine") },
		func() Job { return s.StartJob("acme/web", 1, "x", "") },
		func() Job { return s.QueueJob("acme/web", -1, "x") },
	} {
		assert.Equal(t, Job{}, bad())
	}
	assert.Len(t, s.Jobs("acme/web"), 4)
}
