package reap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// jobDesk answers the job guard's questions, by run id, and records them.
type jobDesk struct {
	mu     sync.Mutex
	asked  []string
	status map[int64]fleet.JobStatus
	err    map[int64]error
}

func (d *jobDesk) JobStatus(_ context.Context, j fleet.Job, runner string) (fleet.JobStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, fmt.Sprintf("%s/%d@%s", j.Repository(), j.RunID, runner))
	if err := d.err[j.RunID]; err != nil {
		return fleet.JobStatus{}, err
	}
	return d.status[j.RunID], nil
}

func withJob(c reconcile.Candidate, run int64) reconcile.Candidate {
	c.Job = &fleet.Job{Owner: "acme", Repo: "api", RunID: run}
	c.Pod.RunnerName = c.Pod.Name
	return c
}

// TestJobGuard: before anything is deleted for a running runner known to
// have held a job, GitHub is asked about that job, whatever the
// registration's busy and status flags say. A job queued or in progress
// on the runner protects it (no write, no place in the bound); a finished
// one lets the protocol go on; a check that fails, or a job that cannot
// be asked about, holds the runner.
func TestJobGuard(t *testing.T) {
	rec := &recorder{}
	desk := &jobDesk{
		status: map[int64]fleet.JobStatus{
			1: {Status: "in_progress", RunnerName: "lying-idle"},
			2: {Status: "queued", RunnerName: "queued"},
			3: {Status: "completed", Conclusion: "failure", RunnerName: "job-over"},
			4: {Status: "in_progress", RunnerName: "stamped"},
		},
		err: map[int64]error{
			5: fmt.Errorf("403 Resource not accessible by integration"),
			6: fmt.Errorf("wrapped: %w", fleet.ErrJobUnknown),
		},
	}
	o := opts()
	o.Jobs = desk
	o.Limits.MaxActions = 4
	unknown := cand(fleet.Zombie, "unaskable", 9)
	unknown.Job = &fleet.Job{RequestID: 77}
	outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
		withJob(cand(fleet.Zombie, "lying-idle", 11), 1),
		withJob(cand(fleet.Zombie, "queued", 0), 2),
		withJob(cand(fleet.Zombie, "job-over", 13), 3),
		withJob(cand(fleet.OrphanStamped, "stamped", 14), 4),
		withJob(cand(fleet.Zombie, "no-rights", 15), 5),
		withJob(cand(fleet.Zombie, "not-found", 16), 6),
		unknown,
		withJob(cand(fleet.Terminal, "dead", 18), 1),
		cand(fleet.Zombie, "no-job", 19),
		cand(fleet.Zombie, "z-plain-1", 20),
		cand(fleet.Zombie, "z-plain-2", 21),
	})
	assert.Equal(t, map[string]fleet.Result{
		"lying-idle": fleet.ProtectedJob,
		"queued":     fleet.ProtectedJob,
		"job-over":   fleet.Deleted,
		"stamped":    fleet.ProtectedJob,
		"no-rights":  fleet.JobUnchecked,
		"not-found":  fleet.JobUnchecked,
		"unaskable":  fleet.JobUnchecked,
		// A terminal pod's runner is over: its job is not asked about.
		"dead":   fleet.Deleted,
		"no-job": fleet.Deleted,
		// The protected and unchecked took no place in the bound of 4.
		"z-plain-1": fleet.Deleted,
		"z-plain-2": fleet.Deferred,
	}, results(outs))
	for _, name := range []string{"lying-idle", "queued", "stamped", "no-rights", "not-found", "unaskable"} {
		assert.NotContains(t, rec.calls, fmt.Sprintf("pod:%s", name))
		for _, c := range rec.calls {
			assert.NotContains(t, c, ":"+name, "nothing is sent for %s, not even a pre-flight: %v", name, rec.calls)
		}
	}
	assert.NotContains(t, fmt.Sprint(rec.calls), "gh:org:acme:11", "the protected runner's registration is not deleted")
	// One question per runner with a job the bound would admit (all of
	// them here: the zombies sort before the plain ones), none for the
	// terminal pod or the runner with no job.
	assert.ElementsMatch(t, []string{"acme/api/1@lying-idle", "acme/api/2@queued", "acme/api/3@job-over", "acme/api/4@stamped",
		"acme/api/5@no-rights", "acme/api/6@not-found"}, desk.asked)
	for _, out := range outs {
		switch out.Candidate.Key {
		case "lying-idle", "job-over":
			require.NotNil(t, out.Job, "the job's status is kept for the report")
		case "no-rights", "unaskable":
			assert.Error(t, out.Err)
		}
	}
}

