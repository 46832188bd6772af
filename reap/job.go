package reap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// checkJob decides, from what GitHub said of the candidate's job
// (askJobs), whether the candidate may go on. A job queued or in progress
// on this runner protects it (ProtectedJob); a finished one lets it go on;
// a check that failed, that got no answer within the checks' budget, or a
// job that cannot be asked about, holds it (JobUnchecked), because no
// answer is not evidence that the job ended. A rate limit holds it as
// every GitHub call does.
func (r *Reaper) checkJob(ctx context.Context, o *Outcome, a *jobAnswer) bool {
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
	if a == nil {
		// Its check was not sent within the checks' budget: deferred,
		// its mark kept, and since it was not asked it goes before
		// those that were next sweep.
		o.Result, o.Err = fleet.Deferred, fmt.Errorf("check job %s of runner %q: %w", describeJob(*c.Job), c.Pod.RunnerName, errJobCheckNotSent)
		return false
	}
	if a.err != nil {
		err := fmt.Errorf("check job %s of runner %q: %w", describeJob(*c.Job), c.Pod.RunnerName, a.err)
		if r.limited(o, err) {
			return false
		}
		o.Result, o.Err = fleet.JobUnchecked, err
		return false
	}
	st := a.status
	o.Job = &st
	if !st.Finished() {
		o.Result = fleet.ProtectedJob
		return false
	}
	return true
}

// jobAnswer is what GitHub said of one candidate's job, or why it said
// nothing.
type jobAnswer struct {
	status fleet.JobStatus
	err    error
}

// errJobChecksBudget is why a job check that was sent got no answer, and
// errJobCheckNotSent why one whose turn it was was not sent: the checks'
// budget ran out first.
var (
	errJobChecksBudget = errors.New("no answer within the job checks' budget (a share of the sweep, each check at most 5 s)")
	errJobCheckNotSent = errors.New("not sent within the job checks' budget (a share of the sweep); it is asked first next sweep")
)

// The job checks' budget. They are optional reads, made for the few
// candidates that would stop a runner with a known job, and a jobs API
// that accepts connections and never answers must not starve the actions
// that need no check: the checks run all at once before anything acts, at
// most jobCheckConcurrency at a time, each within jobCheckTimeout, and all
// within jobCheckShare of the time the sweep has left to act in.
const (
	jobCheckConcurrency = 4
	jobCheckTimeout     = 5 * time.Second
	jobCheckShare       = 4 // a quarter
)

// askJobs asks GitHub about the jobs of the candidates whose turn it is
// (jobCheckTurns), under the checks' budget, and returns each answer by
// the candidate's index: a check sent that got no answer in time answers
// errJobChecksBudget (job-unchecked, and asked after the others next
// sweep), and a candidate whose check was never sent has none (deferred,
// and asked before them). Nothing is asked once GitHub has rate-limited
// the sweep, and no check not yet sent is sent once it does.
func (r *Reaper) askJobs(ctx context.Context, cs []reconcile.Candidate, turns map[int]bool) map[int]*jobAnswer {
	if len(turns) == 0 || r.opts.Jobs == nil || r.limit != nil || r.tooLate(ctx) {
		return nil
	}
	end, timeout := r.asksEnd(ctx, jobCheckTimeout, len(turns), jobCheckConcurrency, jobCheckShare)
	bctx, stop := context.WithDeadline(ctx, end)
	defer stop()
	var mu sync.Mutex
	answers := make(map[int]*jobAnswer, len(turns))
	sem := make(chan struct{}, jobCheckConcurrency)
	var wg sync.WaitGroup
	for i := range cs {
		if !turns[i] {
			continue
		}
		c := cs[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-bctx.Done():
				return
			}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(bctx, timeout)
			defer cancel()
			if bctx.Err() != nil {
				return
			}
			st, err := r.opts.Jobs.JobStatus(cctx, *c.Job, c.Pod.RunnerName)
			if err != nil && bctx.Err() != nil && fleet.AsRateLimit(err) == nil {
				// The budget ran out under it: sent, and no answer.
				err = errJobChecksBudget
			}
			if fleet.AsRateLimit(err) != nil {
				// GitHub asks clients to stop: no check not yet sent
				// is sent.
				stop()
			}
			mu.Lock()
			answers[i] = &jobAnswer{status: st, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if rl := fleet.AsRateLimit(a.err); rl != nil && (r.limit == nil || rl.Until.After(r.limit.Until)) {
			// Every candidate that needs GitHub is held from here on,
			// whether or not its own check was sent (HoldGitHub).
			r.limit = rl
		}
	}
	return answers
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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
// A candidate waiting behind its looping group's first (loopWaiting) is
// never asked: it is held whatever GitHub would say.
func (r *Reaper) jobCheckTurns(cs []reconcile.Candidate, waiting map[int]bool) map[int]bool {
	var idx []int
	for i, c := range cs {
		if waiting[i] {
			continue
		}
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

// asksEnd is when a round of n asks made before admission (the job checks,
// the log reads) must end: each within per (and within an action's own
// budget), conc at a time, and all within a share of the time the sweep
// has left before its spare, so that no action that needs no ask waits
// long on one. It also returns each ask's own bound.
func (r *Reaper) asksEnd(ctx context.Context, per time.Duration, n, conc, share int) (time.Time, time.Duration) {
	if r.opts.ActionTimeout > 0 {
		per = min(per, r.opts.ActionTimeout)
	}
	end := time.Now().Add(per * time.Duration((n+conc-1)/conc))
	if last, ok := lastMoment(ctx); ok {
		left := time.Until(last) - max(r.opts.Spare, minLeft)
		end = minTime(end, time.Now().Add(left/time.Duration(share)))
	}
	return end, per
}
