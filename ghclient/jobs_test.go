package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The paths the job check must hit for the tests' job and run.
const (
	jobPath     = "/repos/octo/hello/actions/jobs/7001"
	runJobsPath = "/repos/octo/hello/actions/runs/42/jobs"
)

var (
	runOnly = fleet.Job{Owner: "octo", Repo: "hello", RunID: 42}
	withID  = fleet.Job{Owner: "octo", Repo: "hello", RunID: 42, JobID: 7001}
)

// ghJob is one job in GitHub's shape, with every key the description
// requires; an empty runner or conclusion is null, as GitHub sends them.
func ghJob(id, run int64, attempt int, name, status, conclusion, runner string) map[string]any {
	var runnerName, runnerID, concl, completed any
	if runner != "" {
		runnerName, runnerID = runner, 3
	}
	if conclusion != "" {
		concl, completed = conclusion, "2026-01-02T03:05:00Z"
	}
	return map[string]any{
		"id": id, "run_id": run, "run_attempt": attempt, "node_id": "CR_x", "head_sha": "f83a356604ae3c5d03e1b46ef4d1ca77d64a90b0",
		"run_url":  fmt.Sprintf("https://api.github.com/repos/octo/hello/actions/runs/%d", run),
		"url":      fmt.Sprintf("https://api.github.com/repos/octo/hello/actions/jobs/%d", id),
		"html_url": fmt.Sprintf("https://github.com/octo/hello/actions/runs/%d/job/%d", run, id),
		"status":   status, "conclusion": concl, "name": name, "steps": []any{},
		"started_at": "2026-01-02T03:04:00Z", "completed_at": completed, "created_at": "2026-01-02T03:03:00Z",
		"check_run_url": fmt.Sprintf("https://api.github.com/repos/octo/hello/check-runs/%d", id),
		"labels":        []string{"self-hosted"}, "runner_id": runnerID, "runner_name": runnerName,
		"runner_group_id": nil, "runner_group_name": nil, "workflow_name": "CI", "head_branch": "main",
	}
}

// without is item with keys removed, for malformed answers.
func without(item map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// matrix is n jobs of run 42, attempt 1, completed, none on the tests'
// runner, ids from 1000.
func matrix(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = ghJob(int64(1000+i), 42, 1, fmt.Sprintf("test (%d)", i), "completed", "success", fmt.Sprintf("other-%d", i))
	}
	return out
}

