package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// maxJobPages is the hard ceiling on one run's job list at per_page=100:
// 131 pages, the 13,056 jobs of a 256-job matrix (GitHub's limit for a
// run) over its first attempt and the 50 re-runs GitHub allows, all of
// which filter=all lists. It stops a server whose total_count and next
// links go on for ever; past it the check fails, and the caller holds.
const maxJobPages = 131

// errJobsInconsistent marks a run's job list that was read but does not
// add up, so that a test can tell it from other failures. The caller holds
// on it as on any error: the job the list dropped may be the one running.
var errJobsInconsistent = errors.New("the run's job list does not add up")

// errJobNotFound is GitHub's 404 for a run or job: one kind of
// fleet.ErrJobUnknown, the only one after which a job id is given up for
// the run's list.
var errJobNotFound = fmt.Errorf("%w: 404 Not Found", fleet.ErrJobUnknown)

// JobStatus asks GitHub about the job a runner is known to have held,
// because busy and status on the runner's registration have been seen to
// read idle or offline while the job ran, and a delete in that window
// answered 204.
//
// It costs one request when job.JobID is set (GET
// /repos/{owner}/{repo}/actions/jobs/{job_id}), and the run's list after
// it only when GitHub answers 404 for that id. Otherwise it reads the
// run's job list (GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs,
// filter=all so that every attempt shows, 100 a page) one page at a time,
// and stops at the first page that shows the runner's unfinished job: at
// most the list's pages, ceil(total_count/100), and never more than
// maxJobPages. Each call is one job of one runner the caller is about to
// act on; nothing here is asked per runner observed.
//
// Of several jobs of the run that name runnerName (a run's attempts), an
// unfinished one wins, else the latest attempt's. A run or job GitHub does
// not know (404), a run none of whose jobs names the runner, and a job
// fetched by id that names another runner or run come back as an error
// wrapping fleet.ErrJobUnknown, never as a finished job. A rate limit is a
// *fleet.RateLimitError; a list that does not add up wraps
// errJobsInconsistent, since the job it dropped could be the one running.
func (c *Client) JobStatus(ctx context.Context, job fleet.Job, runnerName string) (fleet.JobStatus, error) {
	if err := checkJob(job, runnerName); err != nil {
		return fleet.JobStatus{}, fmt.Errorf("job status: %w", err)
	}
	repo := "repos/" + url.PathEscape(job.Owner) + "/" + url.PathEscape(job.Repo)
	if job.JobID > 0 {
		st, err := c.jobByID(ctx, repo, job, runnerName)
		switch {
		case err == nil:
			return st, nil
		case !errors.Is(err, errJobNotFound):
			return fleet.JobStatus{}, fmt.Errorf("job status of job %d of run %d in %s for runner %q: %w", job.JobID, job.RunID, job.Repository(), runnerName, err)
		}
		// An id GitHub does not have may be no REST job id at all
		// (ARC's status.jobId comes from the Actions service's message):
		// the run's list, matched on the runner's name, is asked instead,
		// so that a wrong id neither hides a running job nor holds the
		// runner for ever. An id GitHub has, of another run or runner,
		// is not sent there: that job may be the one running.
	}
	st, err := c.runnerJobOfRun(ctx, repo, job, runnerName)
	if err != nil {
		return fleet.JobStatus{}, fmt.Errorf("job status of run %d in %s for runner %q: %w", job.RunID, job.Repository(), runnerName, err)
	}
	return st, nil
}

// checkJob refuses a question that could go to the wrong job: one without
// a repository and run, or without a runner to match, and a name that
// would walk the request's path, which escaping alone does not stop.
func checkJob(job fleet.Job, runnerName string) error {
	if !job.Known() {
		return fmt.Errorf("job %q/%q run %d does not name a repository and run", job.Owner, job.Repo, job.RunID)
	}
	for _, p := range []string{job.Owner, job.Repo} {
		if p == "." || p == ".." {
			return fmt.Errorf("job %s: %q is not a GitHub owner or repository name", job.Repository(), p)
		}
	}
	if job.JobID < 0 {
		return fmt.Errorf("job %s run %d: invalid job id %d", job.Repository(), job.RunID, job.JobID)
	}
	if runnerName == "" {
		return fmt.Errorf("job %s run %d: no runner name to match", job.Repository(), job.RunID)
	}
	return nil
}