// TestJobGuardFailsClosed: a reaper given no way to ask about jobs acts on
// no running runner with a known job; a rate limit holds the check as it
// holds every GitHub call; and dry-run asks as a sweep would.
func TestJobGuardFailsClosed(t *testing.T) {
	t.Run("no job check configured", func(t *testing.T) {
		rec := &recorder{}
		outs := New(rec, rec, opts()).Reap(context.Background(), 100, []reconcile.Candidate{withJob(cand(fleet.Zombie, "z", 1), 1)})
		assert.Equal(t, fleet.JobUnchecked, outs[0].Result)
		assert.Empty(t, rec.calls)
	})
	t.Run("rate limited", func(t *testing.T) {
		rec := &recorder{}
		desk := &jobDesk{err: map[int64]error{1: &fleet.RateLimitError{Until: time.Now().Add(time.Hour), Err: errors.New("API rate limit exceeded")}}}
		o := opts()
		o.Jobs = desk
		cs := []reconcile.Candidate{cand(fleet.Zombie, "needs-github", 99)}
		want := map[string]fleet.Result{"needs-github": fleet.RateLimited}
		for i := range int64(12) {
			name := fmt.Sprintf("job-%d", i)
			cs = append(cs, withJob(cand(fleet.Zombie, name, 10+i), 1))
			want[name] = fleet.RateLimited
		}
		outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
		assert.Equal(t, want, results(outs))
		// The checks go four at a time: those in flight when GitHub said
		// rate-limited were sent, and no other.
		assert.LessOrEqual(t, len(desk.asked), jobCheckConcurrency, "no check sent after the limit")
		assert.Empty(t, rec.writes())
	})
	t.Run("no more than twice what the bound admits is asked about", func(t *testing.T) {
		rec := &recorder{}
		desk := &jobDesk{status: map[int64]fleet.JobStatus{1: {Status: "in_progress"}, 2: {Status: "completed"}, 3: {Status: "completed"}}}
		o := opts()
		o.Jobs, o.Limits.MaxActions = desk, 1
		outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
			withJob(cand(fleet.Zombie, "a-protected", 1), 1),
			withJob(cand(fleet.Zombie, "b-over", 2), 2),
			withJob(cand(fleet.Zombie, "c-over", 3), 3),
		})
		assert.Equal(t, map[string]fleet.Result{"a-protected": fleet.ProtectedJob, "b-over": fleet.Deleted, "c-over": fleet.Deferred}, results(outs))
		assert.ElementsMatch(t, []string{"acme/api/1@a-protected", "acme/api/2@b-over"}, desk.asked, "twice the bound's actions are asked about, the first in its order")
	})
	t.Run("dry run asks too", func(t *testing.T) {
		rec := &recorder{}
		desk := &jobDesk{status: map[int64]fleet.JobStatus{1: {Status: "in_progress"}, 2: {Status: "completed"}}}
		o := opts()
		o.Jobs, o.DryRun = desk, true
		outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
			withJob(cand(fleet.Zombie, "running", 1), 1),
			withJob(cand(fleet.Zombie, "over", 2), 2),
		})
		assert.Equal(t, map[string]fleet.Result{"running": fleet.ProtectedJob, "over": fleet.WouldDelete}, results(outs))
		assert.Empty(t, rec.writes())
	})
}

// TestJobGuardBeforeReleasingAStuckEphemeralRunner: releasing ARC's
// registration finalizer from an EphemeralRunner stuck deleting lets ARC
// delete its pod, so a pod whose runner still runs is asked about first,
// as any running runner is: a job in progress protects it, whatever the
// list said of its registration. A pod whose runner has ended holds no job
// and is not asked about.
func TestJobGuardBeforeReleasingAStuckEphemeralRunner(t *testing.T) {
	stuck := func(name string, run int64, running bool) reconcile.Candidate {
		c := withJob(cand(fleet.Zombie, name, 0), run)
		c.Verdict, c.RegistrationAbsent, c.RunnerID = fleet.ARCStuckDeleting, true, 9
		c.EphemeralRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: name, UID: "u-er-" + name, ResourceVersion: "3", RunnerID: 9, ScopeKey: scope.Key(),
			DeletingSince: fleet.StampOf(time.Now().Add(-time.Hour)), Finalizers: []string{fleet.ARCRegistrationFinalizer}, Job: c.Job}
		c.Pod.Phase = "Running"
		c.Pod.Runner = fleet.Container{Found: true, Running: running}
		if !running {
			c.Pod.Runner.Terminated = &fleet.Termination{ExitCode: 1, Reason: "Error"}
		}
		return c
	}
	desk := &jobDesk{status: map[int64]fleet.JobStatus{
		1: {Status: "in_progress", RunnerName: "running"},
		2: {Status: "completed", Conclusion: "success", RunnerName: "job-over"},
	}}
	rec := &recorder{}
	o := opts()
	o.Jobs = desk
	outs := New(rec, rec, o).Reap(context.Background(), 10, []reconcile.Candidate{
		stuck("running", 1, true),
		stuck("job-over", 2, true),
		stuck("ended", 1, false),
	})
	assert.Equal(t, map[string]fleet.Result{
		"running":  fleet.ProtectedJob,
		"job-over": fleet.Deleted,
		"ended":    fleet.Deleted,
	}, results(outs))
	assert.ElementsMatch(t, []string{"release:job-over", "er-event:job-over", "release:ended", "er-event:ended"}, rec.writes())
	assert.ElementsMatch(t, []string{"acme/api/1@running", "acme/api/2@job-over"}, desk.asked,
		"the pod whose runner ended is not asked about")
}