// replaced is jobs with item i replaced.
func replaced(jobs []map[string]any, i int, item map[string]any) []map[string]any {
	out := append([]map[string]any(nil), jobs...)
	out[i] = item
	return out
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// runJobs serves a run's job list the way GitHub does: per_page items a
// page, Link next while more follow, total_count (len(jobs) unless total
// is set). It fails the test if the client asks for anything but all
// attempts at 100 a page.
func runJobs(t *testing.T, jobs []map[string]any, total *int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		assert.Equal(t, "all", q.Get("filter"), "every attempt is asked for")
		assert.Equal(t, "100", q.Get("per_page"))
		assert.Equal(t, "Bearer "+testToken, r.Header.Get("Authorization"))
		page, err := strconv.Atoi(q.Get("page"))
		require.NoError(t, err)
		from := min((page-1)*100, len(jobs))
		to := min(from+100, len(jobs))
		if to < len(jobs) {
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?filter=all&per_page=100&page=%d>; rel="next"`, r.Host, r.URL.Path, page+1))
		}
		n := len(jobs)
		if total != nil {
			n = *total
		}
		writeJSON(w, map[string]any{"total_count": n, "jobs": jobs[from:to]})
	}
}

// answer serves one fixed body.
func answer(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, v) }
}

// status serves a GitHub error with status and headers.
func status(code int, headers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { refuse(w, code, headers) }
}

func TestJobStatus(t *testing.T) {
	reset := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	primary := map[string]string{"X-Ratelimit-Limit": "5000", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}
	secondary := map[string]string{"Retry-After": "60"}
	tests := []struct {
		name     string
		job      fleet.Job
		path     string
		handler  func(t *testing.T) http.HandlerFunc
		want     fleet.JobStatus
		finished bool
		// err, when set, must be in the error's chain; rateLimited says
		// the error is a *fleet.RateLimitError.
		err         error
		rateLimited bool
		requests    int32
		// fallback is set where an unknown job id sends the check on to
		// the run's list (answered 404 here, since only path is served).
		fallback bool
	}{
		{
			name: "job id: in progress", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 42, 1, "build", "in_progress", "", "rr-a"))
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "job id: queued, no runner yet", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 42, 1, "build", "queued", "", ""))
			},
			want: fleet.JobStatus{Status: "queued", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "job id: completed with its conclusion", job: withID, path: jobPath, requests: 1, finished: true,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 42, 1, "build", "completed", "cancelled", "rr-a"))
			},
			want: fleet.JobStatus{Status: "completed", Conclusion: "cancelled", RunnerName: "rr-a", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "job id: another runner's job is unknown", job: withID, path: jobPath, requests: 1, err: fleet.ErrJobUnknown,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 42, 1, "build", "completed", "success", "rr-b"))
			},
		},
		{
			name: "job id: another run's job is unknown", job: withID, path: jobPath, requests: 1, err: fleet.ErrJobUnknown,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 43, 1, "build", "completed", "success", "rr-a"))
			},
		},
		{
			name: "job id: 404 is unknown, not finished", job: withID, path: jobPath, requests: 1, fallback: true, err: fleet.ErrJobUnknown,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusNotFound, nil) },
		},
		{
			name: "job id: a body without status is an error", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(without(ghJob(7001, 42, 1, "build", "completed", "success", "rr-a"), "status"))
			},
		},
		{
			name: "job id: a body without runner_name is an error", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(without(ghJob(7001, 42, 1, "build", "completed", "success", "rr-a"), "runner_name"))
			},
		},
		{
			name: "job id: completed without a conclusion is an error", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc {
				return answer(ghJob(7001, 42, 1, "build", "completed", "", "rr-a"))
			},
		},
		{
			name: "job id: 500 is an error", job: withID, path: jobPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusInternalServerError, nil) },
		},
		{
			name: "job id: 403 with x-ratelimit-remaining 0", job: withID, path: jobPath, requests: 1, rateLimited: true,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusForbidden, primary) },
		},
		{
			name: "job id: 429 secondary", job: withID, path: jobPath, requests: 1, rateLimited: true,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusTooManyRequests, secondary) },
		},
		{
			name: "run: in progress on page 1", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(3), 1, ghJob(7001, 42, 1, "build", "in_progress", "", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: queued naming the runner is unfinished", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(3), 0, ghJob(7001, 42, 1, "build", "queued", "", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "queued", RunnerName: "rr-a", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: 256-job matrix, the runner's running job on page 3", job: runOnly, path: runJobsPath, requests: 3,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(256), 230, ghJob(7001, 42, 1, "test (230)", "in_progress", "", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7001, Name: "test (230)", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: 256-job matrix, the runner's running job on page 1, no page more", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(256), 99, ghJob(7001, 42, 1, "test (99)", "in_progress", "", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7001, Name: "test (99)", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: 256-job matrix, the runner's finished job on page 1, the whole list read", job: runOnly, path: runJobsPath, requests: 3, finished: true,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(256), 5, ghJob(7001, 42, 1, "test (5)", "completed", "failure", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "completed", Conclusion: "failure", RunnerName: "rr-a", JobID: 7001, Name: "test (5)", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: a re-run's running attempt wins over the finished one", job: runOnly, path: runJobsPath, requests: 2,
			handler: func(t *testing.T) http.HandlerFunc {
				jobs := replaced(matrix(150), 10, ghJob(7001, 42, 1, "build", "completed", "failure", "rr-a"))
				return runJobs(t, replaced(jobs, 140, ghJob(7002, 42, 2, "build", "in_progress", "", "rr-a")), nil)
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7002, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7002"},
		},
		{
			name: "run: the running attempt listed first wins too", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, []map[string]any{
					ghJob(7001, 42, 1, "build", "in_progress", "", "rr-a"),
					ghJob(7002, 42, 2, "build", "completed", "success", "rr-a"),
				}, nil)
			},
			want: fleet.JobStatus{Status: "in_progress", RunnerName: "rr-a", JobID: 7001, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7001"},
		},
		{
			name: "run: of finished attempts the latest", job: runOnly, path: runJobsPath, requests: 1, finished: true,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, []map[string]any{
					ghJob(7003, 42, 2, "build", "completed", "success", "rr-a"),
					ghJob(7001, 42, 1, "build", "completed", "failure", "rr-a"),
				}, nil)
			},
			want: fleet.JobStatus{Status: "completed", Conclusion: "success", RunnerName: "rr-a", JobID: 7003, Name: "build", HTMLURL: "https://github.com/octo/hello/actions/runs/42/job/7003"},
		},
		{
			name: "run: no job on the runner is unknown, every page read", job: runOnly, path: runJobsPath, requests: 3, err: fleet.ErrJobUnknown,
			handler: func(t *testing.T) http.HandlerFunc { return runJobs(t, matrix(256), nil) },
		},
		{
			name: "run: a name that differs only in case is another runner", job: runOnly, path: runJobsPath, requests: 1, err: fleet.ErrJobUnknown,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, []map[string]any{ghJob(7001, 42, 1, "build", "in_progress", "", "RR-A")}, nil)
			},
		},
		{
			name: "run: 404 is unknown, not finished", job: runOnly, path: runJobsPath, requests: 1, err: fleet.ErrJobUnknown,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusNotFound, nil) },
		},
		{
			name: "run: a short list is inconsistent, not unknown", job: runOnly, path: runJobsPath, requests: 3, err: errJobsInconsistent,
			handler: func(t *testing.T) http.HandlerFunc {
				n := 257
				return runJobs(t, matrix(256), &n)
			},
		},
		{
			name: "run: more jobs than total_count is inconsistent", job: runOnly, path: runJobsPath, requests: 1, err: errJobsInconsistent,
			handler: func(t *testing.T) http.HandlerFunc {
				n := 2
				return runJobs(t, matrix(3), &n)
			},
		},
		{
			name: "run: next links that never end stop at the ceiling", job: runOnly, path: runJobsPath, requests: maxJobPages, err: errJobsInconsistent,
			handler: func(t *testing.T) http.HandlerFunc {
				// One job a page, a total no page reaches, and always a
				// next page: only the ceiling ends the read.
				return func(w http.ResponseWriter, r *http.Request) {
					page, err := strconv.Atoi(r.URL.Query().Get("page"))
					require.NoError(t, err)
					w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?filter=all&per_page=100&page=%d>; rel="next"`, r.Host, r.URL.Path, page+1))
					writeJSON(w, map[string]any{"total_count": 1_000_000, "jobs": []any{
						ghJob(int64(page), 42, 1, "build", "completed", "success", "other")}})
				}
			},
		},
		{
			name: "run: an item without status is an error", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(t *testing.T) http.HandlerFunc {
				return runJobs(t, replaced(matrix(3), 2, without(ghJob(7001, 42, 1, "build", "in_progress", "", "rr-a"), "status")), nil)
			},
		},
		{
			name: "run: a body without total_count is an error", job: runOnly, path: runJobsPath, requests: 1,
			handler: func(*testing.T) http.HandlerFunc { return answer(map[string]any{"jobs": matrix(1)}) },
		},
		{
			name: "run: 403 with x-ratelimit-remaining 0", job: runOnly, path: runJobsPath, requests: 1, rateLimited: true,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusForbidden, primary) },
		},
		{
			name: "run: 429 secondary", job: runOnly, path: runJobsPath, requests: 1, rateLimited: true,
			handler: func(*testing.T) http.HandlerFunc { return status(http.StatusTooManyRequests, secondary) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			var calls atomic.Int32
			h := tc.handler(t)
			mux.HandleFunc("GET "+tc.path, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				h(w, r)
			})

			got, err := c.JobStatus(context.Background(), tc.job, "rr-a")
			assert.Equal(t, tc.requests, calls.Load(), "requests")
			wire := int64(tc.requests)
			if tc.fallback {
				wire++
			}
			assert.Equal(t, wire, c.Counts().Requests, "requests on the wire")
			wantOK := tc.err == nil && !tc.rateLimited && tc.want != (fleet.JobStatus{})
			if wantOK {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				assert.Equal(t, tc.finished, got.Finished())
				return
			}
			require.Error(t, err)
			t.Logf("error: %v", err)
			assert.Zero(t, got, "an error is never a status")
			assert.NotContains(t, err.Error(), testToken)
			assert.Contains(t, err.Error(), "job status of ")
			assert.Equal(t, tc.rateLimited, isRateLimited(err), "typed as a rate limit")
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
			}
			for _, other := range []error{fleet.ErrJobUnknown, errJobsInconsistent} {
				if other != tc.err { //nolint:errorlint // which of the table's own sentinels, not what an error wraps
					assert.NotErrorIs(t, err, other)
				}
			}
		})
	}
}

