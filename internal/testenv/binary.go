package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// BuildBinary builds the runner-reaper command into dir and returns its
// path, so tests run the very binary the CronJob runs.
func BuildBinary(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "runner-reaper")
	cmd := exec.Command("go", "build", "-o", out, "./functions/cli")
	cmd.Dir = root
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
	// MaxRSS is its peak resident set, in bytes, as the kernel counted it.
	MaxRSS int64
}

// measure fills in what the kernel says the exited process cost.
func (r *Run) measure(st *os.ProcessState, wall time.Duration) {
	r.Wall = wall
	if st == nil {
		return
	}
	r.CPU = st.UserTime() + st.SystemTime()
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSS = int64(ru.Maxrss) * 1024 // Linux counts kilobytes
	}
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
	err := cmd.Run()
	run := Run{Stdout: stdout.String(), Stderr: stderr.String()}
	run.measure(cmd.ProcessState, time.Since(start))
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

// Exited is closed when the process has exited.
func (p *Started) Exited() <-chan struct{} { return p.done }

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
