package testenv

import (
	"bytes"
	"context"
	"encoding/json"
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
func BuildBinary(dir string) (string, error) { return BuildBinaryWith(dir, BuildOptions{}) }

// BuildOptions are what BuildBinaryWith can do beyond BuildBinary.
type BuildOptions struct {
	// Tags are build tags, for a variant of the binary a benchmark
	// measures beside the shipped one; the binary's name ends with them
	// (runner-reaper-TAG), so that both can be built into one dir.
	Tags []string
}

// BuildBinaryWith is BuildBinary with options.
func BuildBinaryWith(dir string, o BuildOptions) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.Join(append([]string{"runner-reaper"}, o.Tags...), "-"))
	const pkg = "github.com/runner-reaper/runner-reaper/report"
	ldflags := "-s -w -X " + pkg + ".version=" + BinaryVersion + " -X " + pkg + ".revision=" + BinaryRevision
	args := []string{"build", "-trimpath", "-ldflags", ldflags}
	if len(o.Tags) > 0 {
		args = append(args, "-tags", strings.Join(o.Tags, ","))
	}
	cmd := exec.Command("go", append(args, "-o", out, "./functions/cli")...)
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
	// CPU is the processor time it used, user and system. In a cgroup v1
	// (see Cgroup) that includes a fraction of a millisecond of the
	// testdata/rusage that moved itself there and exec'd the process.
	CPU time.Duration
	// MaxRSS is its peak resident set in bytes: the ru_maxrss that wait4
	// gave its parent when it exited, so that nothing up to the exit is
	// missed. Its parent is a small program (testdata/rusage) rather than
	// this process, whose own peak the kernel would count as the child's;
	// so the figure is never below that program's couple of MiB. 0 when
	// it could not be measured (see Unmeasured).
	MaxRSS int64
	// CgroupPeak is the peak charge, in bytes, of a memory cgroup that
	// held the process and nothing else (see newCgroup; v2 memory.peak,
	// v1 memory.max_usage_in_bytes): what a memory limit holds to. Beside
	// its resident pages that counts the kernel's memory on its behalf
	// (page tables, sockets) and the page cache it brought in (files it
	// wrote, pages of itself read from disk rather than found cached).
	// The kernel charges a cgroup in batches of 64 pages a CPU, so the
	// figure can be up to 256 KiB a CPU above the pages the process
	// actually had. 0 where cgroups are not usable here (see Unmeasured).
	CgroupPeak int64
	// Cgroup is the version and directory of the cgroup the process ran
	// in, such as "v1 /sys/fs/cgroup/memory/runner-reaper-testenv-7-1"
	// (removed after the run), or "" when none was usable (see
	// Unmeasured).
	Cgroup string
	// OOMKilled is whether the kernel killed the process for being over
	// its cgroup's memory limit (RunOptions.MemoryLimit), as its cgroup
	// counts (v2 memory.events, v1 memory.oom_control oom_kill), or, on a
	// kernel that does not count them (before Linux 4.13), whether a
	// limited process died of SIGKILL.
	OOMKilled bool
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

// Summary decodes the run's `sweep` summary line into out (a struct of the
// fields the caller reads). Its error, when the run wrote no such line,
// quotes the end of both outputs.
func (r Run) Summary(out any) error {
	for _, l := range strings.Split(r.Stdout, "\n") {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &line) != nil || line.Msg != "sweep" {
			continue
		}
		if err := json.Unmarshal([]byte(l), out); err != nil {
			return fmt.Errorf("summary line %q: %w", l, err)
		}
		return nil
	}
	return fmt.Errorf("no summary line in the run's output (exit %d)\n%s%s", r.Code, lastBytes(r.Stdout, 4096), lastBytes(r.Stderr, 4096))
}

// lastBytes is the last n bytes of s: a sweep's output holds a line with
// every deferred scope, thousands of them.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
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

// RunBinary runs bin with exactly env (plus PATH and HOME), so that nothing
// from the test process's own environment, such as a stray REAPER_
// variable, leaks into the run. It is run under testdata/rusage, which
// reports its figures (see Run), and, where the host allows, in a cgroup
// of its own.
func RunBinary(ctx context.Context, bin string, env map[string]string, args ...string) (Run, error) {
	return RunBinaryWith(ctx, bin, env, RunOptions{}, args...)
}

// RunOptions are what RunBinaryWith can do beyond RunBinary.
type RunOptions struct {
	// MemoryLimit, when positive, is a limit in bytes on the memory of
	// the run's cgroup (v2 memory.max, v1 memory.limit_in_bytes), set
	// before the program starts, as a container's memory limit is: the
	// program sees it as its cgroup's limit, and the kernel kills it when
	// it cannot stay under it (Run.OOMKilled). Swap is not limited: on a
	// host with swap the program is pushed to it first. A run that no
	// cgroup here can hold to a limit is not run (RunBinaryWith returns
	// an error), never run without one.
	MemoryLimit int64
}

