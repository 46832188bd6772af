// Command rusage is the parent that testenv.RunBinary starts a measured
// program under: it runs the program, waits for it, and writes what the
// kernel counted for it to file descriptor 3, one line:
//
//	maxrss_kib utime_ns stime_ns wall_ns cgroup_error
//
// (cgroup_error, the rest of the line, is "-" when there was none), or
// "start-error REASON" when the program could not be run
// then exits as the program did (its code, or the signal that ended it).
//
// It exists because a large Go process cannot read a child's ru_maxrss
// itself. Go starts a child with clone(CLONE_VM|CLONE_VFORK): until the
// exec the child runs in its parent's address space, and the exec carries
// that address space's peak into the child's maxrss (fs/exec.c,
// setmax_mm_hiwater_rss), so a 200 MiB test process sees every child,
// even /bin/true, at 200 MiB. This program is small, so the floor it
// leaves on its child's figure is its own couple of MiB.
//
// Usage:
//
//	rusage [-cgroup DIR [-v1] [-strict]] -- PROGRAM ARGS...
//
// With -cgroup, the program is started inside that cgroup, so that the
// cgroup's peak charge is its alone. A cgroup v2 one it is started in
// (CLONE_INTO_CGROUP). A cgroup v1 one (-v1) a process can only be moved
// into, so a copy of this program is started instead (rusage -enter, see
// enter), which moves itself into the cgroup and then execs the program:
// that copy's pages stay charged where they were, and are freed by the
// exec, so the cgroup is charged the program's exec and what follows,
// just as with CLONE_INTO_CGROUP, and this program is never in it. (The
// program itself cannot be moved in before its exec, nor after it
// without a race with its first allocations; and were this program to
// move itself in before starting it, the cgroup would be charged what it
// allocates as it waits, and under a limit the kernel's OOM killer could
// pick it rather than the program.) CPU time the copy used before the
// exec is taken off the program's. If the
// program cannot be started in the cgroup, it is started where this
// process is and the reason is the line's last field; with -strict (a
// cgroup that holds it to a memory limit) it is not started at all.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-enter" {
		enter(os.Args[2:])
	}
	dir := flag.String("cgroup", "", "start the program in this cgroup")
	v1 := flag.Bool("v1", false, "the cgroup is a cgroup v1 one")
	strict := flag.Bool("strict", false, "do not start the program outside its cgroup")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: rusage [-cgroup DIR [-v1] [-strict]] -- PROGRAM ARGS...")
		os.Exit(2)
	}
	prog, args := flag.Arg(0), flag.Args()[1:]
	// Pdeathsig follows the thread that started the program: this one, the
	// main thread, which lives as long as the process.
	runtime.LockOSThread()
	// The report must not leak into the program.
	syscall.CloseOnExec(3)
	report := os.NewFile(3, "report")
	startError := func(why string) {
		fmt.Fprintf(report, "start-error %s\n", oneLine(why))
		os.Exit(127)
	}

	// SIGTERM is passed on, so that one meant for the program reaches it.
	// The terminal's signals are caught and dropped: they reach the
	// program too, which is in the same process group, and dying of them
	// would kill it (Pdeathsig) before it could shut down in order.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)

	newCmd := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		// Killed with this process (RunBinary's context kills it).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	var (
		cmd       *exec.Cmd
		start     time.Time
		err       error
		cgroupErr = "-"
		// The processor time of the copy that entered the cgroup v1
		// before its exec, which is not the program's.
		before syscall.Rusage
	)
	switch {
	case *dir != "" && *v1:
		cmd, start, before, err = startV1(newCmd, *dir, prog, args)
	case *dir != "":
		cmd = newCmd(prog, args...)
		var f *os.File
		if f, err = os.Open(*dir); err == nil {
			defer f.Close()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
			start = time.Now()
			err = cmd.Start()
		}
		if err != nil {
			err = &cgroupError{err}
		}
	}
	var cgErr *cgroupError
	switch {
	case errors.As(err, &cgErr) && *strict:
		startError("not started in its cgroup: " + err.Error())
	case errors.As(err, &cgErr):
		cgroupErr = err.Error()
		cmd = nil
	case err != nil:
		startError(err.Error())
	}
	if cmd == nil {
		cmd = newCmd(prog, args...)
		start = time.Now()
		if err := cmd.Start(); err != nil {
			startError(err.Error())
		}
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	wall := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		startError(err.Error())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	utime, stime := programCPU(ru, &before)
	fmt.Fprintf(report, "%d %d %d %d %s\n", ru.Maxrss, utime, stime, wall.Nanoseconds(), oneLine(cgroupErr))
	report.Close()

	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// End the same way, so that the caller sees the signal.
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(time.Second)
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}

