package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitUntil polls cond every 10 ms until it holds, failing the test if it
// has not within 10 s: the program under test runs in its own time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A long-running program is read while it runs: its lines as they come,
// its CPU growing while it spins, its memory, the program's own process
// (not rusage's) as the one signalled; and a kill -9 ends it as one, its
// figures still reported, its cgroup (under a limit) read live and at the
// end.
func TestStartMeasuredReadsARunningProgram(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	opts := RunOptions{}
	if cgroupHere(t) {
		opts.MemoryLimit = 64 << 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := StartMeasured(ctx, sh, map[string]string{"GREETING": "hello"}, opts, "-c", `echo "$GREETING"; echo second; while :; do :; done`)
	require.NoError(t, err)

	waitUntil(t, "both lines", func() bool { return len(p.Lines(0)) == 2 })
	assert.Equal(t, []string{"hello", "second"}, p.Lines(0))
	assert.Equal(t, []string{"second"}, p.Lines(1), "only what is new")
	assert.Empty(t, p.Lines(2))

	comm, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(p.PID())).Output()
	if err == nil { // ps may be missing; /proc says the same below
		assert.Equal(t, "sh", strings.TrimSpace(string(comm)), "the program's own process")
	}
	first, err := p.Usage()
	require.NoError(t, err)
	assert.Positive(t, first.RSS)
	assert.GreaterOrEqual(t, first.HWM, first.RSS)
	waitUntil(t, "CPU to grow while it spins", func() bool {
		u, err := p.Usage()
		return err == nil && u.CPU >= first.CPU+50*time.Millisecond
	})
	if opts.MemoryLimit > 0 {
		assert.Positive(t, first.CgroupPeak, "its cgroup read while it runs")
		assert.Less(t, first.CgroupPeak, int64(32<<20), "the shell's charge, not this process's")
	}

	require.NoError(t, p.Signal(syscall.SIGKILL))
	run, err := p.Wait()
	require.NoError(t, err)
	assert.Equal(t, -1, run.Code, "ended by a signal")
	assert.GreaterOrEqual(t, run.CPU, 50*time.Millisecond, "its figures reported after the kill")
	assert.Equal(t, "hello\nsecond\n", run.Stdout)
	assert.False(t, run.OOMKilled, "killed by the test, not for its memory")
	if opts.MemoryLimit > 0 {
		assert.Positive(t, run.CgroupPeak)
	}
	assert.Error(t, p.Signal(syscall.SIGTERM), "nothing left to signal")
}

// A variant built with tags carries them, under a name of its own.
func TestBuildBinaryWithTags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; `make test` runs it")
	}
	dir := t.TempDir()
	bin, err := BuildBinaryWith(dir, BuildOptions{Tags: []string{"stdread"}})
	require.NoError(t, err)
	assert.Equal(t, "runner-reaper-stdread", bin[len(dir)+1:])
	out, err := exec.Command("go", "version", "-m", bin).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "-tags=stdread")
}
