package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/runner-reaper/runner-reaper/history"
	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// runHistory prints the record of actions the configured ledger keeps,
// newest first: a table, or a line of JSON a record. It reads the ledger's
// own variables and the ledger, and nothing else: no GitHub credential,
// no scope, and of the cluster one get of the ledger's ConfigMap. Exit 0
// when it printed the record (an empty one too), 1 when the ledger could
// not be read, 2 on a bad command line or a bad ledger variable.
func runHistory(ctx context.Context, inv invocation) int {
	stdout, stderr := inv.stdout, inv.stderr
	f := inv.opts
	runnerSet := false
	inv.fs.Visit(func(fl *flag.Flag) { runnerSet = runnerSet || fl.Name == "runner" })
	switch {
	case f.output != "table" && f.output != "json":
		fmt.Fprintf(stderr, "--output: %q is not table or json (example: --output json)\n", f.output)
		return exitBadConfig
	case runnerSet && f.runner == "":
		fmt.Fprintf(stderr, "--runner: the runner's name is empty (example: --runner arc-runners-x7k2p-runner-abcde)\n")
		return exitBadConfig
	}
	inCluster, podNamespace := app.InCluster()
	access, err := config.LoadLedgerAccess(inCluster, podNamespace)
	if err != nil {
		fmt.Fprintln(stderr, report.PlainError(err, nil))
		return exitBadConfig
	}
	ctx, cancel := context.WithTimeout(ctx, access.Timeout)
	defer cancel()
	src, name, err := app.OpenHistory(ctx, access, nil)
	if err != nil {
		fmt.Fprintln(stderr, report.PlainError(fmt.Errorf("read the record of actions in %s: %w", name, err), nil))
		if errors.Is(err, app.ErrConfig) {
			return exitBadConfig
		}
		return int(sweep.StatusFailed)
	}
	h, version, err := src.LoadHistory(ctx)
	if err != nil {
		fmt.Fprintln(stderr, report.PlainError(fmt.Errorf("read the record of actions in %s: %w", name, err), nil))
		return int(sweep.StatusFailed)
	}
	if f.runner != "" {
		h = history.ForRunner(h, f.runner)
	}
	if len(h) == 0 {
		msg := "no action is recorded in " + safetext.String(name)
		if f.runner != "" {
			msg = "no action on runner " + safetext.String(f.runner) + " is recorded in " + safetext.String(name)
		}
		if version == "" {
			msg += " (there is no ledger there yet)"
		}
		// A script reading JSON lines gets none, and the reason apart.
		out := stdout
		if f.output == "json" {
			out = stderr
		}
		fmt.Fprintln(out, msg)
		return 0
	}
	write := history.WriteTable
	if f.output == "json" {
		write = history.WriteJSON
	}
	if err := write(stdout, history.Newest(h)); err != nil {
		fmt.Fprintln(stderr, safetext.String(err.Error()))
		return int(sweep.StatusFailed)
	}
	return 0
}
