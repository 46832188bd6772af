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
	"github.com/runner-reaper/runner-reaper/internal/runnerlog"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// logDesk is the runners' logs, by pod name, and the reads it was asked
// for. block makes a read wait for its context to end.
type logDesk struct {
	mu    sync.Mutex
	read  []string
	tails map[string]string
	errs  map[string]error
	block bool
}

func (d *logDesk) TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error) {
	d.mu.Lock()
	d.read = append(d.read, p.Name)
	d.mu.Unlock()
	if d.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := d.errs[p.Name]; err != nil {
		return nil, err
	}
	return []byte(d.tails[p.Name]), nil
}

func (d *logDesk) reads() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.read...)
}

// running is a candidate whose pod's runner container runs.
func running(v fleet.Verdict, name string, regID int64) reconcile.Candidate {
	c := cand(v, name, regID)
	c.Pod.Phase = "Running"
	c.Pod.RunnerName = name
	c.Pod.Runner = fleet.Container{Found: true, Running: true}
	return c
}

const (
	tailListening = "2026-01-01 10:00:00Z: Listening for Jobs\n"
	tailRunning   = tailListening + "2026-01-01 10:00:05Z: Running job: build\n"
	tailDone      = tailRunning + "2026-01-01 10:03:12Z: Job build completed with result: Succeeded\n"
)

// TestRunnerLogGuard: before acting on a running runner of which nothing
// records a job, its log is read; a job it says it started and has not
// ended protects it (no write, no GitHub call, no place in the bound), and
// anything else, a log that cannot be read included, leaves today's rules
// to decide. A runner with a recorded job is the job check's, and one
// that does not run has nothing to say.
func TestRunnerLogGuard(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{
		tails: map[string]string{
			"zombie-running": tailRunning, "unregistered-running": tailRunning, "stamped-running": tailRunning,
			"job-done": tailDone, "listening": tailListening, "silent": "√ Connected to GitHub\n",
			"forged": tailListening + "echo 2026-01-01 10:00:05Z: Running job: build\n",
		},
		errs: map[string]error{
			"no-right":   fmt.Errorf("read the log: %w: pods \"no-right\" is forbidden", fleet.ErrNoLogRight),
			"unreadable": errors.New(`pods "unreadable" not found`),
		},
	}
	o := opts()
	o.RunnerLogs = desk
	o.Jobs = &jobDesk{status: map[int64]fleet.JobStatus{1: {Status: "completed", RunnerName: "with-job"}}}
	o.Limits.MaxActions = 12
	stopped := running(fleet.Zombie, "not-running", 30)
	stopped.Pod.Runner.Running = false
	outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
		running(fleet.Zombie, "zombie-running", 11),
		running(fleet.Unregistered, "unregistered-running", 0),
		running(fleet.OrphanStamped, "stamped-running", 13),
		running(fleet.Zombie, "job-done", 14),
		running(fleet.Zombie, "listening", 15),
		running(fleet.Zombie, "silent", 16),
		running(fleet.Zombie, "forged", 17),
		running(fleet.Zombie, "no-right", 18),
		running(fleet.Zombie, "unreadable", 19),
		withJob(running(fleet.Zombie, "with-job", 20), 1),
		stopped,
		running(fleet.Terminal, "dead", 21),
	})
	assert.Equal(t, map[string]fleet.Result{
		"zombie-running":       fleet.ProtectedJob,
		"unregistered-running": fleet.ProtectedJob,
		"stamped-running":      fleet.ProtectedJob,
		"job-done":             fleet.Deleted,
		"listening":            fleet.Deleted,
		"silent":               fleet.Deleted,
		"forged":               fleet.Deleted,
		"no-right":             fleet.Deleted,
		"unreadable":           fleet.Deleted,
		"with-job":             fleet.Deleted,
		"not-running":          fleet.Deleted,
		"dead":                 fleet.Deleted,
	}, results(outs))
	assert.ElementsMatch(t, []string{"zombie-running", "unregistered-running", "stamped-running", "job-done", "listening",
		"silent", "forged", "no-right", "unreadable"}, desk.reads(), "one read per running runner with no job evidence")
	for _, name := range []string{"zombie-running", "unregistered-running", "stamped-running"} {
		for _, c := range rec.calls {
			assert.NotContains(t, c, ":"+name, "nothing is sent for %s, not even a pre-flight or a look-up: %v", name, rec.calls)
		}
	}
	assert.NotContains(t, fmt.Sprint(rec.calls), "gh:org:acme:11", "the protected runner's registration is not deleted")
	byKey := map[string]Outcome{}
	for _, out := range outs {
		byKey[out.Candidate.Key] = out
	}
	require.NotNil(t, byKey["zombie-running"].RunnerLog)
	assert.Equal(t, runnerlog.Word{Kind: runnerlog.Running, Job: "build"}, byKey["zombie-running"].RunnerLog.Word, "the job's name is kept for the report")
	assert.Equal(t, runnerlog.Completed, byKey["job-done"].RunnerLog.Word.Kind)
	nr := byKey["no-right"]
	require.NotNil(t, nr.RunnerLog)
	assert.ErrorIs(t, nr.RunnerLog.Err, fleet.ErrNoLogRight)
	assert.NoError(t, nr.Err, "an unread log is not the action's error")
	assert.Nil(t, byKey["with-job"].RunnerLog)
	assert.Nil(t, byKey["dead"].RunnerLog)
}

