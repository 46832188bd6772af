package reap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/runnerlog"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// RunnerLogs reads the tail of a pod's runner container's log: the
// runner's own word on whether it runs a job, for runners of which nothing
// else says so.
type RunnerLogs interface {
	TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error)
}

// LogRead is what the guard read of a runner's log before acting on it.
type LogRead struct {
	// Word is what the runner last said; Silent when the log could not be
	// read.
	Word runnerlog.Word
	// Err is why the log could not be read; it wraps fleet.ErrNoLogRight
	// when RBAC refused the read. It is no evidence either way, and not
	// the action's error: the action goes on by today's rules.
	Err error
}

// needsLogRead reports whether the candidate's action could stop a runner
// that may be running a job of which there is no evidence at all: its pod's
// runner container runs, and neither ARC nor the pool recorded a job (with
// a job recorded, the job check rules: needsJobCheck). A runner that is
// not running has no listener to say anything, and no job to lose.
func (r *Reaper) needsLogRead(c reconcile.Candidate) bool {
	return r.opts.RunnerLogs != nil && c.Job == nil && c.Pod != nil && c.Verdict != fleet.Terminal &&
		c.Pod.Runner.Running && !reconcile.RunnerEnded(c.Pod)
}

// logTurns picks the candidates whose runner's log is read this sweep:
// those that need a read (needsLogRead) among the candidates the bound
// would admit if no runner turned out protected. The bound is walked on a
// copy of the sweep's budget, in the order the loop admits, and every
// candidate that would take a place takes one, so the reads are at most
// one per action the sweep may take, never one per pod observed. A
// candidate that needs a read and finds no turn (a protected runner freed
// a place it could have taken) is deferred to a later sweep, which reads
// it. One that GitHub's rate limit holds anyway is not read, nor one
// waiting behind its looping group's first (loopWaiting).
func (r *Reaper) logTurns(cs []reconcile.Candidate, budget *reconcile.Budget, jobTurns, waiting map[int]bool) map[int]bool {
	if r.opts.RunnerLogs == nil {
		return nil
	}
	scratch := *budget
	turns := map[int]bool{}
	for i, c := range cs {
		switch {
		case r.Action(c) == Report, alreadyDeleting(c), !scratch.Fits(c):
			continue
		case scratch.LoopHeld(c) || waiting[i] && r.needsTurn(c):
			continue
		case needsJobCheck(c) && (!r.asks(c) || !jobTurns[i]):
			// Held or deferred by the job guard: it takes no place.
			continue
		case r.needsLogRead(c) && r.limit != nil && r.needsGitHub(c):
			continue
		case r.needsLogRead(c):
			turns[i] = true
		}
		scratch.Admit(c)
	}
	return turns
}

// The log reads' budget, as the job checks': each read is one request the
// API server passes to a kubelet, and a kubelet that does not answer (its
// node gone, as a zombie's may be) must not starve the actions. They run
// all at once before anything acts, at most logReadConcurrency at a time,
// each within logReadTimeout, all within logReadShare of the time the
// sweep has left to act in. A read sent that they leave without an answer
// is no evidence, as a read that failed; one they never sent defers its
// runner.
const (
	logReadConcurrency = 4
	logReadTimeout     = 5 * time.Second
	logReadShare       = 4 // a quarter
)

// errLogReadBudget is why a read that was sent got no answer, and
// errLogReadNotSent why one whose turn it was was not sent: the reads'
// budget ran out first.
var (
	errLogReadBudget  = errors.New("no answer within the log reads' budget (a share of the sweep, each read at most 5 s)")
	errLogReadNotSent = errors.New("not sent within the log reads' budget (a share of the sweep); it is read next sweep")
)

// readLogs reads the logs of the candidates whose turn it is (logTurns)
// under the reads' budget, and returns what each said by the candidate's
// index: a read sent has an answer, an error when it failed or was cut by
// the budget; a read never sent (the budget ran out before its slot came)
// has none.
func (r *Reaper) readLogs(ctx context.Context, cs []reconcile.Candidate, turns map[int]bool) map[int]*LogRead {
	if len(turns) == 0 {
		return nil
	}
	end, timeout := r.asksEnd(ctx, logReadTimeout, len(turns), logReadConcurrency, logReadShare)
	bctx, stop := context.WithDeadline(ctx, end)
	defer stop()
	var mu sync.Mutex
	reads := make(map[int]*LogRead, len(turns))
	sem := make(chan struct{}, logReadConcurrency)
	var wg sync.WaitGroup
	for i := range cs {
		if !turns[i] {
			continue
		}
		p := *cs[i].Pod
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-bctx.Done():
				return
			}
			defer func() { <-sem }()
			if bctx.Err() != nil {
				return
			}
			cctx, cancel := context.WithTimeout(bctx, timeout)
			defer cancel()
			tail, err := r.opts.RunnerLogs.TailRunnerLog(cctx, p)
			read := &LogRead{}
			switch {
			case err != nil && bctx.Err() != nil && !errors.Is(err, fleet.ErrNoLogRight):
				// The budget ran out under it: sent, and no answer.
				read.Err = errLogReadBudget
			case err != nil:
				read.Err = err
			default:
				read.Word = runnerlog.Parse(tail)
			}
			mu.Lock()
			reads[i] = read
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reads
}

// logSays decides, from what the runner's log said (readLogs), whether the
// candidate, which needs a read, may go on. A job the runner said it
// started and has not said it ended protects it (ProtectedJob), as a job
// GitHub says is running does. A read that was never sent defers it, its
// mark kept, as a job check not sent does: a read not made is not "no
// evidence", it is no look at all. Anything else (listening, a job
// completed, nothing either way, a read sent that failed or got no answer
// in time) is no evidence, and today's rules go on.
func (r *Reaper) logSays(ctx context.Context, o *Outcome, turn bool, read *LogRead) bool {
	switch {
	case !turn:
		// A protected runner before it freed the place it fits in,
		// after the reads were sent: deferred, and a later sweep reads
		// its log.
		o.Result = fleet.Deferred
		return false
	case read == nil && r.tooLate(ctx):
		// Too late to read is too late to act.
		o.Result = fleet.NotReached
		return false
	case read == nil:
		o.Result, o.Err = fleet.Deferred, fmt.Errorf("read the log of runner %q: %w", o.Candidate.Pod.RunnerName, errLogReadNotSent)
		return false
	}
	o.RunnerLog = read
	if read.Err == nil && read.Word.RunningJob() {
		o.Result = fleet.ProtectedJob
		return false
	}
	return true
}

// Why the guard was blind to a runner it let go on (LogBlind): its read
// failed or got no answer; its tail was cut by the byte bound and held no
// job running; or its tail held none of the runner's lines (a runner that
// copies its worker's trace to stdout can push them out of the tail).
const (
	BlindUnread = "unread"
	BlindCut    = "cut"
	BlindSilent = "silent"
)

// LogBlind says why the guard let the candidate be removed (or, in a dry
// run, be about to be) with no word from its runner's log, and whether it
// did: its log was read for it and said neither listening nor a job, so
// the flags and the 422 alone decided, as with the read off.
func (o Outcome) LogBlind() (string, bool) {
	l := o.RunnerLog
	if l == nil || (o.Result != fleet.Deleted && o.Result != fleet.WouldDelete) {
		return "", false
	}
	switch {
	case l.Err != nil:
		return BlindUnread, true
	case l.Word.Kind != runnerlog.Silent:
		return "", false
	case l.Word.Cut:
		return BlindCut, true
	default:
		return BlindSilent, true
	}
}