// TestJobChecksAreBounded: a protected runner takes no place in the bound,
// so the checks that hold their runner have a bound of their own, twice
// the actions a sweep may take. In an incident that lists every runner
// offline while their jobs run, the guard costs a few requests a sweep,
// not one per runner; the rest wait, their marks kept, and a candidate
// that needs no check still acts.
func TestJobChecksAreBounded(t *testing.T) {
	desk := &jobDesk{status: map[int64]fleet.JobStatus{}}
	var cs []reconcile.Candidate
	for i := range 10 {
		name := fmt.Sprintf("busy-%02d", i)
		desk.status[int64(100+i)] = fleet.JobStatus{Status: "in_progress", RunnerName: name}
		c := withJob(cand(fleet.Zombie, name, int64(100+i)), int64(100+i))
		c.Since = time.Unix(int64(i), 0) // oldest first, in name order
		cs = append(cs, c)
	}
	plain := cand(fleet.Unregistered, "no-job", 0)
	cs = append(cs, plain)
	rec := &recorder{}
	o := opts()
	o.Jobs, o.Limits.MaxActions = desk, 2
	outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
	got := results(outs)
	assert.Len(t, desk.asked, 4, "2 x REAPER_MAX_ACTIONS checks that protect")
	for i := range 10 {
		name := fmt.Sprintf("busy-%02d", i)
		want := fleet.Deferred
		if i < 4 {
			want = fleet.ProtectedJob
		}
		assert.Equal(t, want, got[name], name)
	}
	assert.Equal(t, fleet.Deleted, got["no-job"], "a candidate that needs no check still acts")
	for _, w := range rec.writes() {
		assert.NotContains(t, w, "busy-", "no protected runner is written to")
	}
}

// TestJobChecksTakeTurns: checks that fail for good (a repository the
// token cannot read, a run GitHub no longer has) do not hold the others
// back for ever: the bounded checks go to the candidates asked longest ago
// first, and never asked first of all, so a younger candidate whose job
// finished is asked, and acted on, in the very next sweep.
func TestJobChecksTakeTurns(t *testing.T) {
	desk := &jobDesk{
		status: map[int64]fleet.JobStatus{9: {Status: "completed", Conclusion: "success", RunnerName: "young"}},
		err:    map[int64]error{},
	}
	var cs []reconcile.Candidate
	for i := range 4 {
		name := fmt.Sprintf("unreadable-%d", i)
		desk.err[int64(100+i)] = fmt.Errorf("403 Resource not accessible by integration")
		c := withJob(cand(fleet.Zombie, name, int64(100+i)), int64(100+i))
		c.Since = time.Unix(int64(i), 0) // older than young: first in the bound's order
		c.Mark.JobCheckedAt = time.Unix(1000, 0)
		cs = append(cs, c)
	}
	young := withJob(cand(fleet.Zombie, "young", 9), 9)
	young.Since = time.Unix(500, 0)
	cs = append(cs, young)
	rec := &recorder{}
	o := opts()
	o.Jobs, o.Limits.MaxActions = desk, 2
	got := results(New(rec, rec, o).Reap(context.Background(), 100, cs))
	assert.Equal(t, fleet.Deleted, got["young"], "never asked, so asked first")
	assert.Len(t, desk.asked, 4, "2 x REAPER_MAX_ACTIONS checks")
	assert.Contains(t, desk.asked, "acme/api/9@young")
	n := 0
	for i := range 4 {
		if got[fmt.Sprintf("unreadable-%d", i)] == fleet.JobUnchecked {
			n++
		}
	}
	assert.Equal(t, 3, n, "three of the four failing checks had their turn; the fourth waits")
}

