// Command runner-reaper runs one sweep, a dry run, or an audit, or the
// long-running mode. The CronJob, the Deployment and people at a terminal
// run it; it only wires the parts together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/runner-reaper/runner-reaper/internal/app"
	_ "github.com/runner-reaper/runner-reaper/internal/noheapprofile"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/serve"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// exitBadConfig is the exit status of a bad command line or configuration:
// nothing was listed or deleted. The other statuses are the sweep's own.
const exitBadConfig = 2

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
	fs, opts := newFlagSet()
	// --help is not a flag of the set: the flag package would stop at it
	// and lose the command it stands after. Wherever it stands, the line
	// is read as `help COMMAND`.
	args, helpAsked := withoutHelpFlag(args)
	words, err := parseAnywhere(fs, args)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s\n%s", safetext.String(err.Error()), usage(fs))
		return exitBadConfig
	case helpAsked:
		if len(words) == 0 || words[0] != "help" {
			words = append([]string{"help"}, words...)
		}
	case opts.version:
		fmt.Fprintln(stdout, report.VersionLine())
		return 0
	case len(words) == 0:
		fmt.Fprint(stderr, usage(fs))
		return exitBadConfig
	}
	cmd, ok := lookup(words[0])
	if !ok {
		fmt.Fprintf(stderr, "unknown command %q\n%s", words[0], usage(fs))
		return exitBadConfig
	}
	// A word the command does not take is refused, never skipped: the
	// flag package stops at the first such word, and a --dry-run after it
	// would otherwise be lost and the sweep would delete.
	if len(words) > 1+cmd.maxOperands {
		fmt.Fprintf(stderr, "unexpected argument %q\n%s", words[1+cmd.maxOperands], usage(fs))
		return exitBadConfig
	}
	// So is a flag of another command (help, which runs nothing, excepted):
	// `sweep --output json` must not read as though it meant something.
	if cmd.name != "help" {
		var foreign string
		fs.Visit(func(f *flag.Flag) {
			if foreign == "" && f.Name != "version" && !slices.Contains(cmd.flags, f.Name) {
				foreign = f.Name
			}
		})
		if foreign != "" {
			fmt.Fprintf(stderr, "--%s is not a flag of %s\n%s", foreign, cmd.name, usage(fs))
			return exitBadConfig
		}
	}
	return cmd.run(ctx, invocation{operands: words[1:], opts: opts, fs: fs, stdout: stdout, stderr: stderr, began: began})
}

// options are the flags' values.
type options struct {
	dryRun  bool
	output  string
	runner  string
	version bool
}

// newFlagSet declares every command's flags; each command names those it
// takes (command.flags). A flag's usage names its value in backquotes, as
// flag.UnquoteUsage reads it, for the usage and the help.
func newFlagSet() (*flag.FlagSet, *options) {
	var o options
	fs := flag.NewFlagSet("runner-reaper", flag.ContinueOnError)
	// The flag package would print its errors raw, quoting the argument;
	// they are printed by run, escaped.
	fs.SetOutput(io.Discard)
	// The flag package's own usage text lists flags without commands;
	// ours is printed instead.
	fs.Usage = func() {}
	fs.BoolVar(&o.dryRun, "dry-run", false, "mark and confirm, but delete nothing")
	fs.StringVar(&o.output, "output", "table", "a table for a person, or JSON lines for a program: `table|json`")
	fs.StringVar(&o.runner, "runner", "", "only the actions on the runner of this `NAME`")
	fs.BoolVar(&o.version, "version", false, "print the version and revision, and exit")
	return fs, &o
}

// withoutHelpFlag takes -h, -help and --help out of args, and says whether
// one was there.
func withoutHelpFlag(args []string) ([]string, bool) {
	rest := make([]string, 0, len(args))
	asked := false
	for _, a := range args {
		switch a {
		case "-h", "--h", "-help", "--help":
			asked = true
		default:
			rest = append(rest, a)
		}
	}
	return rest, asked
}

// runSweep runs one sweep in the requested mode: a real sweep, a dry run
// or an audit, as the flags and the configuration decide.
func runSweep(requested sweep.Mode) func(context.Context, invocation) int {
	return func(ctx context.Context, inv invocation) int {
		if inv.opts.output != "table" && inv.opts.output != "json" {
			fmt.Fprintf(inv.stderr, "--output: %q is not table or json (example: --output json)\n", inv.opts.output)
			return exitBadConfig
		}
		if inv.opts.dryRun && requested == sweep.Act {
			requested = sweep.DryRun
		}
		inCluster, podNamespace := app.InCluster()
		rt, err := app.Start(ctx, app.Entry{Mode: requested, InCluster: inCluster, PodNamespace: podNamespace,
			Stdout: inv.stdout, Stderr: inv.stderr, AuditJSON: inv.opts.output == "json", Began: inv.began})
		if err != nil {
			fmt.Fprintln(inv.stderr, err)
			if errors.Is(err, app.ErrConfig) {
				return exitBadConfig
			}
			return int(sweep.StatusFailed)
		}
		res := rt.Sweep(ctx)
		return int(res.Status)
	}
}

// runServe runs the long-running mode until a signal ends it. Each of its
// sweeps reports itself; its own exit says only how it stopped.
func runServe(ctx context.Context, inv invocation) int {
	requested := sweep.Act
	if inv.opts.dryRun {
		requested = sweep.DryRun
	}
	inCluster, podNamespace := app.InCluster()
	err := serve.Serve(ctx, app.Entry{Mode: requested, InCluster: inCluster, PodNamespace: podNamespace,
		Stdout: inv.stdout, Stderr: inv.stderr})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, app.ErrConfig):
		fmt.Fprintln(inv.stderr, err)
		return exitBadConfig
	default:
		fmt.Fprintln(inv.stderr, err)
		return int(sweep.StatusFailed)
	}
}

func runMetrics(_ context.Context, inv invocation) int {
	if err := metrics.WriteTable(inv.stdout); err != nil {
		fmt.Fprintln(inv.stderr, safetext.String(err.Error()))
		return int(sweep.StatusFailed)
	}
	return 0
}

func runVersion(_ context.Context, inv invocation) int {
	fmt.Fprintln(inv.stdout, report.VersionLine())
	return 0
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