// TestJobStatusUnknownIDFallsBackToTheRun: a job id GitHub does not know
// for this runner (ARC's status.jobId may be the Actions service's, not a
// REST id) is not the end of the question: the run's job list, matched on
// the runner's name, answers it, one way or the other.
func TestJobStatusUnknownIDFallsBackToTheRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		byID   http.HandlerFunc
		status string
	}{
		{"404 by id, running in the run", status(http.StatusNotFound, nil), "in_progress"},
		{"404 by id, finished in the run", status(http.StatusNotFound, nil), "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("GET "+jobPath, tc.byID)
			concl := ""
			if tc.status == "completed" {
				concl = "success"
			}
			mux.HandleFunc("GET "+runJobsPath, runJobs(t, append(matrix(3), ghJob(9, 42, 1, "build", tc.status, concl, "rr-a")), nil))
			got, err := c.JobStatus(context.Background(), withID, "rr-a")
			require.NoError(t, err)
			assert.Equal(t, tc.status, got.Status)
			assert.Equal(t, int64(9), got.JobID, "the run's job on this runner")
			assert.Equal(t, int64(2), c.Counts().Requests)
		})
	}
}

// TestJobStatusByIDNeverTradesARunningJobForTheRun: a job GitHub has, by
// the recorded id, that runs on this runner protects it whatever run the
// record names; one of another run or runner holds the runner (it may be
// the one running) and is not traded for the recorded run's list, where an
// older, finished job of the runner would read as "finished"; and a job
// that finished on no runner says nothing of this one.
func TestJobStatusByIDNeverTradesARunningJobForTheRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		byID    map[string]any
		status  string
		unknown bool
	}{
		{"running on this runner in another run: protects", ghJob(7001, 43, 1, "build", "in_progress", "", "rr-a"), "in_progress", false},
		{"running on another runner: held", ghJob(7001, 42, 1, "build", "in_progress", "", "rr-b"), "", true},
		{"finished in another run: held", ghJob(7001, 43, 1, "build", "completed", "success", "rr-a"), "", true},
		{"cancelled before any runner took it: held", ghJob(7001, 42, 1, "build", "completed", "cancelled", ""), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("GET "+jobPath, answer(tc.byID))
			mux.HandleFunc("GET "+runJobsPath, runJobs(t, []map[string]any{ghJob(9, 42, 1, "old", "completed", "success", "rr-a")}, nil))
			got, err := c.JobStatus(context.Background(), withID, "rr-a")
			assert.Equal(t, int64(1), c.Counts().Requests, "the run's list is not read")
			if tc.unknown {
				require.ErrorIs(t, err, fleet.ErrJobUnknown)
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.status, got.Status)
			assert.False(t, got.Finished())
		})
	}
}