// TestJobCheckTurnsGoOnlyToCandidatesThatWouldBeAsked: a candidate that is
// only reported (a scale-set pod whose EphemeralRunner was not listed) or
// already deleting is never asked about its job, so it takes no turn: it
// would never be stamped, and would hold its turn on every sweep.
func TestJobCheckTurnsGoOnlyToCandidatesThatWouldBeAsked(t *testing.T) {
	desk := &jobDesk{status: map[int64]fleet.JobStatus{9: {Status: "completed", Conclusion: "success", RunnerName: "asked"}}}
	var cs []reconcile.Candidate
	for i := range 3 {
		c := withJob(cand(fleet.Zombie, fmt.Sprintf("reported-%d", i), int64(100+i)), 100)
		c.Pod.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: c.Pod.Name, UID: "o-" + c.Pod.Name}
		c.Since = time.Unix(int64(i), 0)
		cs = append(cs, c)
	}
	deleting := withJob(cand(fleet.Zombie, "deleting", 200), 100)
	deleting.Pod.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "deleting", UID: "o-deleting"}
	deleting.OwnerRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: "deleting", UID: "o-deleting", DeletingSince: fleet.StampOf(time.Unix(1, 0))}
	deleting.Since = time.Unix(5, 0)
	asked := withJob(cand(fleet.Zombie, "asked", 9), 9)
	asked.Since = time.Unix(10, 0)
	rec := &recorder{}
	o := opts()
	o.Jobs, o.Limits.MaxActions = desk, 1
	got := results(New(rec, rec, o).Reap(context.Background(), 100, append(cs, deleting, asked)))
	assert.Equal(t, fleet.Deleted, got["asked"])
	assert.Equal(t, []string{"acme/api/9@asked"}, desk.asked)
}

// hangingDesk is a jobs API that accepts the request and never answers.
type hangingDesk struct {
	mu    sync.Mutex
	asked int
}

func (d *hangingDesk) JobStatus(ctx context.Context, _ fleet.Job, _ string) (fleet.JobStatus, error) {
	d.mu.Lock()
	d.asked++
	d.mu.Unlock()
	<-ctx.Done()
	return fleet.JobStatus{}, ctx.Err()
}

// A jobs API that never answers starves nothing: the checks go up front,
// together, under a budget of their own (each within its timeout, all
// within a share of the sweep), so the actions that need no check (a
// terminal pod, a zombie with no job recorded) still act, and the runners
// whose check got no answer are held (job-unchecked), to be asked first
// next sweep.
func TestJobChecksThatHangStarveNothing(t *testing.T) {
	rec := &recorder{}
	desk := &hangingDesk{}
	o := opts()
	// Each check may take the action's 5 s: one after the other, two of
	// them would leave the others, and every action, not-reached.
	o.Jobs, o.ActionTimeout, o.Spare = desk, DefaultSpare, 100*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	cs := []reconcile.Candidate{cand(fleet.Terminal, "dead", 0), cand(fleet.Zombie, "no-job", 2)}
	for i := range int64(6) {
		cs = append(cs, withJob(cand(fleet.Zombie, fmt.Sprintf("hangs-%d", i), 10+i), 10+i))
	}
	outs := New(rec, rec, o).Reap(ctx, 100, cs)
	got := results(outs)
	assert.Equal(t, fleet.Deleted, got["dead"], "a terminal pod needs no job check")
	assert.Equal(t, fleet.Deleted, got["no-job"], "nor does a runner with no job recorded")
	// Four at a time, within a quarter of what the sweep had left: the
	// four sent got no answer (job-unchecked, asked again after the
	// others); the two never sent are deferred, to go first next sweep.
	unchecked, deferred := 0, 0
	for _, out := range outs {
		switch out.Result {
		case fleet.JobUnchecked:
			unchecked++
			assert.ErrorContains(t, out.Err, "no answer within the job checks' budget")
		case fleet.Deferred:
			deferred++
			assert.ErrorContains(t, out.Err, "not sent within the job checks' budget")
		}
	}
	assert.Equal(t, 4, unchecked)
	assert.Equal(t, 2, deferred)
	assert.Equal(t, 4, desk.asked)

	// Next sweep: a check that got no answer (stamped, as the sweep
	// records job-unchecked) goes behind those never asked, so that the
	// same slow runner does not go first every time.
	asked := withJob(cand(fleet.Zombie, "asked-before", 20), 20)
	asked.Mark.JobCheckedAt = time.Now()
	next := opts()
	next.Jobs, next.Limits.MaxActions = desk, 1 // room for two checks
	turns := New(rec, rec, next).jobCheckTurns([]reconcile.Candidate{
		asked, withJob(cand(fleet.Zombie, "never-a", 21), 21), withJob(cand(fleet.Zombie, "never-b", 22), 22),
	}, nil)
	assert.Equal(t, map[int]bool{1: true, 2: true}, turns)
}