// TestRunnerLogReadsAreBounded: the reads go to the candidates the bound
// would admit, at most one per action the sweep may take, never one per
// runner. A protected runner takes no place: one that needs no read takes
// the place it freed, and one that needs a read, which was not sent, is
// deferred, unread, to a later sweep.
func TestRunnerLogReadsAreBounded(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{tails: map[string]string{"a-busy": tailRunning, "b-idle": tailListening, "c-idle": tailListening}}
	o := opts()
	o.RunnerLogs = desk
	o.Limits.MaxActions = 2
	var cs []reconcile.Candidate
	want := map[string]fleet.Result{"a-busy": fleet.ProtectedJob, "b-idle": fleet.Deleted, "c-idle": fleet.Deferred}
	cs = append(cs, running(fleet.Zombie, "a-busy", 1), running(fleet.Zombie, "b-idle", 2), running(fleet.Zombie, "c-idle", 3))
	for i := range 20 {
		name := fmt.Sprintf("z%02d", 10+i)
		cs = append(cs, running(fleet.Zombie, name, int64(10+i)))
		want[name] = fleet.Deferred
	}
	stopped := running(fleet.Unregistered, "u-stopped", 0)
	stopped.Pod.Runner.Running = false
	cs = append(cs, stopped)
	want["u-stopped"] = fleet.Deleted
	outs := New(rec, rec, o).Reap(context.Background(), 1000, cs)
	assert.Equal(t, want, results(outs))
	assert.ElementsMatch(t, []string{"a-busy", "b-idle"}, desk.reads(), "two places, two reads")
	for _, out := range outs {
		if out.Result == fleet.Deferred {
			assert.Nil(t, out.RunnerLog)
		}
	}
}

// A dry run and an audit read the log as a sweep does, and decide the same.
func TestRunnerLogReadInDryRun(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{tails: map[string]string{"busy": tailRunning, "idle": tailListening}}
	o := opts()
	o.DryRun = true
	o.RunnerLogs = desk
	outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
		running(fleet.Zombie, "busy", 1), running(fleet.Zombie, "idle", 2),
	})
	assert.Equal(t, map[string]fleet.Result{"busy": fleet.ProtectedJob, "idle": fleet.WouldDelete}, results(outs))
	assert.ElementsMatch(t, []string{"busy", "idle"}, desk.reads())
}

// Without a reader (REAPER_READ_RUNNER_LOG=false) nothing is read and
// today's rules decide alone.
func TestRunnerLogGuardOff(t *testing.T) {
	rec := &recorder{}
	outs := New(rec, rec, opts()).Reap(context.Background(), 100, []reconcile.Candidate{running(fleet.Zombie, "busy", 1)})
	assert.Equal(t, fleet.Deleted, outs[0].Result)
	assert.Nil(t, outs[0].RunnerLog)
}

// A read that gets no answer within the reads' budget (a kubelet whose
// node is gone) is no evidence: the action goes on, and says why the log
// was not read.
func TestRunnerLogReadBudget(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{block: true}
	o := opts()
	o.RunnerLogs = desk
	o.ActionTimeout = 100 * time.Millisecond
	outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{running(fleet.Zombie, "node-gone", 1)})
	assert.Equal(t, fleet.Deleted, outs[0].Result)
	require.NotNil(t, outs[0].RunnerLog)
	assert.ErrorIs(t, outs[0].RunnerLog.Err, errLogReadBudget)
	assert.Equal(t, []string{"node-gone"}, desk.reads())
}

