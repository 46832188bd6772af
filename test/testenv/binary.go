package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The version and revision BuildBinary links in, the way the Makefile and
// the image build do, so tests can see that they reach --version and the
// summary line.
const (
	BinaryVersion  = "v0.0.0-test"
	BinaryRevision = "0123456789abcdef0123456789abcdef01234567"
)

// BuildBinary builds the runner-reaper command into dir and returns its
// path, so tests run the very binary the CronJob runs: built as `make
// image` builds it (static, trimmed paths, no symbol table), so that its
// measured size and memory are the shipped binary's.
func BuildBinary(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "runner-reaper")
	const pkg = "github.com/runner-reaper/runner-reaper/report"
	ldflags := "-s -w -X " + pkg + ".version=" + BinaryVersion + " -X " + pkg + ".revision=" + BinaryRevision
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./functions/cli")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build runner-reaper: %w\n%s", err, b)
	}
	return out, nil
}

// Run is one run of a binary.
type Run struct {
	Code   int
	Stdout string
	Stderr string
	// Wall is how long the process ran, from start to exit.
	Wall time.Duration
	// CPU is the processor time it used, user and system.
	CPU time.Duration
	// MaxRSS is its peak resident set in bytes: the ru_maxrss that wait4
	// gave its parent when it exited, so that nothing up to the exit is
	// missed. Its parent is a small program (testdata/rusage) rather than
	// this process, whose own peak the kernel would count as the child's;
	// so the figure is never below that program's couple of MiB. 0 when
	// it could not be measured (see Unmeasured).
	MaxRSS int64
	// CgroupPeak is the memory.peak, in bytes, of a cgroup v2 that held
	// the process and nothing else (see newCgroup): its peak charge, what
	// a memory limit holds to. Beside its resident pages that counts the
	// kernel's memory on its behalf (page tables, sockets) and the page
	// cache it brought in (files it wrote, pages of itself read from disk
	// rather than found cached). 0 where cgroups are not usable here (see
	// Unmeasured).
	CgroupPeak int64
	// Unmeasured says why MaxRSS or CgroupPeak is 0, when one is.
	Unmeasured string
}

// MiB is n bytes in MiB to one place, or "n/a" for 0 (not measured).
func MiB(n int64) string {
	if n <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64)
}

// Lines returns the stdout lines that contain every one of the given
// fragments, for picking JSON log lines out of a run.
func (r Run) Lines(fragments ...string) []string {
	var out []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		ok := l != ""
		for _, f := range fragments {
			ok = ok && strings.Contains(l, f)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// note adds a reason to Unmeasured.
func (r *Run) note(why string) {
	if r.Unmeasured != "" {
		r.Unmeasured += "; "
	}
	r.Unmeasured += why
}

// measure fills in what the exited process cost from the line that
// testdata/rusage wrote for it (see its doc), and says whether it ran in
// the cgroup it was given.
func (r *Run) measure(line string) (inCgroup bool, err error) {
	if why, ok := strings.CutPrefix(line, "start-error "); ok {
		return false, errors.New(strings.TrimSpace(why))
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 5)
	if len(f) != 5 {
		return false, fmt.Errorf("no rusage report (%q)", line)
	}
	var v [4]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return false, fmt.Errorf("rusage report %q: %w", line, err)
		}
	}
	r.MaxRSS, r.CPU, r.Wall = v[0]<<10, time.Duration(v[1]+v[2]), time.Duration(v[3])
	if f[4] != "-" {
		r.note("not started in its cgroup: " + f[4])
		return false, nil
	}
	return true, nil
}

// The rusage program, built once a process by rusageProgram.
var rusage struct {
	once sync.Once
	path string
	err  error
}

// rusageProgram builds testdata/rusage into the repository's .cache, once
// a process (a build that finds nothing changed is quick), and returns its
// path. It is built in a directory of its own and renamed into place, so
// that test processes building it at once never see half a file.
func rusageProgram() (string, error) {
	rusage.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			rusage.err = err
			return
		}
		dir := filepath.Join(root, ".cache", "testenv")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			rusage.err = err
			return
		}
		tmp, err := os.MkdirTemp(dir, "build-")
		if err != nil {
			rusage.err = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "rusage"), "./test/testenv/testdata/rusage")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			rusage.err = fmt.Errorf("build testdata/rusage: %w\n%s", err, b)
			return
		}
		out := filepath.Join(dir, "rusage")
		if err := os.Rename(filepath.Join(tmp, "rusage"), out); err != nil {
			rusage.err = err
			return
		}
		rusage.path = out
	})
	return rusage.path, rusage.err
}

// cgroupRoot is where cgroup v2 is mounted on a unified host (a variable
// for the tests of newCgroup's refusals).
var cgroupRoot = "/sys/fs/cgroup"

var cgroupSeq atomic.Int64

