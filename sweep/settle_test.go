package sweep

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
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
