// Command pause is the real-cluster tests' only container process: the pod
// sandbox ("pause") image, which must be built here because no registry can
// be reached, and the stand-in for a runner.
//
// With no arguments it waits for SIGTERM or SIGINT and exits 0, as a
// sandbox must. `pause exit N` exits at once with status N, which the
// kubelet records as a failed runner.
//
// `pause runner CUEDIR` is the stand-in for a runner's container: it logs
// what the real runner logs once it has connected ("Listening for Jobs") and
// keeps running until it is cued or signalled. A test cues it through a
// file, not exec: CUEDIR (a hostPath the test can write to) holds at most
// one file per pod, named after the pod (the env POD_NAME, from the downward
// API; the process's own hostname on the host's network is the node's).
// The file is read at start and every 100 ms after; its first line is the
// cue:
//
//	exit N  exit at once with status N (0 a clean end, 1 a crash,
//	        7 ARC's code for an outdated runner: the exit fingerprints of
//	        docs/design.md)
//	hang    ignore SIGTERM from now on, as the runner of the 2026-03-05
//	        zombie did: only the kubelet's SIGKILL after the grace period
//	        ends it (137)
//	job NAME
//	        log "Running job: NAME", as the runner does when a job
//	        starts on it, and keep running
//	done NAME RESULT
//	        log "Job NAME completed with result: RESULT", as the runner
//	        does when its job ends, and keep running
//
// Each line is written as the runner writes it, after its time in .NET's
// "u" form and a colon ("2026-01-01 10:00:00Z: Listening for Jobs"); a
// job or done cue is logged once, when it first appears.
//
// An empty or missing file is no cue. Without a hang cue, SIGTERM or SIGINT
// ends it with 143 (128+15), as the runner's shell does. There is no cue to
// SIGKILL itself: the stand-in is its container's PID 1, which the kernel
// shields from its own namespace's SIGKILL; a real 137 is the hang cue
// followed by a delete. Since ARC
// recreates a failed runner's pod under the same name, a cue left in place
// is met by every pod of that runner: that is how a test makes a runner
// fail until ARC gives up on it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "exit" {
		code, err := strconv.Atoi(os.Args[2])
		if err != nil {
			os.Exit(2)
		}
		os.Exit(code)
	}
	if len(os.Args) == 3 && os.Args[1] == "runner" {
		os.Exit(runner(os.Args[2], os.Getenv("POD_NAME")))
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// runner is the stand-in runner; it returns the exit status.
func runner(dir, name string) int {
	logf := func(format string, args ...any) {
		fmt.Printf("%s: %s\n", time.Now().UTC().Format("2006-01-02 15:04:05Z"), fmt.Sprintf(format, args...))
	}
	if name == "" {
		logf("POD_NAME is not set: no cue file to read")
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	logf("√ Connected to GitHub")
	logf("Listening for Jobs")
	path := filepath.Join(dir, name)
	hanging := false
	said := ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			cue, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			fields := strings.Fields(cue)
			switch {
			case len(fields) == 2 && fields[0] == "exit":
				code, err := strconv.Atoi(fields[1])
				if err != nil {
					logf("cue %q: not a status", cue)
					return 2
				}
				logf("cued: exit %d", code)
				return code
			case cue == "hang" && !hanging:
				logf("cued: hang, ignoring SIGTERM")
				hanging = true
			case len(fields) >= 2 && fields[0] == "job" && cue != said:
				logf("Running job: %s", strings.TrimSpace(strings.TrimPrefix(cue, "job")))
				said = cue
			case len(fields) == 3 && fields[0] == "done" && cue != said:
				logf("Job %s completed with result: %s", fields[1], fields[2])
				said = cue
			}
		}
		select {
		case s := <-sig:
			if hanging {
				logf("received %v while hung: ignored", s)
				continue
			}
			logf("received %v: exiting", s)
			return 128 + int(s.(syscall.Signal))
		case <-tick.C:
		}
	}
}
