package ghsim

// Workflow runs and their jobs, per repository, and the way a job makes
// the registration it runs on busy:
//
//	GET /repos/O/R/actions/jobs/{job_id}
//	GET /repos/O/R/actions/runs/{run_id}/jobs?filter=latest|all&per_page=&page=
//
// The reaper asks about a runner's job because the registration's busy and
// status have been seen to lie while a job ran (field reports:
// busy false for 25-60 s after a job started, busy false twelve minutes
// into one, listed offline while running), with a DELETE in the first two
// windows answered 204. The jobs endpoints tell the truth; a Runner's Lie
// makes its listing and its DELETE lie, on the sim's clock, so that a test
// can put the reaper in each window and see whether a job was lost.

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Endpoint names of the jobs side, as Request.Endpoint records them and
// Fault accepts them (with a repository scope, "repo:O/R").
const (
	// EndpointJob is GET /repos/O/R/actions/jobs/{job_id}.
	EndpointJob = "job"
	// EndpointRunJobs is GET /repos/O/R/actions/runs/{run_id}/jobs.
	EndpointRunJobs = "run-jobs"
)

// Job statuses the sim gives a job, of the six GitHub documents.
const (
	JobQueued     = "queued"
	JobInProgress = "in_progress"
	JobCompleted  = "completed"
)

// Lie is how GitHub misreports a registration while a job started with
// StartJob runs on it. Its durations count from that job's start on the
// sim's clock (Options.Now); without such a job it changes nothing, and
// Runner.ListedIdle, the older and milder model (busy listed false, the
// DELETE still refused), is left as it was. The jobs endpoints never lie.
type Lie struct {
	// BusyLag: for this long after the job starts, the runner is listed
	// busy false, and a DELETE answers 204 and removes the registration
	// under the running job, as if the job had not reached it yet.
	BusyLag time.Duration
	// IdleAfter and IdleFor: from IdleAfter into the job, for IdleFor,
	// busy is listed false and a DELETE answers 204, as when busy flipped
	// in the middle of a long job. No window when IdleFor is zero.
	IdleAfter, IdleFor time.Duration
	// Offline lists the runner offline for as long as the job runs. A
	// DELETE still meets the job and answers 422.
	Offline bool
}

// Job is one job of a workflow run, as the sim keeps it.
type Job struct {
	ID int64
	// Repo is OWNER/REPO, as first given for the run.
	Repo       string
	RunID      int64
	RunAttempt int
	Name       string
	// Status is JobQueued, JobInProgress or JobCompleted; Conclusion is
	// set once completed.
	Status     string
	Conclusion string
	// RunnerName is the runner the job was started on; RunnerID is its
	// registration's id, 0 when no registration of that name was found,
	// and RunnerGroupID and RunnerGroupName its group.
	RunnerID        int64
	RunnerName      string
	RunnerGroupID   int64
	RunnerGroupName string
	Labels          []string
	WorkflowName    string
	HeadBranch      string
	HeadSHA         string
	CreatedAt       time.Time
	StartedAt       time.Time
	CompletedAt     time.Time
	// LostRunner is set when a DELETE through the API removed the
	// registration while the job ran on it: the harm the reaper exists
	// never to do.
	LostRunner bool
}

// jobsState holds the runs and jobs. Guarded by Sim.mu.
type jobsState struct {
	nextID int64
	jobs   map[int64]*jobEntry
	runs   map[string]map[int64]*runState // repository scope key -> run id -> run
	// running is the job running on each registration, by registration id
	// (unique across the sim).
	running map[int64]int64
}

type runState struct {
	repo    string
	attempt int
	jobs    []int64 // in the order made, which is id order
}

type jobEntry struct {
	Job
	repoKey string
	// runnerScope is the scope key of the registration the job runs on.
	runnerScope string
}

// jobsLocked returns the jobs state, making it on first use.
func (s *Sim) jobsLocked() *jobsState {
	if s.jobs == nil {
		s.jobs = &jobsState{jobs: map[int64]*jobEntry{}, runs: map[string]map[int64]*runState{}, running: map[int64]int64{}}
	}
	return s.jobs
}

