package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
// Its cgroup is charged the 64 MiB and under a MiB more: the runtime's
// heap, stacks and page tables, not its code, which is in the page cache
// already (charged to the cgroup that wrote the binary: this one). One
// that maps nothing has just the runtime's: its cgroup is charged its
// own pages alone, none of the parent's that measures it, which holds a
// couple of MiB (ru_maxrss, by contrast, is never below those: see
// Run.MaxRSS).
func TestRunBinaryCountsAPeakRightBeforeExit(t *testing.T) {
	bin := buildTestdata(t, "alloc")
	cgroupWanted := cgroupHere(t)
	for _, tc := range []struct {
		name             string
		args             []string
		minRSS, maxRSS   int64
		minPeak, maxPeak int64
	}{
		{
			name:   "a Go program that maps nothing",
			args:   []string{"0"},
			minRSS: 1 << 20, maxRSS: 16 << 20,
			minPeak: 256 << 10, maxPeak: 4 << 20,
		},
		{
			// An idle 50 ms first, so that a sampler has seen it small.
			name:   "one that maps 64 MiB just before it exits",
			args:   []string{"64", "50ms"},
			minRSS: 65 << 20, maxRSS: 88 << 20,
			minPeak: 64<<20 + 512<<10, maxPeak: 68 << 20,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := RunBinary(context.Background(), bin, nil, tc.args...)
			require.NoError(t, err)
			require.Equal(t, 0, run.Code, run.Stderr)
			t.Logf("ru_maxrss %s MiB, cgroup peak %s MiB (cgroup %q), %s wall, %s CPU; unmeasured: %q",
				MiB(run.MaxRSS), MiB(run.CgroupPeak), run.Cgroup, run.Wall, run.CPU, run.Unmeasured)

			assert.GreaterOrEqual(t, run.MaxRSS, tc.minRSS, "ru_maxrss")
			assert.Less(t, run.MaxRSS, tc.maxRSS, "ru_maxrss")
			if !cgroupWanted {
				assert.Zero(t, run.CgroupPeak)
				assert.NotEmpty(t, run.Unmeasured, "says why there is no cgroup peak")
				return
			}
			assert.NotEmpty(t, run.Cgroup)
			assert.GreaterOrEqual(t, run.CgroupPeak, tc.minPeak, "cgroup peak")
			assert.Less(t, run.CgroupPeak, tc.maxPeak, "cgroup peak")
			assert.False(t, run.OOMKilled)
		})
	}
}

// A run with a memory limit is held to it by its cgroup: a program that
// stays under it runs as it would have, one that goes over is killed by
// the kernel, and the run says so. Where no cgroup can hold it, it is not
// run at all.
func TestRunBinaryWithAMemoryLimit(t *testing.T) {
	bin := buildTestdata(t, "alloc")
	cgroupWanted := cgroupHere(t)
	for _, tc := range []struct {
		name  string
		limit int64
		alloc string
		oom   bool
	}{
		{name: "under it", limit: 64 << 20, alloc: "8"},
		{name: "over it", limit: 16 << 20, alloc: "64", oom: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := RunBinaryWith(context.Background(), bin, nil, RunOptions{MemoryLimit: tc.limit}, tc.alloc)
			if !cgroupWanted {
				assert.ErrorContains(t, err, "no cgroup to hold it")
				return
			}
			require.NoError(t, err)
			t.Logf("exit %d, OOM-killed %v, ru_maxrss %s MiB, cgroup peak %s MiB (cgroup %q)",
				run.Code, run.OOMKilled, MiB(run.MaxRSS), MiB(run.CgroupPeak), run.Cgroup)
			assert.Equal(t, tc.oom, run.OOMKilled, "OOM-killed")
			assert.LessOrEqual(t, run.CgroupPeak, tc.limit, "held to its limit")
			assert.Positive(t, run.CgroupPeak)
			if tc.oom {
				assert.Equal(t, -1, run.Code, "killed by a signal")
				assert.Greater(t, run.CgroupPeak, tc.limit-1<<20, "killed at its limit")
			} else {
				assert.Equal(t, 0, run.Code, run.Stderr)
			}
		})
	}
}