// Once GitHub has rate-limited the sweep, a runner whose action needs
// GitHub is held whatever its log says, so its log is not read.
func TestRunnerLogNotReadWhenHeld(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{tails: map[string]string{"z": tailRunning}}
	o := opts()
	o.RunnerLogs = desk
	r := New(rec, rec, o)
	r.HoldGitHub(&fleet.RateLimitError{Until: time.Now().Add(time.Hour), Err: errors.New("API rate limit exceeded")})
	outs := r.Reap(context.Background(), 100, []reconcile.Candidate{running(fleet.Zombie, "z", 1)})
	assert.Equal(t, fleet.RateLimited, outs[0].Result)
	assert.Empty(t, desk.reads())
}

// A read the reads' budget never sent (four at a time, and the sweep's
// share ran out before the fifth got its slot) is no look at all, not "no
// evidence": its runner is deferred, its mark kept and no place taken, as
// a job check not sent is. The reads that were sent and got no answer are
// no evidence, and their actions go on.
func TestRunnerLogReadsNotSentDefer(t *testing.T) {
	rec := &recorder{}
	desk := &logDesk{block: true}
	o := opts()
	o.RunnerLogs, o.ActionTimeout, o.Spare = desk, DefaultSpare, 100*time.Millisecond
	// A quarter of what the sweep has left to act in is 100 ms, far less
	// than a read's own 5 s: the four reads sent hold every slot until
	// the share ends, and the other two are never sent.
	ctx, cancel := context.WithTimeout(context.Background(), ReportReserve+minLeft+400*time.Millisecond)
	defer cancel()
	var cs []reconcile.Candidate
	for i := range int64(6) {
		cs = append(cs, running(fleet.Zombie, fmt.Sprintf("node-gone-%d", i), 10+i))
	}
	outs := New(rec, rec, o).Reap(ctx, 100, cs)
	sent, deferred := 0, 0
	for _, out := range outs {
		switch out.Result {
		case fleet.Deleted:
			sent++
			require.NotNil(t, out.RunnerLog)
			assert.ErrorIs(t, out.RunnerLog.Err, errLogReadBudget)
		case fleet.Deferred:
			deferred++
			assert.Nil(t, out.RunnerLog, "nothing was read")
			assert.ErrorContains(t, out.Err, "not sent within the log reads' budget")
			assert.False(t, out.Bounded, "deferred by the reads' budget, not by the action bound")
			for _, c := range rec.calls {
				assert.NotContains(t, c, ":"+out.Candidate.Key, "nothing is sent for a runner whose log was not read")
			}
		default:
			t.Errorf("%s: %s", out.Candidate.Key, out.Result)
		}
	}
	assert.Equal(t, 4, sent)
	assert.Equal(t, 2, deferred)
	assert.Len(t, desk.reads(), 4)
}

// A candidate that needs a read and has none is deferred, never let go on:
// whatever left it without one, no read is no look.
func TestRunnerLogMissingReadDefers(t *testing.T) {
	o := opts()
	o.RunnerLogs = &logDesk{}
	r := New(&recorder{}, &recorder{}, o)
	out := Outcome{Candidate: running(fleet.Zombie, "z", 1), Result: fleet.Deferred}
	assert.False(t, r.logSays(context.Background(), &out, true, nil))
	assert.Equal(t, fleet.Deferred, out.Result)
	assert.ErrorContains(t, out.Err, "not sent within the log reads' budget")
	assert.Nil(t, out.RunnerLog)
}

// The guard was blind to a runner it let be removed when its read failed
// or its tail said nothing either way, cut or not; a word (listening, a
// job completed) is not blind, nor is a runner not removed.
func TestLogBlind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result fleet.Result
		read   *LogRead
		why    string
	}{
		{"unread", fleet.Deleted, &LogRead{Err: errLogReadBudget}, BlindUnread},
		{"cut", fleet.Deleted, &LogRead{Word: runnerlog.Word{Cut: true}}, BlindCut},
		{"silent", fleet.WouldDelete, &LogRead{}, BlindSilent},
		{"listening", fleet.Deleted, &LogRead{Word: runnerlog.Word{Kind: runnerlog.Listening}}, ""},
		{"completed", fleet.Deleted, &LogRead{Word: runnerlog.Word{Kind: runnerlog.Completed, Job: "b", Result: "Failed"}}, ""},
		{"not removed", fleet.NotReached, &LogRead{}, ""},
		{"protected", fleet.ProtectedJob, &LogRead{Word: runnerlog.Word{Kind: runnerlog.Running, Job: "b", Cut: true}}, ""},
		{"not read", fleet.Deleted, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, blind := Outcome{Result: tc.result, RunnerLog: tc.read}.LogBlind()
			assert.Equal(t, tc.why, why)
			assert.Equal(t, tc.why != "", blind)
		})
	}
}
