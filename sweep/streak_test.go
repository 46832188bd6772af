package sweep_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// The alerts "a scope skipped for 10 sweeps in a row" and "the
// action bound hit for 5 sweeps in a row" read streaks the ledger keeps.
// A scope whose list keeps failing counts up sweep after sweep, in every
// mode that saves, while a healthy scope never counts; one whole list ends
// the streak.
func TestSkipStreakCountsSweepsInARow(t *testing.T) {
	for _, mode := range []sweep.Mode{sweep.Act, sweep.DryRun} {
		t.Run(mode.String(), func(t *testing.T) {
			r := threeScopes(t)
			r.sim.Fault("org:beta", ghsim.EndpointList, ghsim.Fault{Status: 500})
			for i := 1; i <= 3; i++ {
				res := r.run(mode)
				assert.Equal(t, map[string]int{"org:beta": i}, res.Streaks.Skips, "sweep %d", i)
				assert.Equal(t, i, res.Streaks.MaxSkip())
			}
			r.sim.ClearFaults()
			res := r.run(mode)
			require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
			assert.Empty(t, res.Streaks.Skips, "a whole list ends the streak")
			assert.Zero(t, r.run(mode).Streaks.MaxSkip(), "and it stays ended")
		})
	}
}

// With room for one action a sweep, three terminal pods leave two deferred:
// the bound streak grows while the bound bites, and ends with the first
// sweep it does not.
func TestBoundStreakCountsSweepsInARow(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Limits.MaxActions = 1 })
	for _, name := range []string{"dead-1", "dead-2", "dead-3"} {
		r.orgPod("acme", name, dead())
	}
	want := []int{1, 2, 0}
	for i, w := range want {
		res := r.run(sweep.Act)
		assert.Equal(t, w, res.Streaks.Bound, "sweep %d: %v", i+1, res.Outcomes)
		r.clock.Add(time.Minute)
	}
}