// The program runs in its cgroup from its very start, and sees its limit
// there, where the product binary looks for it (memlimit.FromCgroup in
// github.com/KimMachineGun/automemlimit reads it the way cgroupChild
// does): the memory cgroup /proc/self/cgroup names is the run's, and its
// limit the one asked for. The program is this test binary (see
// TestHelperCgroupChild).
func TestRunBinaryWithALimitStartsTheProgramInItsCgroup(t *testing.T) {
	if !cgroupHere(t) {
		t.Skip("no memory cgroup here")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	const limit = 200 << 20
	run, err := RunBinaryWith(context.Background(), self, map[string]string{"TESTENV_CGROUP_CHILD": "1"},
		RunOptions{MemoryLimit: limit}, "-test.run=^TestHelperCgroupChild$")
	require.NoError(t, err)
	require.Equal(t, 0, run.Code, run.Stdout+run.Stderr)
	_, dir, _ := strings.Cut(run.Cgroup, " ")
	require.NotEmpty(t, dir)
	seen := map[string]string{}
	for _, l := range run.Lines("=") {
		k, v, _ := strings.Cut(l, "=")
		seen[k] = v
	}
	t.Logf("run in %s; the program saw %v", run.Cgroup, seen)
	assert.Equal(t, filepath.Base(dir), filepath.Base(seen["cgroup"]), "its memory cgroup is the run's")
	assert.True(t, strings.HasSuffix(dir, seen["cgroup"]), "%s is %s in the mount", seen["cgroup"], dir)
	assert.Equal(t, strconv.Itoa(limit), seen["limit"])
}

// TestHelperCgroupChild is the program of
// TestRunBinaryWithALimitStartsTheProgramInItsCgroup: run by it, it
// writes its memory cgroup and that cgroup's limit; otherwise it does
// nothing.
func TestHelperCgroupChild(t *testing.T) {
	if os.Getenv("TESTENV_CGROUP_CHILD") == "" {
		return
	}
	path, limit, err := cgroupChild()
	if err != nil {
		fmt.Println("error=" + err.Error())
		os.Exit(1)
	}
	fmt.Printf("cgroup=%s\nlimit=%s\n", path, limit)
}

// cgroupChild is this process's memory cgroup, as /proc/self/cgroup names
// it, and its limit, read from the cgroup's directory under the mount
// the way memlimit.FromCgroup does: v1's memory.limit_in_bytes where the
// memory controller is on v1, v2's memory.max where it is on v2.
func cgroupChild() (path, limit string, err error) {
	fs := hostCgroups()
	self, err := os.ReadFile(fs.self)
	if err != nil {
		return "", "", err
	}
	mountinfo, err := os.ReadFile(fs.mountinfo)
	if err != nil {
		return "", "", err
	}
	file := ""
	for _, l := range strings.Split(string(self), "\n") {
		f := strings.SplitN(l, ":", 3)
		switch {
		case len(f) < 3:
		case strings.Contains(","+f[1]+",", ",memory,"):
			dir, err := memoryV1Dir(string(mountinfo), string(self))
			if err != nil {
				return "", "", err
			}
			path, file = f[2], filepath.Join(dir, "memory.limit_in_bytes")
		case f[0] == "0" && path == "":
			path, file = f[2], filepath.Join(fs.v2, f[2], "memory.max")
		}
	}
	b, err := os.ReadFile(file)
	return path, strings.TrimSpace(string(b)), err
}

// A run's cgroup is removed once it is over, however it ended: killed by
// its context, by the kernel, or leaving a process of its own behind,
// which is killed with it.
func TestRunBinaryRemovesItsCgroup(t *testing.T) {
	if !cgroupHere(t) {
		t.Skip("no memory cgroup here")
	}
	bin := buildTestdata(t, "alloc")
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		bin     string
		args    []string
		limit   int64
		timeout time.Duration
		check   func(t *testing.T, run Run)
	}{
		{
			name: "it exits", bin: bin, args: []string{"1"},
			check: func(t *testing.T, run Run) { assert.Equal(t, 0, run.Code) },
		},
		{
			// It would sleep ten minutes: ended before that, it was killed,
			// however slow the machine (a bound of seconds failed under load).
			name: "its context ends", bin: bin, args: []string{"1", "10m"}, timeout: 300 * time.Millisecond,
			check: func(t *testing.T, run Run) {
				assert.Equal(t, -1, run.Code, "killed")
				assert.Less(t, run.Wall, 10*time.Minute, "killed before its sleep ended")
			},
		},
		{
			name: "the kernel kills it", bin: bin, args: []string{"64"}, limit: 16 << 20,
			check: func(t *testing.T, run Run) { assert.True(t, run.OOMKilled) },
		},
		{
			name: "it leaves a process behind", bin: sh, args: []string{"-c", "sleep 10 >/dev/null 2>&1 &"},
			check: func(t *testing.T, run Run) { assert.Equal(t, 0, run.Code) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			run, err := RunBinaryWith(ctx, tc.bin, nil, RunOptions{MemoryLimit: tc.limit}, tc.args...)
			require.NoError(t, err)
			t.Logf("%s in %s; unmeasured: %q", time.Since(start).Round(time.Millisecond), run.Cgroup, run.Unmeasured)
			tc.check(t, run)
			_, dir, _ := strings.Cut(run.Cgroup, " ")
			require.NotEmpty(t, dir)
			assert.NoDirExists(t, dir)
			left, err := filepath.Glob(filepath.Join(filepath.Dir(dir), fmt.Sprintf("runner-reaper-testenv-%d-*", os.Getpid())))
			require.NoError(t, err)
			assert.Empty(t, left, "no cgroup of this process's runs is left")
			assert.NotContains(t, run.Unmeasured, "cgroup:", "removed without error")
		})
	}
}