// RunBinaryWith is RunBinary with options.
func RunBinaryWith(ctx context.Context, bin string, env map[string]string, opts RunOptions, args ...string) (Run, error) {
	return hostCgroups().runBinary(ctx, bin, env, opts, args...)
}

// runBinary is RunBinaryWith with the cgroups in fs.
func (fs cgroupFS) runBinary(ctx context.Context, bin string, env map[string]string, opts RunOptions, args ...string) (Run, error) {
	var stdout, stderr bytes.Buffer
	m, err := fs.startMeasured(ctx, bin, env, opts, &stdout, &stderr, args...)
	if err != nil {
		return Run{}, err
	}
	run, err := m.wait()
	run.Stdout, run.Stderr = stdout.String(), stderr.String()
	return run, err
}

// measuredStart is a program started under testdata/rusage (and in its
// cgroup, where there is one), not yet waited for.
type measuredStart struct {
	cmd    *exec.Cmd
	cgroup *runCgroup
	// report is where rusage writes its line once the program has ended.
	report *os.File
	start  time.Time
	limit  int64
	// run holds the notes made before the start (no cgroup, and why).
	run  Run
	fail func(error) error
}

// startMeasured starts bin as runBinary runs it, its output going to
// stdout and stderr, and returns at once; wait ends it.
func (fs cgroupFS) startMeasured(ctx context.Context, bin string, env map[string]string, opts RunOptions, stdout, stderr io.Writer, args ...string) (*measuredStart, error) {
	fail := func(err error) error { return fmt.Errorf("run %s %v: %w", bin, args, err) }
	prog := exec.Command(bin) // bin as exec finds it in PATH
	if prog.Err != nil {
		return nil, fail(prog.Err)
	}
	parent, err := rusageProgram()
	if err != nil {
		return nil, fail(err)
	}
	m := &measuredStart{limit: opts.MemoryLimit, fail: fail}
	cgroup, why := fs.newCgroup(opts.MemoryLimit)
	switch {
	case cgroup == nil && opts.MemoryLimit > 0:
		return nil, fail(fmt.Errorf("no cgroup to hold it to %d bytes: %s", opts.MemoryLimit, why))
	case cgroup == nil:
		m.run.note(why)
	default:
		m.run.Cgroup = cgroup.String()
	}
	m.cgroup = cgroup
	var flags []string
	if cgroup != nil {
		flags = append(flags, "-cgroup", cgroup.dir)
		if cgroup.v1 {
			flags = append(flags, "-v1")
		}
		if opts.MemoryLimit > 0 {
			// Not run outside the cgroup that holds it to its limit.
			flags = append(flags, "-strict")
		}
	}
	cmd := exec.CommandContext(ctx, parent, slices.Concat(flags, []string{"--", prog.Path}, args)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	report, w, err := os.Pipe()
	if err != nil {
		cgroup.remove()
		return nil, fail(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	m.start = time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		report.Close()
		cgroup.remove()
		return nil, fail(err)
	}
	m.cmd, m.report = cmd, report
	return m, nil
}

// wait waits for the program (and rusage) to exit, and returns what the
// run cost: its figures, its cgroup's, and whether the kernel killed it
// for its memory. Its output is the writers' that startMeasured was given.
func (m *measuredStart) wait() (Run, error) {
	defer m.report.Close()
	err := m.cmd.Wait()
	wall := time.Since(m.start)
	line, _ := io.ReadAll(m.report)
	run := m.run
	var end cgroupEnd
	var endErr error
	if m.cgroup != nil {
		end, endErr = m.cgroup.finish()
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return run, m.fail(err)
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
		return run, m.fail(err)
	case !inCgroup:
		run.Cgroup = "" // started outside it (see Unmeasured)
	}
	switch {
	case m.cgroup == nil:
	case endErr != nil:
		run.note("cgroup: " + endErr.Error())
	case inCgroup:
		run.CgroupPeak = end.Peak
		if end.HasOOMKills {
			run.OOMKilled = end.OOMKills > 0
		} else if ws, ok := exitStatus(exit); ok && m.limit > 0 {
			// A kernel that does not count them: a limited run that
			// died of SIGKILL (rusage ends as its program did).
			run.OOMKilled = ws.Signaled() && ws.Signal() == syscall.SIGKILL
		}
	}
	return run, nil
}

// exitStatus is how the process that exit is about ended, if it did.
func exitStatus(exit *exec.ExitError) (syscall.WaitStatus, bool) {
	if exit == nil {
		return 0, false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ws, ok
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
