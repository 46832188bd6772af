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
// Usage: rusage CGROUP_DIR PROGRAM ARGS... (CGROUP_DIR "" for none). With
// a directory, the program is started inside that cgroup v2
// (CLONE_INTO_CGROUP), so that the cgroup's memory.peak is its alone; if
// that fails, it is started where this process is and the reason is the
// line's last field.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rusage CGROUP_DIR PROGRAM ARGS...")
		os.Exit(2)
	}
	// Pdeathsig follows the thread that started the program: this one, the
	// main thread, which lives as long as the process.
	runtime.LockOSThread()
	// The report must not leak into the program.
	syscall.CloseOnExec(3)
	report := os.NewFile(3, "report")

	// SIGTERM is passed on, so that one meant for the program reaches it.
	// The terminal's signals are caught and dropped: they reach the
	// program too, which is in the same process group, and dying of them
	// would kill it (Pdeathsig) before it could shut down in order.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)

	newCmd := func() *exec.Cmd {
		cmd := exec.Command(os.Args[2], os.Args[3:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		// Killed with this process (RunBinary's context kills it).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	cmd := newCmd()
	cgroupErr := "-"
	if dir := os.Args[1]; dir != "" {
		f, err := os.Open(dir)
		if err == nil {
			defer f.Close()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
		} else {
			cgroupErr = err.Error()
		}
	}
	start := time.Now()
	err := cmd.Start()
	if err != nil && cmd.SysProcAttr.UseCgroupFD {
		cgroupErr = err.Error()
		cmd = newCmd()
		start = time.Now()
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(report, "start-error %s\n", oneLine(err.Error()))
		os.Exit(127)
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
		fmt.Fprintf(report, "start-error %s\n", oneLine(err.Error()))
		os.Exit(127)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	fmt.Fprintf(report, "%d %d %d %d %s\n", ru.Maxrss,
		time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), wall.Nanoseconds(), oneLine(cgroupErr))
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
