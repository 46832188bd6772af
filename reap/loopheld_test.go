package reap

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

var (
	loopingGroup = fleet.GroupOf("ReplicaSet", "ns", "broken")
	healthyGroup = fleet.GroupOf("ReplicaSet", "ns", "healthy")
)

func inGroup(c reconcile.Candidate, g fleet.Group) reconcile.Candidate {
	c.Pod.Group = g
	return c
}

// TestLoopHeldTakeNoTurn: a looping group's runners that will be held
// take neither a log read nor a job check, so that a healthy group's
// runner behind them gets its turn within a small bound, and no request
// is spent on a runner that cannot act this sweep.
func TestLoopHeldTakeNoTurn(t *testing.T) {
	tests := []struct {
		name       string
		maxActions int
		candidate  func(name string, i int) reconcile.Candidate
		// asked is what was read or asked about, by runner.
		asked func(logs *logDesk, jobs *jobDesk) []string
	}{
		{
			name:       "log reads",
			maxActions: 3,
			candidate: func(name string, i int) reconcile.Candidate {
				return running(fleet.Zombie, name, int64(100+i))
			},
			asked: func(logs *logDesk, _ *jobDesk) []string { return logs.reads() },
		},
		{
			name:       "job checks",
			maxActions: 2, // four checks
			candidate: func(name string, i int) reconcile.Candidate {
				return withJob(cand(fleet.Zombie, name, int64(100+i)), int64(100+i))
			},
			asked: func(_ *logDesk, jobs *jobDesk) []string {
				jobs.mu.Lock()
				defer jobs.mu.Unlock()
				var out []string
				for _, a := range jobs.asked {
					var run int64
					var who string
					_, _ = fmt.Sscanf(a, "acme/api/%d@%s", &run, &who)
					out = append(out, who)
				}
				return out
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			logs := &logDesk{tails: map[string]string{}}
			jobs := &jobDesk{status: map[int64]fleet.JobStatus{}}
			var cs []reconcile.Candidate
			for i := 1; i <= 5; i++ {
				name := fmt.Sprintf("a-loop-%d", i)
				logs.tails[name] = tailListening
				jobs.status[int64(100+i)] = fleet.JobStatus{Status: "completed", RunnerName: name}
				cs = append(cs, inGroup(tt.candidate(name, i), loopingGroup))
			}
			logs.tails["b-healthy"] = tailListening
			jobs.status[106] = fleet.JobStatus{Status: "completed", RunnerName: "b-healthy"}
			cs = append(cs, inGroup(tt.candidate("b-healthy", 6), healthyGroup))

			o := opts()
			o.Limits.MaxActions = tt.maxActions
			o.RunnerLogs, o.Jobs = logs, jobs
			r := New(rec, rec, o)
			r.HoldLoops(map[fleet.Group]bool{loopingGroup: true})
			outs := r.Reap(context.Background(), 100, cs)

			assert.Equal(t, map[string]fleet.Result{
				"a-loop-1": fleet.Deleted, "a-loop-2": fleet.LoopHeld, "a-loop-3": fleet.LoopHeld,
				"a-loop-4": fleet.LoopHeld, "a-loop-5": fleet.LoopHeld, "b-healthy": fleet.Deleted,
			}, results(outs))
			assert.ElementsMatch(t, []string{"a-loop-1", "b-healthy"}, tt.asked(logs, jobs),
				"only the group's one candidate and the healthy runner are asked about")
		})
	}
}

// TestLoopHeldNextGoesWhenTheFirstWritesNothing: when the candidate
// admitted for a looping group ends before anything was written for it
// (its pre-flight refused, as an admission webhook that denies its delete
// does every sweep), the group's next candidate takes the group's one
// action; one that needs a check it was not given stays held, and the
// group never gets more than one write a sweep.
func TestLoopHeldNextGoesWhenTheFirstWritesNothing(t *testing.T) {
	denied := errors.New(`admission webhook "deny.example.com" denied the request`)
	tests := []struct {
		name  string
		cs    []reconcile.Candidate
		deny  []string
		want  map[string]fleet.Result
		wrote []string
	}{
		{
			name: "first refused, second goes, third held",
			cs: []reconcile.Candidate{
				inGroup(cand(fleet.Unregistered, "a-loop-1", 0), loopingGroup),
				inGroup(cand(fleet.Unregistered, "a-loop-2", 0), loopingGroup),
				inGroup(cand(fleet.Unregistered, "a-loop-3", 0), loopingGroup),
			},
			deny: []string{"a-loop-1"},
			want: map[string]fleet.Result{
				"a-loop-1": fleet.Failed, "a-loop-2": fleet.Deleted, "a-loop-3": fleet.LoopHeld,
			},
			wrote: []string{"pod:a-loop-2"},
		},
		{
			name: "first two refused, third goes",
			cs: []reconcile.Candidate{
				inGroup(cand(fleet.Unregistered, "a-loop-1", 0), loopingGroup),
				inGroup(cand(fleet.Unregistered, "a-loop-2", 0), loopingGroup),
				inGroup(cand(fleet.Unregistered, "a-loop-3", 0), loopingGroup),
			},
			deny: []string{"a-loop-1", "a-loop-2"},
			want: map[string]fleet.Result{
				"a-loop-1": fleet.Failed, "a-loop-2": fleet.Failed, "a-loop-3": fleet.Deleted,
			},
			wrote: []string{"pod:a-loop-3"},
		},
		{
			name: "first allowed, the rest held",
			cs: []reconcile.Candidate{
				inGroup(cand(fleet.Unregistered, "a-loop-1", 0), loopingGroup),
				inGroup(cand(fleet.Unregistered, "a-loop-2", 0), loopingGroup),
			},
			want:  map[string]fleet.Result{"a-loop-1": fleet.Deleted, "a-loop-2": fleet.LoopHeld},
			wrote: []string{"pod:a-loop-1"},
		},
		{
			name: "the next needs a job check it was not given",
			cs: []reconcile.Candidate{
				inGroup(cand(fleet.Zombie, "a-loop-1", 0), loopingGroup),
				inGroup(withJob(cand(fleet.Zombie, "a-loop-2", 0), 7), loopingGroup),
			},
			deny: []string{"a-loop-1"},
			want: map[string]fleet.Result{"a-loop-1": fleet.Failed, "a-loop-2": fleet.LoopHeld},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{checkErr: map[string]error{}}
			for _, n := range tt.deny {
				rec.checkErr[n] = denied
			}
			o := opts()
			o.Jobs = &jobDesk{status: map[int64]fleet.JobStatus{7: {Status: "completed", RunnerName: "a-loop-2"}}}
			r := New(rec, rec, o)
			r.HoldLoops(map[fleet.Group]bool{loopingGroup: true})
			outs := r.Reap(context.Background(), 100, tt.cs)
			assert.Equal(t, tt.want, results(outs))
			var deletes []string
			for _, w := range rec.writes() {
				if len(w) > 4 && w[:4] == "pod:" {
					deletes = append(deletes, w)
				}
			}
			assert.Equal(t, tt.wrote, deletes)
		})
	}
}
