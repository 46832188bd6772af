package testenv

import (
	"context"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run's peak RSS is the child's own, however large the test process
// that starts it: a small shell that sleeps a moment reads a few MiB while
// this process holds 96 MiB.
func TestRunBinaryMeasuresTheChildsOwnPeak(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	ballast := make([]byte, 96<<20)
	for i := range ballast {
		ballast[i] = 1 // touched, so resident
	}

	run, err := RunBinary(context.Background(), sh, nil, "-c", "sleep 0.3")
	require.NoError(t, err)
	runtime.KeepAlive(ballast)

	assert.Equal(t, 0, run.Code)
	assert.Positive(t, run.MaxRSS, "the peak was sampled")
	assert.Less(t, run.MaxRSS, int64(32<<20), "the shell's peak, not the test process's")
	assert.GreaterOrEqual(t, run.Wall.Milliseconds(), int64(300))
}
