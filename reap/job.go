package reap

import (
	"context"
	"errors"
	"fmt"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// Jobs asks GitHub about a job a runner is known to have held. Its answer
// is the one reading of a job that does not rest on the registration's
// busy and status flags, which GitHub has shown false for minutes while a
// job ran, with its delete answered 204 all the same.
type Jobs interface {
	JobStatus(ctx context.Context, job fleet.Job, runnerName string) (fleet.JobStatus, error)
}

// errNoJobCheck is why a known job goes unchecked when the reaper was
// given no way to ask GitHub.
var errNoJobCheck = errors.New("no job check is configured")

// needsJobCheck reports whether the candidate's action could stop a runner
// that may be running a job, and a job is known for it: a pod whose runner
// has not ended, whatever the action. That includes an EphemeralRunner
// stuck deleting with its pod still running: releasing its finalizer lets
// ARC delete the pod. A terminal pod's runner is over, and an
// EphemeralRunner judged with no pod has nothing to run a job in.
func needsJobCheck(c reconcile.Candidate) bool {
	return c.Job != nil && c.Pod != nil && c.Verdict != fleet.Terminal && !reconcile.RunnerEnded(c.Pod)
}

// checkJob asks GitHub about the candidate's job before anything is
// decided for it, and reports whether the candidate may go on. A job
// queued or in progress on this runner protects it (ProtectedJob); a
// finished one lets it go on; a check that fails, or a job that cannot be
// asked about, holds it (JobUnchecked), because no answer is not evidence
// that the job ended. A rate limit holds it as every GitHub call does.
func (r *Reaper) checkJob(ctx context.Context, o *Outcome, jobs *jobChecks) bool {
	c := o.Candidate
	if r.tooLate(ctx) {
		// Too late to ask is too late to act.
		o.Result = fleet.NotReached
		return false
	}
	if !c.Job.Known() {
		o.Result, o.Err = fleet.JobUnchecked, fmt.Errorf("check the job of runner %q: the recorded job names no repository and run to ask about", c.Pod.RunnerName)
		return false
	}
	if r.opts.Jobs == nil {
		o.Result, o.Err = fleet.JobUnchecked, fmt.Errorf("check job %s of runner %q: %w", describeJob(*c.Job), c.Pod.RunnerName, errNoJobCheck)
		return false
	}
	if r.held(o) {
		return false
	}
	if jobs.held >= jobs.max {
		// Deferred: its mark stays for a later sweep's check.
		return false
	}
	actx, cancel := r.actionContext(ctx, ObjectRoom)
	defer cancel()
	st, err := r.opts.Jobs.JobStatus(actx, *c.Job, c.Pod.RunnerName)
	if err != nil || !st.Finished() {
		jobs.held++
	}
	if err != nil {
		err = fmt.Errorf("check job %s of runner %q: %w", describeJob(*c.Job), c.Pod.RunnerName, err)
		if r.limited(o, err) {
			return false
		}
		o.Result, o.Err = fleet.JobUnchecked, err
		return false
	}
	o.Job = &st
	if !st.Finished() {
		o.Result = fleet.ProtectedJob
		return false
	}
	return true
}

// jobChecks counts one sweep's job checks that held their runner
// (protected, or no answer), against their bound.
type jobChecks struct{ held, max int }

func describeJob(j fleet.Job) string {
	if j.JobID != 0 {
		return fmt.Sprintf("%s run %d job %d", j.Repository(), j.RunID, j.JobID)
	}
	return fmt.Sprintf("%s run %d", j.Repository(), j.RunID)
}
