package sweep

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// TestSettleNeverCallsAHeldLeakASuccess: how the sweep ends when what it
// decided was held back. A leak the configuration keeps the reaper from
// cleaning (a scale-set pod whose EphemeralRunner was not listed) is
// degraded (exit 3), as a job that could not be asked about is; a plain
// report (a stuck EphemeralRunner left to the operator) is not.
func TestSettleNeverCallsAHeldLeakASuccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  reap.Outcome
		want Status
	}{
		{"deleted", reap.Outcome{Result: fleet.Deleted}, StatusComplete},
		{"reported, as configured", reap.Outcome{Result: fleet.Reported}, StatusComplete},
		{"reported: its EphemeralRunner was not listed", reap.Outcome{Result: fleet.Reported, Err: errors.New("its EphemeralRunner was not listed")}, StatusDegraded},
		{"job unchecked", reap.Outcome{Result: fleet.JobUnchecked}, StatusDegraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, err := settle(Result{Outcomes: []reap.Outcome{tc.out}})
			assert.NoError(t, err)
			assert.Equal(t, tc.want, status)
		})
	}
}

// TestSettleMarksRecordsAnUnansweredJobCheck: a mark whose job could not
// be asked about keeps its place and records when it was asked, so the
// next sweep's bounded checks go to the others first; marks of finished
// candidates go; others are left as they were.
func TestSettleMarksRecordsAnUnansweredJobCheck(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	first := now.Add(-time.Hour)
	marks := map[string]fleet.Mark{
		"unchecked": {Verdict: fleet.Zombie, FirstSeen: first},
		"deleted":   {Verdict: fleet.Zombie, FirstSeen: first},
		"deferred":  {Verdict: fleet.Zombie, FirstSeen: first},
	}
	out := func(key string, r fleet.Result) reap.Outcome {
		return reap.Outcome{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Key: key}}, Result: r}
	}
	outs := []reap.Outcome{out("unchecked", fleet.JobUnchecked), out("deleted", fleet.Deleted), out("deferred", fleet.Deferred)}
	dry := maps.Clone(marks)
	cleared, asked := settleMarks(marks, outs, now, true)
	assert.Equal(t, 1, cleared)
	assert.Equal(t, 1, asked)
	assert.Equal(t, map[string]fleet.Mark{
		"unchecked": {Verdict: fleet.Zombie, FirstSeen: first, JobCheckedAt: now},
		"deferred":  {Verdict: fleet.Zombie, FirstSeen: first},
	}, marks)

	// A dry run finished nothing ("deleted" there is would-delete, but
	// the rule must not lean on that): it only records the check.
	cleared, asked = settleMarks(dry, outs, now, false)
	assert.Equal(t, 0, cleared)
	assert.Equal(t, 1, asked)
	assert.Equal(t, now, dry["unchecked"].JobCheckedAt)
	assert.Contains(t, dry, "deleted")
}