// Where no cgroup can hold a run to its limit, RunBinaryWith says so and
// does not run it; without a limit it runs, and says why it has no
// cgroup peak.
func TestRunBinaryWithALimitNeedsACgroup(t *testing.T) {
	dir := t.TempDir()
	fs := cgroupFS{v2: dir, mountinfo: filepath.Join(dir, "mountinfo"), self: filepath.Join(dir, "cgroup")}
	require.NoError(t, os.WriteFile(fs.mountinfo, []byte(
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"), 0o644))
	require.NoError(t, os.WriteFile(fs.self, []byte("1:name=systemd:/\n0::/\n"), 0o644))
	marker := filepath.Join(dir, "ran")

	_, err := fs.runBinary(context.Background(), "touch", nil, RunOptions{MemoryLimit: 64 << 20}, marker)
	assert.ErrorContains(t, err, "no cgroup to hold it to 67108864 bytes")
	assert.NoFileExists(t, marker, "not run")

	run, err := fs.runBinary(context.Background(), "touch", nil, RunOptions{}, marker)
	require.NoError(t, err)
	assert.FileExists(t, marker, "run")
	assert.Empty(t, run.Cgroup)
	assert.Zero(t, run.CgroupPeak)
	assert.Positive(t, run.MaxRSS)
	assert.Contains(t, run.Unmeasured, "no cgroup v2 memory controller at "+dir)
	assert.Contains(t, run.Unmeasured, "cgroup v1: this process is in no cgroup v1 memory cgroup")
}

// newCgroupV2 changes nothing it did not make, and says why there is no
// cgroup when the memory controller is not there for it: a root without
// it, a root that does not enable it for its children, a kernel without
// memory.peak (a plain directory here, which has none).
func TestNewCgroupRefusesWithoutTheMemoryController(t *testing.T) {
	root := t.TempDir()
	fs := cgroupFS{v2: root}
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}

	dir, why := fs.newCgroupV2()
	assert.Empty(t, dir)
	assert.Contains(t, why, "no cgroup v2 memory controller")

	write("cgroup.controllers", "cpuset cpu io hugetlb pids\n")
	_, why = fs.newCgroupV2()
	assert.Contains(t, why, "no cgroup v2 memory controller")

	write("cgroup.controllers", "cpuset cpu io memory hugetlb pids\n")
	write("cgroup.subtree_control", "cpu pids\n")
	_, why = fs.newCgroupV2()
	assert.Contains(t, why, "not enabled in "+root+"/cgroup.subtree_control")
	b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	require.NoError(t, err)
	assert.Equal(t, "cpu pids\n", string(b), "left as it was")

	write("cgroup.subtree_control", "cpu memory pids\n")
	dir, why = fs.newCgroupV2()
	assert.Empty(t, dir)
	assert.Contains(t, why, "no memory.peak")
	left, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Len(t, left, 2, "the leaf it made is removed")
}

// newCgroupV1 refuses a directory that is no memory cgroup (a plain one
// here, without memory.max_usage_in_bytes), and removes what it made.
func TestNewCgroupV1RefusesWhatIsNoMemoryCgroup(t *testing.T) {
	dir := t.TempDir()
	mount := filepath.Join(dir, "memory")
	require.NoError(t, os.Mkdir(mount, 0o755))
	fs := cgroupFS{mountinfo: filepath.Join(dir, "mountinfo"), self: filepath.Join(dir, "cgroup")}
	require.NoError(t, os.WriteFile(fs.mountinfo, []byte(
		"35 31 0:32 / "+mount+" rw,relatime shared:13 - cgroup cgroup rw,memory\n"), 0o644))
	require.NoError(t, os.WriteFile(fs.self, []byte("4:memory:/\n0::/\n"), 0o644))

	cg, why := fs.newCgroupV1()
	assert.Empty(t, cg)
	assert.Contains(t, why, "no memory.max_usage_in_bytes")
	left, err := os.ReadDir(mount)
	require.NoError(t, err)
	assert.Empty(t, left, "the cgroup it made is removed")
}

// memoryV1Dir finds this process's memory cgroup under the mount of the
// v1 memory hierarchy, wherever the mount's top is in the hierarchy.
func TestMemoryV1Dir(t *testing.T) {
	const hybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	for _, tc := range []struct {
		name, mountinfo, self string
		want, err             string
	}{
		{
			name: "a hybrid host", mountinfo: hybrid,
			self: "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n",
			want: "/sys/fs/cgroup/memory/process_api/abc",
		},
		{
			name: "the hierarchy's top", mountinfo: hybrid, self: "4:memory:/\n0::/\n",
			want: "/sys/fs/cgroup/memory",
		},
		{
			name:      "memory beside other controllers, optional fields, a space",
			mountinfo: "35 31 0:32 / /sys/fs/cgroup/cpu\\040mem rw,nosuid shared:7 master:2 - cgroup cgroup rw,cpu,memory\n",
			self:      "3:cpu,memory:/a\n",
			want:      "/sys/fs/cgroup/cpu mem/a",
		},
		{
			name:      "a container's mount of its own cgroup",
			mountinfo: "600 590 0:32 /docker/abc /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n",
			self:      "4:memory:/docker/abc/x\n",
			want:      "/sys/fs/cgroup/memory/x",
		},
		{
			name:      "a mount of a cgroup this process is not in",
			mountinfo: "600 590 0:32 /docker/abc /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n",
			self:      "4:memory:/docker/abcd\n",
			err:       "the memory cgroup /docker/abcd is in no cgroup v1 mount",
		},
		{
			name: "a cgroup v2 host", mountinfo: "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", self: "0::/user.slice\n",
			err: "this process is in no cgroup v1 memory cgroup",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memoryV1Dir(tc.mountinfo, tc.self)
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Without a cgroup the figure is "n/a", never a made-up 0.0.
func TestMiB(t *testing.T) {
	assert.Equal(t, "n/a", MiB(0))
	assert.Equal(t, "1.5", MiB(3<<19))
}

// cgroupHere is whether a run should have a memory cgroup here: this
// process may write to the v2 root that enables the memory controller for
// its children, or, on a v1 or hybrid host, to its own cgroup in the v1
// memory hierarchy. Where it is, the tests require one; where not, they
// require RunBinary to say why.
func cgroupHere(t *testing.T) bool {
	t.Helper()
	const w = 2 // W_OK: access(2) says EROFS for a read-only mount, as a container's often is
	fs := hostCgroups()
	if b, err := os.ReadFile(filepath.Join(fs.v2, "cgroup.subtree_control")); err == nil &&
		strings.Contains(" "+strings.TrimSpace(string(b))+" ", " memory ") && syscall.Access(fs.v2, w) == nil {
		return true
	}
	mountinfo, err1 := os.ReadFile(fs.mountinfo)
	self, err2 := os.ReadFile(fs.self)
	if err1 != nil || err2 != nil {
		return false
	}
	dir, err := memoryV1Dir(string(mountinfo), string(self))
	if err != nil {
		t.Logf("no cgroup expected here: %v", err)
		return false
	}
	return syscall.Access(dir, w) == nil
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
