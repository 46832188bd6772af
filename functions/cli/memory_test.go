package main

import (
	"encoding/json"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/memlimit"
)

// A sweep whose peak passed 80% of the process's memory limit says so,
// with the fleet it held and the fleet the limit fits; under 80% it says
// nothing. The limit is the Lambda's (AWS_LAMBDA_FUNCTION_MEMORY_SIZE),
// set just above, or far above, this test process's own peak, which the
// sweep can only raise. (The cgroup's limit is read in a real cgroup by
// the scale bench and the package's own tests.)
func TestSweepWarnsNearItsMemoryLimit(t *testing.T) {
	// Start sets the runtime's soft limit from the Lambda's; this process
	// runs other tests after this one.
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	for _, tc := range []struct {
		name   string
		factor float64
		warn   bool
	}{
		{"peak at about 90% of the limit", 1.1, true},
		{"peak under a third of the limit", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			peak, err := memlimit.PeakRSS()
			require.NoError(t, err)
			mib := int64(math.Ceil(float64(peak) * tc.factor / (1 << 20)))
			t.Setenv(memlimit.LambdaMemoryEnv, strconv.FormatInt(mib, 10))
			code, out, stderr := runCLI("sweep")
			require.Equal(t, 0, code, stderr)
			var lines []map[string]any
			for _, l := range strings.Split(out, "\n") {
				var line map[string]any
				if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == memlimit.Message {
					lines = append(lines, line)
				}
			}
			if !tc.warn {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1, out)
			w := lines[0]
			assert.Equal(t, "WARN", w["level"])
			assert.Equal(t, float64(mib<<20), w["memory_limit_bytes"])
			assert.Equal(t, "lambda", w["memory_limit_source"])
			assert.Equal(t, 2.0, w["pods"], "the two runner pods the sweep listed")
			assert.Equal(t, 1.0, w["registrations"])
			assert.Greater(t, w["peak_rss_bytes"], 0.8*float64(mib<<20))
			assert.Contains(t, w["effect"], "80% of its memory limit")
		})
	}
}
