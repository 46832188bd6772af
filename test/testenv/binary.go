package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// MaxRSS is its peak resident set in bytes, sampled (see watchHWM).
	MaxRSS int64
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

// measure fills in what the exited process cost.
func (r *Run) measure(st *os.ProcessState, wall time.Duration, hwm int64) {
	r.Wall, r.MaxRSS = wall, hwm
	if st != nil {
		r.CPU = st.UserTime() + st.SystemTime()
	}
}

// watchHWM samples the process's VmHWM (its peak resident set, in the
// kernel's own count) every few milliseconds until done is closed, and
// returns the last value read. The kernel's rusage cannot be used: a Go
// parent starts a child sharing its memory until the exec, and Linux
// carries that shared memory's peak into the child's ru_maxrss, so every
// child would seem as large as the test process. VmHWM belongs to the
// exec'd program's own address space, and only grows, so the last sample
// misses at most the final few milliseconds of the run.
func watchHWM(pid int, done <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var hwm int64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := readHWM(pid); v > hwm {
				hwm = v
			}
			select {
			case <-done:
				out <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// readHWM is the VmHWM line of /proc/pid/status in bytes; 0 when the
// process is gone or not yet exec'd far enough to have one.
func readHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// RunBinary runs bin with exactly env (plus PATH and HOME), so that nothing
// from the test process's own environment, such as a stray REAPER_
// variable, leaks into the run.
func RunBinary(ctx context.Context, bin string, env map[string]string, args ...string) (Run, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Run{}, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	done := make(chan struct{})
	hwm := watchHWM(cmd.Process.Pid, done)
	err := cmd.Wait()
	close(done)
	run := Run{Stdout: stdout.String(), Stderr: stderr.String()}
	run.measure(cmd.ProcessState, time.Since(start), <-hwm)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		run.Code = exit.ExitCode()
		return run, nil
	case err != nil:
		return run, fmt.Errorf("run %s %v: %w", bin, args, err)
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

// Wait waits for the process to exit and returns the run.
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
