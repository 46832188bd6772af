// Command runner-reaper runs one sweep, a dry run, or an audit. The CronJob
// and people at a terminal run it; it only wires the parts together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runner-reaper/runner-reaper/internal/app"
	_ "github.com/runner-reaper/runner-reaper/internal/noheapprofile"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// exitBadConfig is the exit status of a bad command line or configuration:
// nothing was listed or deleted. The other statuses are the sweep's own.
const exitBadConfig = 2

const usage = `usage:
  runner-reaper sweep [--dry-run]        one sweep that marks and reaps (JSON lines on stdout)
  runner-reaper audit [--output table|json]
                                         a dry run that changes nothing, printed for a person
  runner-reaper history [--output table|json] [--runner NAME]
                                         the actions the ledger recorded, newest first; reads
                                         only the ledger (REAPER_LEDGER), needs no GitHub token
  runner-reaper metrics                  the metrics a sweep pushes, with their EMF names
  runner-reaper version (or --version)   the version and the git revision it was built from
Configuration is read from REAPER_* environment variables; see the README.
Exit status: 0 complete, 1 could not observe or act (history: could not read
the ledger), 2 bad configuration or usage, 3 complete but degraded (a scope
was skipped, a namespace not observed, or actions held for GitHub's rate
limit or not reached before the deadline or a signal).
Flags may stand anywhere; any other word exits 2.
`

func main() {
	ctx, stop := stopOnSignal(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopOnSignal returns a context that SIGTERM (the kubelet's, at the Job's
// deadline or on a node drain) or SIGINT ends, with the signal as its
// cause. Ending it stops observation and keeps new actions from starting;
// the action in flight runs detached from it (package reap) and finishes,
// and the report is written. A second signal changes nothing: the process
// is already on its way out, within one action's bound, and to die halfway
// through an action is the one outcome worth waiting to avoid.
func stopOnSignal(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				cancel(fmt.Errorf("received %s: no new action starts", signalName(sig)))
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// signalName is the name an operator knows a signal by.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	default:
		return sig.String()
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The process's one sweep, its push included, ends within
	// REAPER_SWEEP_TIMEOUT counted from here.
	began := time.Now()
	fs := flag.NewFlagSet("runner-reaper", flag.ContinueOnError)
	// The flag package would print its errors raw, quoting the argument;
	// they are printed below, escaped.
	fs.SetOutput(io.Discard)
	// The flag package's own usage text lists flags without commands;
	// ours is printed instead, below.
	fs.Usage = func() {}
	dryRun := fs.Bool("dry-run", false, "mark and confirm, but delete nothing")
	output := fs.String("output", "table", "audit and history output: table or json")
	runner := fs.String("runner", "", "history: only the actions on this runner")
	showVersion := fs.Bool("version", false, "print the version and revision, and exit")
	words, err := parseAnywhere(fs, args)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	case err == nil && *showVersion:
		fmt.Fprintln(stdout, report.VersionLine())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s\n%s", safetext.String(err.Error()), usage)
		return exitBadConfig
	case len(words) == 0:
		fmt.Fprint(stderr, usage)
		return exitBadConfig
	}
	if set["runner"] && words[0] != "history" {
		// A sweep never takes a runner: it must not look as if it did.
		fmt.Fprintf(stderr, "--runner applies to history only\n%s", usage)
		return exitBadConfig
	}
	requested := sweep.Act
	switch words[0] {
	case "history":
		return runHistory(ctx, words[1:], historyFlags{dryRun: set["dry-run"], output: *output, runner: *runner, runnerSet: set["runner"]}, stdout, stderr)
	case "sweep":
	case "audit":
		requested = sweep.Audit
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version":
		if len(words) > 1 {
			fmt.Fprintf(stderr, "unexpected argument %q\n%s", words[1], usage)
			return exitBadConfig
		}
		fmt.Fprintln(stdout, report.VersionLine())
		return 0
	case "metrics":
		if len(words) > 1 {
			fmt.Fprintf(stderr, "unexpected argument %q\n%s", words[1], usage)
			return exitBadConfig
		}
		if err := metrics.WriteTable(stdout); err != nil {
			fmt.Fprintln(stderr, safetext.String(err.Error()))
			return int(sweep.StatusFailed)
		}
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", words[0], usage)
		return exitBadConfig
	}
	// A word the command does not take is refused, never skipped: the
	// flag package stops at the first such word, and a --dry-run after it
	// would otherwise be lost and the sweep would delete.
	if len(words) > 1 {
		fmt.Fprintf(stderr, "unexpected argument %q\n%s", words[1], usage)
		return exitBadConfig
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "--output: %q is not table or json (example: --output json)\n", *output)
		return exitBadConfig
	}
	if *dryRun && requested == sweep.Act {
		requested = sweep.DryRun
	}

	inCluster, podNamespace := app.InCluster()
	rt, err := app.Start(ctx, app.Entry{Mode: requested, InCluster: inCluster, PodNamespace: podNamespace,
		Stdout: stdout, Stderr: stderr, AuditJSON: *output == "json", Began: began})
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, app.ErrConfig) {
			return exitBadConfig
		}
		return int(sweep.StatusFailed)
	}
	res := rt.Sweep(ctx)
	return int(res.Status)
}

// parseAnywhere parses flags wherever they stand among args, before, between
// or after the words, and returns the words in order.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return words, nil
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
}