// TestJobStatusRateLimitUntil: the job check reads a limit's until like
// the runner list does.
func TestJobStatusRateLimitUntil(t *testing.T) {
	reset := time.Now().Add(37 * time.Minute).Truncate(time.Second)
	for _, job := range []fleet.Job{withID, runOnly} {
		t.Run(fmt.Sprint(job.JobID), func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/repos/octo/hello/actions/", status(http.StatusForbidden, map[string]string{
				"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}))
			_, err := c.JobStatus(context.Background(), job, "rr-a")
			requireLimit(t, err, reset, false)
			// go-github remembers the limit: the next check sends nothing.
			_, err = c.JobStatus(context.Background(), job, "rr-a")
			requireLimit(t, err, reset, false)
			assert.Equal(t, int64(1), c.Counts().Requests)
		})
	}
}

// TestJobStatusEscapesAndRefuses: owner and repository go into the path
// escaped, and a question that could reach the wrong job sends nothing.
func TestJobStatusEscapesAndRefuses(t *testing.T) {
	c, mux, _ := setup(t, 0)
	var escaped atomic.Value
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		escaped.Store(r.URL.EscapedPath())
		writeJSON(w, ghJob(9, 42, 1, "build", "in_progress", "", "rr-a"))
	})
	got, err := c.JobStatus(context.Background(), fleet.Job{Owner: "octo", Repo: "a b?c#d", RunID: 42, JobID: 9}, "rr-a")
	require.NoError(t, err)
	assert.Equal(t, "in_progress", got.Status)
	assert.Equal(t, "/repos/octo/a%20b%3Fc%23d/actions/jobs/9", escaped.Load())
	requests := c.Counts().Requests

	for _, tc := range []struct {
		name   string
		job    fleet.Job
		runner string
	}{
		{"no run", fleet.Job{Owner: "octo", Repo: "hello"}, "rr-a"},
		{"no owner", fleet.Job{Repo: "hello", RunID: 1}, "rr-a"},
		{"dot-dot repo", fleet.Job{Owner: "octo", Repo: "..", RunID: 1}, "rr-a"},
		{"dot owner", fleet.Job{Owner: ".", Repo: "hello", RunID: 1, JobID: 2}, "rr-a"},
		{"negative job id", fleet.Job{Owner: "octo", Repo: "hello", RunID: 1, JobID: -2}, "rr-a"},
		{"no runner name", withID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.JobStatus(context.Background(), tc.job, tc.runner)
			require.Error(t, err)
			assert.NotErrorIs(t, err, fleet.ErrJobUnknown, "a bad question is not an unknown job")
		})
	}
	assert.Equal(t, requests, c.Counts().Requests, "nothing sent for a bad question")
}