// jobByID reads one job. A job that names another runner, or belongs to
// another run, is not evidence about this runner: a stale or mistyped id
// must not let its job's completion stand for this runner's.
func (c *Client) jobByID(ctx context.Context, repo string, job fleet.Job, runnerName string) (fleet.JobStatus, error) {
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("%s/actions/jobs/%d", repo, job.JobID), nil)
	if err != nil {
		return fleet.JobStatus{}, fmt.Errorf("build request: %w", err)
	}
	var body jobBody
	if err := c.get(ctx, req, &body); err != nil {
		return fleet.JobStatus{}, err
	}
	got, err := body.check()
	if err != nil {
		return fleet.JobStatus{}, err
	}
	if got.ID != job.JobID {
		return fleet.JobStatus{}, fmt.Errorf("answer is job %d", got.ID)
	}
	if !got.Status.Finished() && got.Status.RunnerName == runnerName {
		// Running on this runner, whatever run the record names: the
		// record is stale or wrong, and the job is what protects.
		return got.Status, nil
	}
	if got.Status.Finished() && got.Status.RunnerName == "" {
		// Finished before any runner took it (cancelled while queued):
		// it says nothing of what this runner is doing.
		return fleet.JobStatus{}, fmt.Errorf("%w: job %d finished on no runner", fleet.ErrJobUnknown, got.ID)
	}
	if got.RunID != job.RunID {
		return fleet.JobStatus{}, fmt.Errorf("%w: job %d belongs to run %d", fleet.ErrJobUnknown, got.ID, got.RunID)
	}
	if got.Status.RunnerName != "" && got.Status.RunnerName != runnerName {
		return fleet.JobStatus{}, fmt.Errorf("%w: job %d ran on runner %q", fleet.ErrJobUnknown, got.ID, got.Status.RunnerName)
	}
	return got.Status, nil
}

// runnerJobOfRun finds the runner's job in the run's job list.
func (c *Client) runnerJobOfRun(ctx context.Context, repo string, job fleet.Job, runnerName string) (fleet.JobStatus, error) {
	path := fmt.Sprintf("%s/actions/runs/%d/jobs", repo, job.RunID)
	var (
		best            *runJob
		total, firstLen int
		seen            = map[int64]int{} // job id -> page it was listed on
	)
	for page := 1; ; page++ {
		req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("%s?filter=all&per_page=%d&page=%d", path, perPage, page), nil)
		if err != nil {
			return fleet.JobStatus{}, fmt.Errorf("page %d: build request: %w", page, err)
		}
		var body jobsBody
		next, err := c.getPage(ctx, req, &body)
		if err != nil {
			return fleet.JobStatus{}, fmt.Errorf("page %d: %w", page, err)
		}
		if body.TotalCount == nil || body.Jobs == nil {
			return fleet.JobStatus{}, fmt.Errorf("page %d: response lacks total_count or jobs", page)
		}
		if page == 1 {
			total, firstLen = *body.TotalCount, len(*body.Jobs)
			if total < 0 {
				return fleet.JobStatus{}, fmt.Errorf("%w: page 1 reports a negative total_count %d", errJobsInconsistent, total)
			}
		} else if *body.TotalCount != total {
			return fleet.JobStatus{}, fmt.Errorf("%w: page %d reports total_count %d, page 1 reported %d", errJobsInconsistent, page, *body.TotalCount, total)
		}
		for i, b := range *body.Jobs {
			j, err := b.check()
			if err != nil {
				return fleet.JobStatus{}, fmt.Errorf("page %d item %d: %w", page, i+1, err)
			}
			if first, dup := seen[j.ID]; dup {
				return fleet.JobStatus{}, fmt.Errorf("%w: job %d is listed on page %d and again on page %d", errJobsInconsistent, j.ID, first, page)
			}
			seen[j.ID] = page
			if j.RunID != job.RunID {
				return fleet.JobStatus{}, fmt.Errorf("page %d item %d: job %d belongs to run %d", page, i+1, j.ID, j.RunID)
			}
			if j.Status.RunnerName == runnerName && j.outranks(best) {
				best = &j
			}
		}
		if len(seen) > total {
			return fleet.JobStatus{}, fmt.Errorf("%w: %d jobs by page %d, more than total_count %d", errJobsInconsistent, len(seen), page, total)
		}
		if best != nil && !best.Status.Finished() {
			// An unfinished job on the runner wins whatever the later
			// pages hold: they cannot make it any less running.
			return best.Status, nil
		}
		if next == 0 {
			break
		}
		if next != page+1 {
			return fleet.JobStatus{}, fmt.Errorf("%w: page %d links to page %d as next, want page %d", errJobsInconsistent, page, next, page+1)
		}
		if len(*body.Jobs) == 0 {
			return fleet.JobStatus{}, fmt.Errorf("%w: page %d is empty but links to a next page", errJobsInconsistent, page)
		}
		if most := maxJobPagesFor(total, firstLen); page >= most {
			return fleet.JobStatus{}, fmt.Errorf("%w: page %d links to a next page, but total_count %d allows at most %d pages (ceiling %d)", errJobsInconsistent, page, total, most, maxJobPages)
		}
	}
	if len(seen) != total {
		// The job a short list dropped may be the runner's running one.
		return fleet.JobStatus{}, fmt.Errorf("%w: %d jobs listed, total_count is %d", errJobsInconsistent, len(seen), total)
	}
	if best == nil {
		return fleet.JobStatus{}, fmt.Errorf("%w: none of the run's %d jobs ran on it", fleet.ErrJobUnknown, total)
	}
	return best.Status, nil
}

