package main

import (
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
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
			lines := logLines(out, memlimit.Message)
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
			assert.Equal(t, true, w["fleet_observed"])
		})
	}
	// A sweep that could not list the pods knows no fleet size: it says
	// so rather than counting a fleet of none that its limit "fits".
	t.Run("a sweep that could not observe", func(t *testing.T) {
		setup(t)
		// A file ledger, so that the ledger loads and the pod list is
		// what fails.
		t.Setenv("REAPER_LEDGER", "file:"+filepath.Join(t.TempDir(), "ledger.json"))
		t.Setenv("KUBECONFIG", unreachableKubeconfig(t))
		peak, err := memlimit.PeakRSS()
		require.NoError(t, err)
		mib := int64(math.Ceil(float64(peak) * 1.1 / (1 << 20)))
		t.Setenv(memlimit.LambdaMemoryEnv, strconv.FormatInt(mib, 10))
		code, out, stderr := runCLI("sweep")
		require.Equal(t, 1, code, stderr)
		lines := logLines(out, memlimit.Message)
		require.Len(t, lines, 1, out)
		w := lines[0]
		assert.Equal(t, false, w["fleet_observed"])
		assert.NotContains(t, w, "pods")
		assert.NotContains(t, w, "fits_pods")
		assert.NotContains(t, w, "needed_limit_mib")
		assert.Contains(t, w["effect"], "before it had observed the whole fleet")
		summary := logLines(out, "sweep")
		require.Len(t, summary, 1, out)
		assert.Contains(t, summary[0]["error"], "observe pods", "the pod list is what failed")
	})
}

// The binary sets the collector's pace before it sweeps (memlimit.GCPercent),
// unless the operator's GOGC says otherwise. The runtime reads GOGC only
// when a process starts, so in this process a GOGC set by t.Setenv changes
// nothing but what the binary decides.
func TestSweepSetsTheCollectorsPace(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	for _, tc := range []struct {
		name string
		gogc string
		want int
	}{
		{"GOGC unset", "", memlimit.GCPercent},
		{"the operator's GOGC", "200", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup(t)
			debug.SetGCPercent(100)
			t.Setenv(memlimit.GOGC, tc.gogc)
			code, _, stderr := runCLI("sweep")
			require.Equal(t, 0, code, stderr)
			assert.Equal(t, tc.want, debug.SetGCPercent(100))
		})
	}
}

// logLines are the JSON lines of out with the message msg.
func logLines(out, msg string) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == msg {
			lines = append(lines, line)
		}
	}
	return lines
}

// unreachableKubeconfig is a kubeconfig whose API server is a loopback
// port that nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+addr+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return path
}