// TestJobStatusStaysOnOrigin: a redirect off the configured origin is
// refused before the credential goes with it.
func TestJobStatusStaysOnOrigin(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		writeJSON(w, ghJob(7001, 42, 1, "build", "completed", "success", "rr-a"))
	}))
	t.Cleanup(other.Close)
	for _, job := range []fleet.Job{withID, runOnly} {
		t.Run(fmt.Sprint(job.JobID), func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/repos/octo/hello/actions/", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusMovedPermanently)
			})
			_, err := c.JobStatus(context.Background(), job, "rr-a")
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrOffOrigin), "refused: %v", err)
			assert.NotContains(t, err.Error(), "/actions/", "the refused URL is not quoted")
			assert.Zero(t, elsewhere.Load(), "nothing reached the other origin")
		})
	}
}

// TestOpenAPIContractJobStatus runs the job check through the simulator
// and checks both sides of every exchange against GitHub's description:
// by job id, and through a run's job list of several pages.
func TestOpenAPIContractJobStatus(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	const token = "ghp_contracttoken"
	sim, rec, base := contractSim(t, api, ghsim.Options{Token: token})
	scope := "repo:octo/hello"
	sim.AddRunner(scope, ghsim.Runner{Name: "rr-a"})
	for i := range 180 {
		j := sim.StartJob("octo/hello", 42, fmt.Sprintf("test (%d)", i), fmt.Sprintf("other-%d", i))
		if i%2 == 0 {
			sim.FinishJob(j.ID, "success")
		}
	}
	running := sim.StartJob("octo/hello", 42, "test (180)", "rr-a")
	require.NotZero(t, running.ID)
	c, err := New(Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	ctx := context.Background()

	got, err := c.JobStatus(ctx, fleet.Job{Owner: "octo", Repo: "hello", RunID: 42}, "rr-a")
	require.NoError(t, err)
	assert.Equal(t, "in_progress", got.Status)
	assert.Equal(t, running.ID, got.JobID)
	assert.Equal(t, int64(2), c.Counts().Requests, "two pages of 181 jobs")

	_, ok := sim.FinishJob(running.ID, "success")
	require.True(t, ok)
	got, err = c.JobStatus(ctx, fleet.Job{Owner: "octo", Repo: "hello", RunID: 42, JobID: running.ID}, "rr-a")
	require.NoError(t, err)
	assert.True(t, got.Finished())
	assert.Equal(t, "success", got.Conclusion)

	_, err = c.JobStatus(ctx, fleet.Job{Owner: "octo", Repo: "hello", RunID: 43}, "rr-a")
	assert.ErrorIs(t, err, fleet.ErrJobUnknown)

	requireConforming(t, rec)
	assert.Contains(t, rec.Operations(), "actions/list-jobs-for-workflow-run")
	assert.Contains(t, rec.Operations(), "actions/get-job-for-workflow-run")
}
