package reap

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
func (r *Reaper) checkJob(ctx context.Context, o *Outcome) bool {
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
	actx, cancel := r.actionContext(ctx, ObjectRoom)
	defer cancel()
	st, err := r.opts.Jobs.JobStatus(actx, *c.Job, c.Pod.RunnerName)
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

// asks reports whether the job guard would ask GitHub about the
// candidate's job: one that cannot be asked about is held without a
// request.
func (r *Reaper) asks(c reconcile.Candidate) bool {
	return r.opts.Jobs != nil && c.Job != nil && c.Job.Known()
}

// jobCheckTurns picks, among the ordered candidates, those whose job may be
// asked about this sweep: at most twice the actions the sweep may take,
// the ones asked longest ago first (never asked, first of all), in the
// bound's order otherwise. A protected runner takes no place in the
// bound, so without a bound of their own the checks would cost a run's
// job pages per runner on every sweep of an incident that lists every
// runner offline, or with a token that cannot read Actions, and spend the
// rate limit the lists need. The rotation keeps checks that fail for good
// from holding the others back for ever: each takes its turn behind them.
func (r *Reaper) jobCheckTurns(cs []reconcile.Candidate) map[int]bool {
	var idx []int
	for i, c := range cs {
		// Only a candidate that would reach the check takes a turn: one
		// only reported, or already deleting, is never asked, never
		// stamped, and would hold its turn on every sweep.
		if needsJobCheck(c) && r.asks(c) && r.Action(c) != Report && !alreadyDeleting(c) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cs[a].Mark.JobCheckedAt.Compare(cs[b].Mark.JobCheckedAt)
	})
	turns := make(map[int]bool, len(idx))
	for _, i := range idx[:min(len(idx), 2*r.opts.Limits.MaxActions)] {
		turns[i] = true
	}
	return turns
}

func describeJob(j fleet.Job) string {
	if j.JobID != 0 {
		return fmt.Sprintf("%s run %d job %d", j.Repository(), j.RunID, j.JobID)
	}
	return fmt.Sprintf("%s run %d", j.Repository(), j.RunID)
}
