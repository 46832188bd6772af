package memlimit

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPeakRSS checks PeakRSS's units against the kernel's other account of
// the same figure, VmHWM, after the process has held 64 MiB.
func TestPeakRSS(t *testing.T) {
	b := make([]byte, 64*mib)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	before := vmHWM(t)
	peak, err := PeakRSS()
	require.NoError(t, err)
	after := vmHWM(t)
	runtime.KeepAlive(b)
	t.Logf("PeakRSS %d MiB, VmHWM %d then %d MiB", peak/mib, before/mib, after/mib)
	assert.GreaterOrEqual(t, peak, int64(64*mib))
	// VmHWM only grows: the peak read between two readings lies between
	// them (KiB, as both are counted, not pages or bytes).
	assert.GreaterOrEqual(t, peak, before)
	assert.LessOrEqual(t, peak, after)
}

func vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