// repoKey reads OWNER/REPO as the repository's scope key.
func repoKey(repo string) (string, bool) {
	key, ok := normScope("repo:" + repo)
	return key, ok
}

// runLocked returns run runID of the repository, making it (attempt 1)
// when new.
func (s *Sim) runLocked(key, repo string, runID int64) *runState {
	js := s.jobsLocked()
	runs := js.runs[key]
	if runs == nil {
		runs = map[int64]*runState{}
		js.runs[key] = runs
	}
	run := runs[runID]
	if run == nil {
		run = &runState{repo: repo, attempt: 1}
		runs[runID] = run
	}
	return run
}

// newJobLocked adds a queued job to the run's current attempt.
func (s *Sim) newJobLocked(key string, run *runState, runID int64, name string) *jobEntry {
	js := s.jobsLocked()
	js.nextID++
	sum := sha1.Sum([]byte(key + "/" + itoa(runID)))
	j := &jobEntry{repoKey: key, Job: Job{
		ID: js.nextID, Repo: run.repo, RunID: runID, RunAttempt: run.attempt, Name: name, Status: JobQueued,
		Labels: []string{"self-hosted"}, WorkflowName: "CI", HeadBranch: "main",
		HeadSHA: hex.EncodeToString(sum[:]), CreatedAt: s.now(),
	}}
	js.jobs[j.ID] = j
	run.jobs = append(run.jobs, j.ID)
	return j
}

