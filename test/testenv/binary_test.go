package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run's peak RSS is the child's own, however large the test process
// that starts it: a small shell that sleeps a moment reads a few MiB while
// this process holds 96 MiB (started by this process directly, the kernel
// would count the 96 MiB as the shell's).
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
	assert.Positive(t, run.MaxRSS, "the peak was measured")
	assert.Less(t, run.MaxRSS, int64(32<<20), "the shell's peak, not the test process's")
	assert.GreaterOrEqual(t, run.Wall.Milliseconds(), int64(300))
	if run.CgroupPeak > 0 {
		assert.Less(t, run.CgroupPeak, int64(32<<20), "the shell's charge, not the test process's")
	}
}

// A program that maps 64 MiB and exits the moment the last page is in has
// a peak of at least 65 MiB (the 64 and the Go runtime's own MiB or two):
// the kernel's count at its exit (and its cgroup's charge) includes the
// very end of the run, which a sampler of /proc/PID/status, a few
// milliseconds apart, mostly misses (the last MiB takes well under one).
func TestRunBinaryCountsAPeakRightBeforeExit(t *testing.T) {
	bin := buildTestdata(t, "alloc")
	const n = 64 << 20
	const floor = n + 1<<20 // the mapping and at least 1 MiB of runtime

	// An idle 50 ms first, so that a sampler has seen the program small.
	run, err := RunBinary(context.Background(), bin, nil, "64", "50ms")
	require.NoError(t, err)
	require.Equal(t, 0, run.Code, run.Stderr)
	peak := MiB(run.CgroupPeak)
	if run.CgroupPeak > 0 {
		peak += " MiB"
	}
	t.Logf("ru_maxrss %s MiB, cgroup peak %s, %s wall, %s CPU; unmeasured: %q",
		MiB(run.MaxRSS), peak, run.Wall, run.CPU, run.Unmeasured)

	assert.GreaterOrEqual(t, run.MaxRSS, int64(floor), "ru_maxrss holds the 64 MiB faulted in just before the exit")
	assert.Less(t, run.MaxRSS, int64(n+24<<20), "and not much else: the runtime's few MiB")
	assert.GreaterOrEqual(t, run.Wall.Milliseconds(), int64(50))
	if run.CgroupPeak == 0 {
		t.Logf("no cgroup peak here: %s", run.Unmeasured)
		return
	}
	assert.GreaterOrEqual(t, run.CgroupPeak, int64(floor), "the cgroup was charged the 64 MiB")
	assert.Less(t, run.CgroupPeak, int64(n+48<<20), "and not much else")
}

// The run ends as the program did: its exit code, or -1 for a signal.
func TestRunBinaryKeepsTheProgramsEnd(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)

	run, err := RunBinary(context.Background(), sh, nil, "-c", "echo out; echo err >&2; exit 3")
	require.NoError(t, err)
	assert.Equal(t, 3, run.Code)
	assert.Equal(t, "out\n", run.Stdout)
	assert.Equal(t, "err\n", run.Stderr)
	assert.Positive(t, run.MaxRSS)

	run, err = RunBinary(context.Background(), sh, nil, "-c", "kill -TERM $$")
	require.NoError(t, err)
	assert.Equal(t, -1, run.Code, "killed by a signal")

	_, err = RunBinary(context.Background(), filepath.Join(t.TempDir(), "missing"), nil)
	assert.Error(t, err)
}

// newCgroup changes nothing it did not make, and says why there is no
// cgroup when the memory controller is not there for it: a root without
// it, a root that does not enable it for its children, a kernel without
// memory.peak (a plain directory here, which has none).
func TestNewCgroupRefusesWithoutTheMemoryController(t *testing.T) {
	root := t.TempDir()
	defer func(old string) { cgroupRoot = old }(cgroupRoot)
	cgroupRoot = root
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}

	dir, why := newCgroup()
	assert.Empty(t, dir)
	assert.Contains(t, why, "no cgroup v2 memory controller")

	write("cgroup.controllers", "cpuset cpu io hugetlb pids\n")
	_, why = newCgroup()
	assert.Contains(t, why, "no cgroup v2 memory controller")

	write("cgroup.controllers", "cpuset cpu io memory hugetlb pids\n")
	write("cgroup.subtree_control", "cpu pids\n")
	_, why = newCgroup()
	assert.Contains(t, why, "not enabled in "+root+"/cgroup.subtree_control")
	b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	require.NoError(t, err)
	assert.Equal(t, "cpu pids\n", string(b), "left as it was")

	write("cgroup.subtree_control", "cpu memory pids\n")
	dir, why = newCgroup()
	assert.Empty(t, dir)
	assert.Contains(t, why, "no memory.peak")
	left, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Len(t, left, 2, "the leaf it made is removed")
}

// Without a cgroup the figure is "n/a", never a made-up 0.0.
func TestMiB(t *testing.T) {
	assert.Equal(t, "n/a", MiB(0))
	assert.Equal(t, "1.5", MiB(3<<19))
}

// buildTestdata builds testdata/NAME for this machine.
func buildTestdata(t *testing.T, name string) string {
	t.Helper()
	root, err := RepoRoot()
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./test/testenv/testdata/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}
