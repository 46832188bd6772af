package fleet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Job names a workflow job a runner is known to have held: from ARC's
// EphemeralRunner status (its listener writes it when the job starts on
// the runner) or from a pool's own label or annotation. It is the
// evidence of a job that does not rest on the registration's busy and
// status flags, which GitHub has been seen to get wrong for minutes while
// the job ran, and the link a post-mortem needs from a runner to its job.
type Job struct {
	// Owner and Repo name the job's repository.
	Owner, Repo string
	// RunID is the workflow run; never zero in a Job.
	RunID int64
	// JobID is the REST job id, when known (newer ARC's status.jobId, or a
	// pool's annotation); zero otherwise.
	JobID int64
	// Name is the job's display name as ARC recorded it; may be empty.
	Name string
	// RequestID is ARC's status.jobRequestId: the Actions service's id,
	// not the REST job id, kept only to name the job in a line.
	RequestID int64
}

// Known reports whether the job names enough to be asked about.
func (j *Job) Known() bool {
	return j != nil && j.Owner != "" && j.Repo != "" && j.RunID > 0
}

// Repository is OWNER/REPO.
func (j Job) Repository() string { return j.Owner + "/" + j.Repo }

// RunURL is the run's page on the given web host (github.com, or a GHES
// host).
func (j Job) RunURL(webHost string) string {
	if webHost == "" {
		webHost = "github.com"
	}
	return fmt.Sprintf("https://%s/%s/%s/actions/runs/%d", webHost, j.Owner, j.Repo, j.RunID)
}

// ParseJobRef reads OWNER/REPO/RUN_ID[/JOB_ID], the form a pool's
// dispatcher writes into the configured label or annotation. Anything
// else is an error: a job reference that is half right would send the
// check to the wrong job.
func ParseJobRef(s string) (Job, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 && len(parts) != 4 {
		return Job{}, fmt.Errorf("job reference %q: want OWNER/REPO/RUN_ID[/JOB_ID]", s)
	}
	for _, p := range parts[:2] {
		if !validRepoPart(p) {
			return Job{}, fmt.Errorf("job reference %q: %q is not a GitHub owner or repository name", s, p)
		}
	}
	run, err := positiveID(parts[2])
	if err != nil {
		return Job{}, fmt.Errorf("job reference %q: run id: %w", s, err)
	}
	j := Job{Owner: parts[0], Repo: parts[1], RunID: run}
	if len(parts) == 4 {
		if j.JobID, err = positiveID(parts[3]); err != nil {
			return Job{}, fmt.Errorf("job reference %q: job id: %w", s, err)
		}
	}
	return j, nil
}

// validRepoPart accepts what GitHub allows in an owner or repository name
// (letters, digits, '-', '_', '.'), but not "." or "..", which would walk
// the request's path.
func validRepoPart(p string) bool {
	if p == "" || p == "." || p == ".." || len(p) > 100 {
		return false
	}
	for _, c := range p {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// positiveID is a plain positive decimal that fits an int64.
func positiveID(s string) (int64, error) {
	if s == "" || s[0] == '0' || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%q is not a positive decimal", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive decimal", s)
	}
	return n, nil
}

// JobStatus is what GitHub said of a job when the reaper asked.
type JobStatus struct {
	// Status is the job's status: queued, in_progress, completed, waiting,
	// requested or pending.
	Status string
	// Conclusion is set once the job is completed (success, failure,
	// cancelled, ...).
	Conclusion string
	// RunnerName is the runner GitHub assigned the job to; empty while
	// queued.
	RunnerName string
	// JobID and Name are the job's, as GitHub has them.
	JobID int64
	Name  string
	// HTMLURL is the job's page.
	HTMLURL string
}

// Finished reports whether the job is over: nothing more can run on a
// runner for it.
func (s JobStatus) Finished() bool { return s.Status == "completed" }

// ErrJobUnknown marks a job check that found no job to judge: the run or
// the job answered 404, no job of the run names the runner, or the job
// named by id belongs to another runner or run. It is not "finished": a
// 404 is also GitHub's answer to a credential that cannot read the
// repository, and a reference may be stale or wrong, so the caller holds
// the runner, as it holds one whose list could not be read, rather than
// read the silence as permission.
var ErrJobUnknown = errors.New("GitHub knows no such job on this runner")