// QueueJob adds a job waiting for a runner to run runID of repo (OWNER/REPO),
// making the run when new. It returns the zero Job for an invalid
// repository, run id or name.
func (s *Sim) QueueJob(repo string, runID int64, name string) Job {
	key, ok := repoKey(repo)
	if !ok || runID <= 0 || name == "" {
		return Job{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneJob(s.newJobLocked(key, s.runLocked(key, repo, runID), runID, name).Job)
}

// StartJob starts job name of run runID of repo (OWNER/REPO) on the runner
// called runnerName: the run's queued job of that name in its current
// attempt, or a new one. The runner's registration (looked for in the
// repository, then its owner's organization, then any enterprise) turns
// busy and online, as one does once it has taken a job; a name no
// registration has still runs the job, on no registration. It returns the
// zero Job for an invalid argument, and when the registration already
// runs a job, which GitHub never gives a runner.
func (s *Sim) StartJob(repo string, runID int64, name, runnerName string) Job {
	key, ok := repoKey(repo)
	if !ok || runID <= 0 || name == "" || runnerName == "" {
		return Job{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobsLocked()
	scope, reg, found := s.findRunnerLocked(key, runnerName)
	if found {
		if id, busy := js.running[reg.ID]; busy && js.jobs[id].Status == JobInProgress {
			return Job{}
		}
	}
	run := s.runLocked(key, repo, runID)
	var j *jobEntry
	for _, id := range run.jobs {
		if c := js.jobs[id]; c.Status == JobQueued && c.Name == name && c.RunAttempt == run.attempt {
			j = c
			break
		}
	}
	if j == nil {
		j = s.newJobLocked(key, run, runID, name)
	}
	j.Status, j.StartedAt, j.RunnerName = JobInProgress, s.now(), runnerName
	if found {
		j.RunnerID, j.runnerScope = reg.ID, scope
		j.RunnerGroupID, j.RunnerGroupName = reg.RunnerGroupID, "group-"+itoa(reg.RunnerGroupID)
		if reg.RunnerGroupID == 0 {
			j.RunnerGroupID, j.RunnerGroupName = 1, "Default"
		}
		if len(reg.Labels) > 0 {
			j.Labels = j.Labels[:0]
			for _, l := range reg.Labels {
				j.Labels = append(j.Labels, l.Name)
			}
		}
		reg.Busy, reg.Status = true, "online"
		s.scopes[scope].runners[reg.ID] = reg
		js.running[reg.ID] = j.ID
	}
	return cloneJob(j.Job)
}

// findRunnerLocked finds the registration a job of the repository would
// run on by name: in the repository, in its owner's organization, then in
// the enterprises in order.
func (s *Sim) findRunnerLocked(repoKey, name string) (string, Runner, bool) {
	owner, _, _ := strings.Cut(strings.TrimPrefix(repoKey, "repo:"), "/")
	candidates := []string{repoKey, "org:" + owner}
	var ents []string
	for k := range s.scopes {
		if strings.HasPrefix(k, "enterprise:") {
			ents = append(ents, k)
		}
	}
	sort.Strings(ents)
	for _, scope := range append(candidates, ents...) {
		for _, r := range s.sortedLocked(scope) {
			if r.Name == name {
				return scope, r, true
			}
		}
	}
	return "", Runner{}, false
}

// FinishJob completes job id with conclusion ("success" when empty) and
// frees its runner, whose registration turns idle. It reports false for a
// job that does not exist or is already completed.
func (s *Sim) FinishJob(id int64, conclusion string) (Job, bool) {
	if conclusion == "" {
		conclusion = "success"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobsLocked()
	j, ok := js.jobs[id]
	if !ok || j.Status == JobCompleted {
		return Job{}, false
	}
	j.Status, j.Conclusion, j.CompletedAt = JobCompleted, conclusion, s.now()
	if j.StartedAt.IsZero() {
		j.StartedAt = j.CompletedAt
	}
	if j.RunnerID != 0 && js.running[j.RunnerID] == id {
		delete(js.running, j.RunnerID)
		if st := s.scopes[j.runnerScope]; st != nil {
			if reg, ok := st.runners[j.RunnerID]; ok {
				reg.Busy = false
				st.runners[reg.ID] = reg
			}
		}
	}
	return cloneJob(j.Job), true
}

// NewAttempt re-runs run runID of repo: jobs queued or started from now on
// belong to the next attempt, and filter=latest lists only them. It
// returns the new attempt, and false for a run that does not exist.
func (s *Sim) NewAttempt(repo string, runID int64) (int, bool) {
	key, ok := repoKey(repo)
	if !ok {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.jobsLocked().runs[key][runID]
	if run == nil {
		return 0, false
	}
	run.attempt++
	return run.attempt, true
}

// Jobs returns copies of repo's jobs, every run and attempt, by id.
func (s *Sim) Jobs(repo string) []Job {
	key, ok := repoKey(repo)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, j := range s.jobsLocked().jobs {
		if j.repoKey == key {
			out = append(out, cloneJob(j.Job))
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// JobByID returns a copy of job id.
func (s *Sim) JobByID(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobsLocked().jobs[id]
	if !ok {
		return Job{}, false
	}
	return cloneJob(j.Job), true
}

func cloneJob(j Job) Job {
	j.Labels = append([]string(nil), j.Labels...)
	return j
}

// runningJobLocked is the job running on registration id.
func (s *Sim) runningJobLocked(id int64) (*jobEntry, bool) {
	if s.jobs == nil {
		return nil, false
	}
	jid, ok := s.jobs.running[id]
	if !ok {
		return nil, false
	}
	j := s.jobs.jobs[jid]
	return j, j.Status == JobInProgress
}

// lyingIdleLocked reports whether r's Lie hides its running job now.
func (s *Sim) lyingIdleLocked(r Runner) bool {
	if !r.Busy || (r.Lie.BusyLag <= 0 && r.Lie.IdleFor <= 0) {
		return false
	}
	j, ok := s.runningJobLocked(r.ID)
	if !ok {
		return false
	}
	in := s.now().Sub(j.StartedAt)
	return in < r.Lie.BusyLag || (r.Lie.IdleFor > 0 && in >= r.Lie.IdleAfter && in < r.Lie.IdleAfter+r.Lie.IdleFor)
}

// listedLocked is r as lists and gets show it, its Lie applied.
func (s *Sim) listedLocked(r Runner) Runner {
	if s.lyingIdleLocked(r) {
		r.Busy = false
	}
	if r.Lie.Offline {
		if _, ok := s.runningJobLocked(r.ID); ok {
			r.Status = "offline"
		}
	}
	return r
}

// refusesDeleteLocked reports whether a DELETE of r meets a job and is
// answered 422: a busy runner's is, unless its Lie hides the job now.
func (s *Sim) refusesDeleteLocked(r Runner) bool {
	return r.Busy && !s.lyingIdleLocked(r)
}

// deletedLocked records that a DELETE removed registration id: a job
// still running on it has lost its runner.
func (s *Sim) deletedLocked(id int64) {
	if j, ok := s.runningJobLocked(id); ok {
		j.LostRunner = true
	}
	if s.jobs != nil {
		delete(s.jobs.running, id)
	}
}

// jobsRoute maps a repository's jobs paths onto their endpoints; rest is
// the path after /repos/O/R.
func jobsRoute(method, key string, rest []string) (route, bool) {
	if method != http.MethodGet || !strings.HasPrefix(key, "repo:") || len(rest) < 3 || rest[0] != "actions" {
		return route{}, false
	}
	switch {
	case len(rest) == 3 && rest[1] == "jobs":
		id, err := strconv.ParseInt(rest[2], 10, 64)
		return route{scope: key, endpoint: EndpointJob, id: id, badID: err != nil}, true
	case len(rest) == 4 && rest[1] == "runs" && rest[3] == "jobs":
		id, err := strconv.ParseInt(rest[2], 10, 64)
		return route{scope: key, endpoint: EndpointRunJobs, id: id, badID: err != nil}, true
	}
	return route{}, false
}

// isJobsEndpoint tells the jobs side's endpoints from the runners'.
func isJobsEndpoint(endpoint string) bool {
	return endpoint == EndpointJob || endpoint == EndpointRunJobs
}

const docsJobs = "https://docs.github.com/rest/actions/workflow-jobs"

// answerJobsLocked serves the jobs endpoints once auth, faults and the
// budget have passed. A repository with no runs is GitHub's 404, as is a
// run or job it does not hold. filter is read as GitHub documents it
// (latest unless all); a value it does not document is read as latest.
func (s *Sim) answerJobsLocked(r *http.Request, rt route, perPage, page int, f Fault) reply {
	js := s.jobsLocked()
	base := apiBase(r)
	if rt.endpoint == EndpointJob {
		j, ok := js.jobs[rt.id]
		if !ok || j.repoKey != rt.scope {
			s.spendLocked()
			return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsJobs)
		}
		body, _ := json.Marshal(toJobJSON(base, j.Job))
		return s.conditionalLocked(r, body, http.Header{})
	}
	run := js.runs[rt.scope][rt.id]
	if run == nil {
		s.spendLocked()
		return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsJobs)
	}
	all := r.URL.Query().Get("filter") == "all"
	var listed []Job
	for _, id := range run.jobs {
		if j := js.jobs[id]; all || j.RunAttempt == run.attempt {
			listed = append(listed, j.Job)
		}
	}
	if f.EmptyList {
		listed = nil
	}
	total := len(listed)
	from := min(max((page-1)*perPage, 0), total)
	items := listed[from:min(from+perPage, total)]
	if f.DropItems > 0 {
		items = items[:max(0, len(items)-f.DropItems)]
	}
	out := jobListJSON{TotalCount: total, Jobs: make([]jobJSON, 0, len(items))}
	for _, j := range items {
		out.Jobs = append(out.Jobs, toJobJSON(base, j))
	}
	body, _ := json.Marshal(out)
	h := http.Header{}
	if link := linkHeader(r, page, lastPage(total, perPage)); link != "" {
		h.Set("Link", link)
	}
	return s.conditionalLocked(r, body, h)
}

// apiBase is the sim's own address as the request reached it: the API
// base of the URLs a job carries, and, the sim serving at its root as a
// GHES host serves its web pages, of its html_url.
func apiBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type jobListJSON struct {
	TotalCount int       `json:"total_count"`
	Jobs       []jobJSON `json:"jobs"`
}

// jobJSON is a job in the order and shape of GitHub's own example (job in
// its API description); what a job may lack is null, not absent, as the
// description requires every key.
type jobJSON struct {
	ID              int64      `json:"id"`
	RunID           int64      `json:"run_id"`
	WorkflowName    *string    `json:"workflow_name"`
	HeadBranch      *string    `json:"head_branch"`
	RunURL          string     `json:"run_url"`
	RunAttempt      int        `json:"run_attempt"`
	NodeID          string     `json:"node_id"`
	HeadSHA         string     `json:"head_sha"`
	URL             string     `json:"url"`
	HTMLURL         *string    `json:"html_url"`
	Status          string     `json:"status"`
	Conclusion      *string    `json:"conclusion"`
	CreatedAt       string     `json:"created_at"`
	StartedAt       string     `json:"started_at"`
	CompletedAt     *string    `json:"completed_at"`
	Name            string     `json:"name"`
	Steps           []stepJSON `json:"steps"`
	CheckRunURL     string     `json:"check_run_url"`
	Labels          []string   `json:"labels"`
	RunnerID        *int64     `json:"runner_id"`
	RunnerName      *string    `json:"runner_name"`
	RunnerGroupID   *int64     `json:"runner_group_id"`
	RunnerGroupName *string    `json:"runner_group_name"`
}

type stepJSON struct {
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	Number      int     `json:"number"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ptr is a pointer to v, or nil for v's zero value: GitHub's null.
func ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func toJobJSON(base string, j Job) jobJSON {
	repo := base + "/repos/" + j.Repo
	// A job not yet started carries its creation as started_at, as GitHub
	// answers for a queued job: the description requires a date.
	started := j.StartedAt
	if started.IsZero() {
		started = j.CreatedAt
	}
	out := jobJSON{
		ID: j.ID, RunID: j.RunID, WorkflowName: ptr(j.WorkflowName), HeadBranch: ptr(j.HeadBranch),
		RunURL: repo + "/actions/runs/" + itoa(j.RunID), RunAttempt: j.RunAttempt,
		NodeID:  base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("08:CheckRun%d", j.ID))),
		HeadSHA: j.HeadSHA, URL: repo + "/actions/jobs/" + itoa(j.ID),
		HTMLURL: ptr(fmt.Sprintf("%s/%s/actions/runs/%d/job/%d", base, j.Repo, j.RunID, j.ID)),
		Status:  j.Status, Conclusion: ptr(j.Conclusion), CreatedAt: stamp(j.CreatedAt), StartedAt: stamp(started),
		Name: j.Name, Steps: []stepJSON{}, CheckRunURL: repo + "/check-runs/" + itoa(j.ID),
		Labels: append([]string{}, j.Labels...), RunnerID: ptr(j.RunnerID), RunnerName: ptr(j.RunnerName),
		RunnerGroupID: ptr(j.RunnerGroupID), RunnerGroupName: ptr(j.RunnerGroupName),
	}
	if !j.CompletedAt.IsZero() {
		out.CompletedAt = ptr(stamp(j.CompletedAt))
	}
	if j.Status != JobQueued {
		out.Steps = append(out.Steps, stepJSON{Name: "Set up job", Status: JobCompleted, Conclusion: ptr("success"),
			Number: 1, StartedAt: ptr(stamp(started)), CompletedAt: ptr(stamp(started))})
	}
	if j.Status == JobCompleted {
		out.Steps = append(out.Steps, stepJSON{Name: "Complete job", Status: JobCompleted, Conclusion: ptr(j.Conclusion),
			Number: 2, StartedAt: out.CompletedAt, CompletedAt: out.CompletedAt})
	}
	return out
}