// newCgroup makes a fresh cgroup v2 leaf for one run, directly under the
// root: /sys/fs/cgroup/runner-reaper-testenv-PID-N. It changes no cgroup
// it did not make: it needs the memory controller to be there already
// and enabled for the root's children (cgroup.subtree_control), which is
// how a host that runs containers on cgroup v2 has it. Without that (not
// root, a cgroup v1 or hybrid host, a container whose cgroup namespace
// holds processes at its top) it returns "" and the reason, and the run's
// CgroupPeak is 0.
func newCgroup() (dir, why string) {
	has := func(file string) bool {
		b, err := os.ReadFile(filepath.Join(cgroupRoot, file))
		return err == nil && slices.Contains(strings.Fields(string(b)), "memory")
	}
	switch {
	case !has("cgroup.controllers"):
		return "", "no cgroup v2 memory controller at " + cgroupRoot
	case !has("cgroup.subtree_control"):
		return "", "the memory controller is not enabled in " + cgroupRoot + "/cgroup.subtree_control"
	}
	dir = filepath.Join(cgroupRoot, fmt.Sprintf("runner-reaper-testenv-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "cgroup: " + err.Error()
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.peak")); err != nil {
		_ = os.Remove(dir)
		return "", "no memory.peak (Linux 5.19 or later has it)"
	}
	return dir, ""
}

// cgroupPeak reads dir's memory.peak and removes dir. Its process has
// been reaped, unless a killed rusage left it to die of Pdeathsig, which
// takes a moment: the removal is retried for a second while it is busy.
func cgroupPeak(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.peak"))
	rmErr := os.Remove(dir)
	for i := 0; i < 100 && errors.Is(rmErr, syscall.EBUSY); i++ {
		time.Sleep(10 * time.Millisecond)
		rmErr = os.Remove(dir)
	}
	if err == nil {
		err = rmErr
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// removeCgroup removes a cgroup newCgroup made, if it made one.
func removeCgroup(dir string) {
	if dir != "" {
		_ = os.Remove(dir)
	}
}

// RunBinary runs bin with exactly env (plus PATH and HOME), so that nothing
// from the test process's own environment, such as a stray REAPER_
// variable, leaks into the run. It is run under testdata/rusage, which
// reports its figures (see Run), and, where the host allows, in a cgroup
// of its own.
func RunBinary(ctx context.Context, bin string, env map[string]string, args ...string) (Run, error) {
	prog := exec.Command(bin) // bin as exec finds it in PATH
	if prog.Err != nil {
		return Run{}, fmt.Errorf("run %s %v: %w", bin, args, prog.Err)
	}
	parent, err := rusageProgram()
	if err != nil {
		return Run{}, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	var run Run
	cgroup, why := newCgroup()
	if why != "" {
		run.note(why)
	}
	cmd := exec.CommandContext(ctx, parent, append([]string{cgroup, prog.Path}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	report, w, err := os.Pipe()
	if err != nil {
		return Run{}, err
	}
	defer report.Close()
	cmd.ExtraFiles = []*os.File{w}
	start := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		removeCgroup(cgroup)
		return Run{}, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	err = cmd.Wait()
	wall := time.Since(start)
	line, _ := io.ReadAll(report)
	run.Stdout, run.Stderr = stdout.String(), stderr.String()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		removeCgroup(cgroup)
		return run, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	if exit != nil {
		run.Code = exit.ExitCode()
	}
	inCgroup, err := run.measure(string(line))
	switch {
	case err != nil && len(line) == 0 && exit != nil:
		// Killed before it could report (ctx ended): the run is what it
		// is, as a run of bin itself would have been.
		run.Wall = wall
		run.note("killed before its figures were reported")
	case err != nil:
		removeCgroup(cgroup)
		return run, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	if cgroup != "" {
		peak, err := cgroupPeak(cgroup)
		switch {
		case err != nil:
			run.note("cgroup: " + err.Error())
		case inCgroup:
			run.CgroupPeak = peak
		}
	}
	return run, nil
}

// Started is a binary started by StartBinary, for a test that must act
// while it runs (send it a signal).
type Started struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// StartBinary starts bin as RunBinary runs it, and returns at once. ctx
// kills the process if it is still running when ctx ends.
func StartBinary(ctx context.Context, bin string, env map[string]string, args ...string) (*Started, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Started{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %v: %w", bin, args, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Signal sends sig to the process.
func (p *Started) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and returns the run: its code and
// output; the figures (Wall, CPU, memory) are RunBinary's alone.
func (p *Started) Wait() (Run, error) {
	<-p.done
	run := Run{Stdout: p.stdout.String(), Stderr: p.stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(p.err, &exit):
		run.Code = exit.ExitCode()
	case p.err != nil:
		return run, fmt.Errorf("run %s: %w", p.cmd.Path, p.err)
	}
	return run, nil
}
