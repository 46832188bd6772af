package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Measured is a long-running binary started by StartMeasured: a server
// whose cost is read while it runs (ProcUsage), whose output is read as it
// comes (Lines), and which can be killed as a node's failure kills a pod.
type Measured struct {
	m      *measuredStart
	stdout lineBuffer
	stderr outputBuffer
	// pid is the program's own process, rusage's child.
	pid  int
	done chan struct{}
	run  Run
	err  error
}

// StartMeasured starts bin as RunBinaryWith runs it (exactly env, under
// testdata/rusage, in a memory cgroup of its own with opts' limit where
// the host allows) and returns once the program itself is running, so
// that its process can be read and signalled. ctx kills it if it is still
// running when ctx ends.
func StartMeasured(ctx context.Context, bin string, env map[string]string, opts RunOptions, args ...string) (*Measured, error) {
	p := &Measured{done: make(chan struct{})}
	m, err := hostCgroups().startMeasured(ctx, bin, env, opts, &p.stdout, &p.stderr, args...)
	if err != nil {
		return nil, err
	}
	p.m = m
	go func() {
		p.run, p.err = m.wait()
		close(p.done)
	}()
	// The program is rusage's child: under cgroup v1 first a copy of
	// rusage, which execs it.
	name := filepath.Base(bin)
	if len(name) > 15 {
		name = name[:15] // the kernel's comm
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pid, err := childNamed(m.cmd.Process.Pid, name)
		if err == nil && pid > 0 {
			p.pid = pid
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("start %s: it exited at once (%w, exit %d)\n%s%s", bin, p.err, p.run.Code, lastBytes(p.stdout.String(), 4096), lastBytes(p.stderr.String(), 4096))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = m.cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("start %s: no process of that name under rusage (pid %d) after 10s: %w", bin, m.cmd.Process.Pid, err)
		}
	}
}

// childNamed is the child of parent whose name (comm) is name, or 0.
func childNamed(parent int, name string) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited since the glob
		}
		comm, ppid, _, ok := parseStat(string(b))
		if ok && ppid == parent && comm == name {
			return strconv.Atoi(filepath.Base(filepath.Dir(path)))
		}
	}
	return 0, nil
}

// parseStat reads a /proc/PID/stat line: the name (comm), the parent and
// the fields after the name's closing parenthesis (the name may hold
// spaces and parentheses itself).
func parseStat(line string) (comm string, ppid int, rest []string, ok bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return "", 0, nil, false
	}
	rest = strings.Fields(line[end+1:])
	if len(rest) < 13 {
		return "", 0, nil, false
	}
	// rest[0] is the state (field 3), rest[1] the parent (field 4).
	ppid, err := strconv.Atoi(rest[1])
	return line[open+1 : end], ppid, rest, err == nil
}

// PID is the program's process.
func (p *Measured) PID() int { return p.pid }

// ProcUsage is what a running program has cost so far.
type ProcUsage struct {
	// CPU is its processor time, user and system, of every thread
	// (/proc/PID/stat utime and stime), to the kernel's tick: 10 ms.
	CPU time.Duration
	// RSS is its resident set now (VmRSS), HWM its highest so far
	// (VmHWM), in bytes.
	RSS, HWM int64
	// CgroupPeak is the peak charge of its cgroup so far, in bytes (see
	// Run.CgroupPeak); 0 without one.
	CgroupPeak int64
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, which Linux
// fixes at 100 a second for user space whatever the kernel's own tick.
const userHZ = 100

// Usage reads what the program has cost so far, from /proc and its
// cgroup; an error once it has exited.
func (p *Measured) Usage() (ProcUsage, error) {
	var u ProcUsage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return u, fmt.Errorf("read the program's CPU: %w", err)
	}
	_, _, rest, ok := parseStat(string(b))
	if !ok {
		return u, fmt.Errorf("read the program's CPU: /proc/%d/stat %q", p.pid, b)
	}
	// utime and stime are fields 14 and 15; rest starts at field 3.
	utime, err1 := strconv.ParseInt(rest[11], 10, 64)
	stime, err2 := strconv.ParseInt(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("read the program's CPU: /proc/%d/stat %q", p.pid, b)
	}
	u.CPU = time.Duration(utime+stime) * time.Second / userHZ
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return u, fmt.Errorf("read the program's memory: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, _ := strings.Cut(line, ":")
		switch key {
		case "VmRSS":
			u.RSS = kB(strings.TrimSpace(val))
		case "VmHWM":
			u.HWM = kB(strings.TrimSpace(val))
		}
	}
	if p.m.cgroup != nil && p.m.run.Cgroup != "" {
		if u.CgroupPeak, err = p.m.cgroup.peak(); err != nil {
			return u, fmt.Errorf("read the program's cgroup: %w", err)
		}
	}
	return u, nil
}

// Lines are the complete lines the program has written to stdout, from
// the from'th (counted from 0) on.
func (p *Measured) Lines(from int) []string { return p.stdout.lines(from) }

// Stderr is what the program has written to stderr so far.
func (p *Measured) Stderr() string { return p.stderr.String() }

// Signal sends sig to the program itself (rusage passes SIGTERM on; a
// SIGKILL must reach the program, not its parent).
func (p *Measured) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("signal %v: the program has exited", sig)
	default:
	}
	return syscall.Kill(p.pid, sig)
}

// Done is closed once the program has exited and its figures are read.
func (p *Measured) Done() <-chan struct{} { return p.done }

// Wait waits for the program to exit and returns its run, as
// RunBinaryWith's: its code, its whole output and its figures.
func (p *Measured) Wait() (Run, error) {
	<-p.done
	run := p.run
	run.Stdout, run.Stderr = p.stdout.String(), p.stderr.String()
	return run, p.err
}

// outputBuffer is a program's output, written by the program and read
// while it runs.
type outputBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lineBuffer keeps the program's output both whole and as complete
// lines, so that a reader polling it takes only what is new.
type lineBuffer struct {
	outputBuffer
	// done is how many bytes of buf are cut into lines.
	done int
	cut  []string
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	all := b.buf.Bytes()
	for {
		i := bytes.IndexByte(all[b.done:], '\n')
		if i < 0 {
			break
		}
		b.cut = append(b.cut, string(all[b.done:b.done+i]))
		b.done += i + 1
	}
	return n, err
}

func (b *lineBuffer) lines(from int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if from >= len(b.cut) {
		return nil
	}
	return append([]string(nil), b.cut[max(from, 0):]...)
}