// programCPU is the user and system time, in ns, of the process in ru
// less what it used before its exec (before). The kernel measures their
// sum, and splits it by the clock ticks that found it in either: a split
// that can shift between the two readings, so the time before the exec is
// taken off the sum, from the user time first.
func programCPU(ru, before *syscall.Rusage) (utime, stime int64) {
	utime, stime = ru.Utime.Nano(), ru.Stime.Nano()
	less := min(before.Utime.Nano()+before.Stime.Nano(), utime+stime)
	off := min(less, utime)
	return utime - off, stime - (less - off)
}

// A cgroupError is why the program could not be started in its cgroup.
type cgroupError struct{ err error }

func (e *cgroupError) Error() string { return e.err.Error() }

// startV1 starts the program in the cgroup v1 dir through a copy of this
// program (see enter), and returns once the program is exec'd, with the
// time of that, the start of its run, and the processor time the copy
// used before it. A cgroupError is that the copy could not enter the
// cgroup (it has exited, and been reaped); any other error, that the
// program could not be run.
func startV1(newCmd func(string, ...string) *exec.Cmd, dir, prog string, args []string) (*exec.Cmd, time.Time, syscall.Rusage, error) {
	var before syscall.Rusage
	self, err := os.Executable()
	if err != nil {
		return nil, time.Time{}, before, &cgroupError{fmt.Errorf("find this program to enter the cgroup with: %w", err)}
	}
	cmd := newCmd(self, append([]string{"-enter", dir, "--", prog}, args...)...)
	status, w, err := os.Pipe()
	if err != nil {
		return nil, time.Time{}, before, err
	}
	defer status.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, time.Time{}, before, &cgroupError{err}
	}
	// The copy writes "entered UTIME_US STIME_US" and execs, which
	// closes the pipe (close-on-exec), or writes why it could not and
	// exits.
	b, _ := io.ReadAll(status)
	start := time.Now()
	var failure string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if _, err := fmt.Sscanf(l, "entered %d %d", &before.Utime.Usec, &before.Stime.Usec); err != nil {
			failure = l
		}
	}
	if failure == "" {
		return cmd, start, before, nil
	}
	_ = cmd.Wait()
	if why, ok := strings.CutPrefix(failure, "cgroup "); ok {
		return nil, time.Time{}, before, &cgroupError{errors.New(why)}
	}
	return nil, time.Time{}, before, errors.New(strings.TrimPrefix(failure, "start-error "))
}

// enter is this program started by startV1 (rusage -enter DIR -- PROGRAM
// ARGS...): it moves itself into the cgroup v1 DIR, writes to file
// descriptor 3 "entered UTIME_US STIME_US", the processor time it used
// (which startV1 takes off the program's), and execs PROGRAM; or it
// writes why it could not, "cgroup REASON" or "start-error REASON", and
// exits. Everything is ready before the move, so that it allocates next
// to nothing in the cgroup before the exec frees it all: its pages before
// the move stay charged to its old cgroup (the kernel moves a task's
// charges with it only when the cgroup asks,
// memory.move_charge_at_immigrate, which newCgroupV1 makes sure it does
// not), so the cgroup's charge is the program's.
func enter(args []string) {
	syscall.CloseOnExec(3)
	status := os.NewFile(3, "status")
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(status, "start-error usage: rusage -enter DIR -- PROGRAM ARGS...")
		os.Exit(2)
	}
	dir, argv := args[0], args[2:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(status, "start-error %s\n", oneLine(err.Error()))
		os.Exit(127)
	}
	env := os.Environ()
	pid := []byte(strconv.Itoa(os.Getpid()))
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	entered := fmt.Appendf(nil, "entered %d %d\n", ru.Utime.Nano()/1e3, ru.Stime.Nano()/1e3)
	procs, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err == nil {
		_, err = procs.Write(pid)
		procs.Close()
	}
	if err != nil {
		fmt.Fprintf(status, "cgroup %s\n", oneLine(err.Error()))
		os.Exit(127)
	}
	_, _ = status.Write(entered)
	err = syscall.Exec(path, argv, env)
	fmt.Fprintf(status, "start-error %s\n", oneLine(err.Error()))
	os.Exit(127)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