// maxJobPagesFor is the most pages a run's job list may take, as
// listCheck bounds a runner list: what total_count implies at the size page
// 1 was served with (per_page, or fewer if the server pages in smaller
// steps), plus one for a job added while the list was read, and never more
// than the ceiling.
func maxJobPagesFor(total, firstLen int) int {
	size := perPage
	if firstLen > 0 && firstLen < size {
		size = firstLen
	}
	implied := (total + size - 1) / size
	return min(max(implied, 1)+1, maxJobPages)
}

// get sends one GET whose answer must be 200; 404 is fleet.ErrJobUnknown.
func (c *Client) get(ctx context.Context, req *http.Request, into any) error {
	_, err := c.getPage(ctx, req, into)
	return err
}

// getPage is get, returning the Link header's next page (0 for none).
func (c *Client) getPage(ctx context.Context, req *http.Request, into any) (int, error) {
	resp, err := c.gh.Do(ctx, req, into)
	if resp != nil && resp.Response != nil && resp.StatusCode == http.StatusNotFound {
		// GitHub answers 404 for a run or job it does not have, and as
		// well for a repository this credential cannot read: either way
		// there is no job to judge, which is not a finished one.
		return 0, errJobNotFound
	}
	if err != nil {
		closeExchangeBody(err)
		return 0, rateLimited(offOrigin(err))
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("unexpected status %s", resp.Status)
	}
	return resp.NextPage, nil
}

// jobsBody is a run's job list with its fields optional, so that a body
// that lacks them is refused rather than read as a run with no jobs.
type jobsBody struct {
	TotalCount *int        `json:"total_count"`
	Jobs       *[]*jobBody `json:"jobs"`
}

// jobBody is the part of GitHub's job the check reads, every field
// optional so that a missing one is refused rather than read as its zero
// value: a missing status read as "" is no status at all, and a missing
// runner_name read as none would match no runner and hide a running job.
// runner_name is kept raw to tell null (GitHub's answer before a runner
// takes the job) from a key that is not there.
type jobBody struct {
	ID         *int64          `json:"id"`
	RunID      *int64          `json:"run_id"`
	RunAttempt *int            `json:"run_attempt"`
	Status     *string         `json:"status"`
	Conclusion *string         `json:"conclusion"`
	Name       *string         `json:"name"`
	HTMLURL    *string         `json:"html_url"`
	RunnerName json.RawMessage `json:"runner_name"`
}

// runJob is a job as the check ranks it.
type runJob struct {
	ID, RunID int64
	Attempt   int
	Status    fleet.JobStatus
}

// knownJobStatus reports whether GitHub's description allows a job this
// status.
func knownJobStatus(s string) bool {
	switch s {
	case "queued", "in_progress", "completed", "waiting", "requested", "pending":
		return true
	}
	return false
}

// check refuses a job the check cannot judge: without id, run or status,
// with a status GitHub does not document, completed without a
// conclusion, or without the runner_name key.
func (b *jobBody) check() (runJob, error) {
	switch {
	case b == nil:
		return runJob{}, errors.New("null job")
	case b.ID == nil || *b.ID <= 0:
		return runJob{}, errors.New("job has no id")
	case b.RunID == nil || *b.RunID <= 0:
		return runJob{}, fmt.Errorf("job %d has no run_id", *b.ID)
	case b.Status == nil || *b.Status == "":
		return runJob{}, fmt.Errorf("job %d has no status", *b.ID)
	case !knownJobStatus(*b.Status):
		return runJob{}, fmt.Errorf("job %d has status %q, which GitHub does not document", *b.ID, *b.Status)
	case b.RunnerName == nil:
		return runJob{}, fmt.Errorf("job %d has no runner_name", *b.ID)
	case *b.Status == "completed" && (b.Conclusion == nil || *b.Conclusion == ""):
		return runJob{}, fmt.Errorf("job %d is completed without a conclusion", *b.ID)
	}
	j := runJob{ID: *b.ID, RunID: *b.RunID, Status: fleet.JobStatus{Status: *b.Status, JobID: *b.ID}}
	if b.RunAttempt != nil {
		j.Attempt = *b.RunAttempt
	}
	if b.Conclusion != nil {
		j.Status.Conclusion = *b.Conclusion
	}
	var runner *string
	if err := json.Unmarshal(b.RunnerName, &runner); err != nil {
		return runJob{}, fmt.Errorf("job %d: runner_name: %w", *b.ID, err)
	}
	if runner != nil {
		j.Status.RunnerName = *runner
	}
	if b.Name != nil {
		j.Status.Name = *b.Name
	}
	if b.HTMLURL != nil {
		j.Status.HTMLURL = *b.HTMLURL
	}
	return j, nil
}

// outranks reports whether j tells more about the runner now than other:
// an unfinished job over a finished one (a re-run's attempt may be running
// while an earlier one is done), then the later attempt, then the later
// job.
func (j runJob) outranks(other *runJob) bool {
	if other == nil {
		return true
	}
	if jf, of := j.Status.Finished(), other.Status.Finished(); jf != of {
		return !jf
	}
	if j.Attempt != other.Attempt {
		return j.Attempt > other.Attempt
	}
	return j.ID > other.ID
}
