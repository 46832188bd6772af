package app

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// REAPER_DRY_RUN only ever takes writes away: a real sweep becomes a dry
// run, and a dry run or an audit stays what it was.
func TestModeDecidedOnce(t *testing.T) {
	tests := []struct {
		requested sweep.Mode
		dryRunEnv bool
		want      sweep.Mode
	}{
		{sweep.Act, false, sweep.Act},
		{sweep.Act, true, sweep.DryRun},
		{sweep.DryRun, false, sweep.DryRun},
		{sweep.DryRun, true, sweep.DryRun},
		{sweep.Audit, false, sweep.Audit},
		{sweep.Audit, true, sweep.Audit},
	}
	for _, tc := range tests {
		t.Run(tc.requested.String(), func(t *testing.T) {
			assert.Equal(t, tc.want, Mode(config.Config{DryRun: tc.dryRunEnv}, tc.requested))
		})
	}
}
