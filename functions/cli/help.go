package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/textwrap"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// command is one of the CLI's commands. The usage, `help COMMAND` and the
// dispatch are all made from commands(), so a command is one entry there.
type command struct {
	name string
	// operands follow the name and its flags in the usage ("[COMMAND]");
	// maxOperands is how many words it takes after its name.
	operands    string
	maxOperands int
	// summary is its line in the usage.
	summary string
	// about is what `help NAME` says it does, in paragraphs a blank line
	// apart.
	about string
	// flags are the names of the flags it takes (newFlagSet); --help and
	// --version go with every command.
	flags []string
	// reads lists the variables it reads, as internal/config describes
	// them; nil reads none.
	reads func() ([]config.Variable, error)
	// exits says what its exit statuses mean.
	exits string
	run   func(context.Context, invocation) int
}

// invocation is what a command runs with.
type invocation struct {
	// operands are the words after the command's name.
	operands       []string
	opts           *options
	fs             *flag.FlagSet
	stdout, stderr io.Writer
	// began is when the process started.
	began time.Time
}

// sweepExits are the exit statuses of a sweep, whatever its mode.
const sweepExits = `0 complete; 1 could not observe or act; 2 bad command line or
configuration (nothing was listed or deleted); 3 complete but degraded (a
scope was skipped, a namespace not observed, or actions held for GitHub's
rate limit or not reached before the deadline or a signal).`

// commands are the CLI's commands, in the usage's order.
func commands() []command {
	return []command{
		{
			name:    "sweep",
			summary: "one sweep that marks and reaps (JSON lines on stdout)",
			about: `One sweep, as the CronJob runs it: list the runner pods and GitHub's
registrations, judge each runner, mark what GitHub's word says is dead,
and delete what the kubelet's word says is dead now or what has stayed
marked for REAPER_CONFIRM_AFTER, within REAPER_MAX_ACTIONS and
REAPER_MAX_FRACTION. Each action and the summary are JSON lines on stdout.`,
			flags: []string{"dry-run"},
			reads: config.Variables,
			exits: sweepExits,
			run:   runSweep(sweep.Act),
		},
		{
			name:    "audit",
			summary: "a dry run that changes nothing, printed for a person",
			about: `What a sweep would do now and when, judged as a sweep judges, printed
as a table (or JSON): each runner's verdict, and when a marked one would
go. It deletes nothing and writes no ledger.`,
			flags: []string{"output"},
			reads: config.Variables,
			exits: sweepExits,
			run:   runSweep(sweep.Audit),
		},
		{
			name:    "serve",
			summary: "the long-running mode: while leading, a sweep every REAPER_INTERVAL",
			about: `The long-running mode, for a Deployment of two replicas: keep the runner
pods (with REAPER_ARC_LEAKS, the EphemeralRunners too) in watches' stores,
elect one leader on a Lease (REAPER_LEASE_NAME), and while leading sweep at
once and then every REAPER_INTERVAL, each sweep judged and acted on as
` + "`sweep`" + ` does, over the stores instead of fresh lists, and only once
they have synced. It answers /metrics, /healthz and /readyz on
REAPER_LISTEN.

SIGTERM or SIGINT stops it: no new sweep starts, the sweep in flight ends
as a sweep stopped by a signal does (its action in flight finished, the
ledger saved), then the Lease is released for the other replica, then HTTP
stops.`,
			flags: []string{"dry-run"},
			reads: config.Variables,
			exits: `0 stopped by SIGTERM or SIGINT; 1 could not start (the cluster, the Lease's
client, the port) or HTTP failed; 2 bad command line or configuration.`,
			run: runServe,
		},
		{
			name:    "history",
			summary: "the actions the ledger recorded, newest first",
			about: `The record of actions done that the ledger keeps (the last
REAPER_HISTORY_SIZE): when, the verdict and its evidence, the object and
the runner, the job it held, its exit fingerprint, and what each write
answered, newest first, as a table (or JSON lines). It reads only the
ledger: no GitHub credential, no scope, and of the cluster one get of the
ledger's ConfigMap.`,
			flags: []string{"output", "runner"},
			reads: config.LedgerVariables,
			exits: "0 printed (an empty record too); 1 the ledger could not be read; 2 bad command line or ledger variable.",
			run:   runHistory,
		},
		{
			name:    "metrics",
			summary: "the metrics a sweep pushes and serve serves, with their EMF names",
			about: `The table of the metrics a sweep pushes (to a Pushgateway, over OTLP,
or as CloudWatch EMF lines), with their EMF names, and of those serve's
/metrics adds; docs/metrics.md is made from the same table.`,
			exits: "0; 1 the table could not be written; 2 bad command line.",
			run:   runMetrics,
		},
		{
			name:     "version",
			operands: "(or --version)",
			summary:  "the version and the git revision it was built from",
			about:    "The version and the git revision the binary was built from.",
			exits:    "0; 2 bad command line.",
			run:      runVersion,
		},
		{
			name:        "help",
			operands:    "[COMMAND]",
			maxOperands: 1,
			summary:     "this usage; with COMMAND, its flags and the variables it reads",
			about: `Without COMMAND, the usage; with it, what COMMAND does, its flags, and
the variables it reads with their defaults. COMMAND --help is the same.`,
			exits: "0; 2 an unknown COMMAND or a bad command line.",
			run:   runHelp,
		},
	}
}

// lookup finds a command by name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func runHelp(_ context.Context, inv invocation) int {
	if len(inv.operands) == 0 {
		fmt.Fprint(inv.stdout, usage(inv.fs))
		return 0
	}
	cmd, ok := lookup(inv.operands[0])
	if !ok {
		fmt.Fprintf(inv.stderr, "unknown command %q\n%s", inv.operands[0], usage(inv.fs))
		return exitBadConfig
	}
	text, err := helpText(cmd, inv.fs)
	if err != nil {
		fmt.Fprintln(inv.stderr, err)
		return int(sweep.StatusFailed)
	}
	fmt.Fprint(inv.stdout, text)
	return 0
}

// synopsis is the command as it is typed: its name, flags and operands.
func synopsis(c command, fs *flag.FlagSet) string {
	parts := []string{"runner-reaper", c.name}
	for _, name := range c.flags {
		if value := flagValue(fs.Lookup(name)); value != "" {
			parts = append(parts, "[--"+name+" "+value+"]")
		} else {
			parts = append(parts, "[--"+name+"]")
		}
	}
	if c.operands != "" {
		parts = append(parts, c.operands)
	}
	return strings.Join(parts, " ")
}

// flagValue names a flag's value as its usage does in backquotes; "" for
// a flag that takes none.
func flagValue(f *flag.Flag) string {
	value, _ := flag.UnquoteUsage(f)
	return value
}

// usage lists the commands.
func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands() {
		line := "  " + synopsis(c, fs)
		if len(line) < 40 {
			line += strings.Repeat(" ", 40-len(line))
		} else {
			line += "\n" + strings.Repeat(" ", 40)
		}
		b.WriteString(line + c.summary + "\n")
	}
	b.WriteString(`Configuration is read from REAPER_* environment variables:
"runner-reaper help sweep" lists them, docs/configuration.md describes each.
Exit status: 0 complete, 1 could not observe or act, 2 bad configuration,
3 complete but degraded (a scope was skipped, a namespace not observed, or
actions held for GitHub's rate limit or not reached before the deadline or a
signal).
Flags may stand anywhere; COMMAND --help is help COMMAND; any other word
exits 2.
`)
	return b.String()
}

// helpWidth is the width help's paragraphs are wrapped to.
const helpWidth = 78

// helpText is `help NAME`: what the command does, its flags, its exit
// statuses, and the variables it reads with their defaults and the first
// sentence of their description, grouped as spec.go groups them.
func helpText(c command, fs *flag.FlagSet) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n", synopsis(c, fs))
	for _, p := range strings.Split(c.about, "\n\n") {
		b.WriteString(textwrap.Wrap(p, helpWidth, "") + "\n\n")
	}
	b.WriteString("Flags:\n")
	for _, name := range c.flags {
		f := fs.Lookup(name)
		value, text := flag.UnquoteUsage(f)
		left := "--" + name
		if value != "" {
			left += " " + value
		}
		if value != "" && f.DefValue != "" {
			text += " (default " + f.DefValue + ")"
		}
		b.WriteString(textwrap.Hanging(text, helpWidth, fmt.Sprintf("  %-22s ", left), strings.Repeat(" ", 25)) + "\n")
	}
	b.WriteString(textwrap.Hanging("this help", helpWidth, fmt.Sprintf("  %-22s ", "--help"), "") + "\n\n")
	b.WriteString(textwrap.Wrap("Exit status: "+c.exits, helpWidth, "") + "\n\n")
	if c.reads == nil {
		b.WriteString("Reads no configuration: no REAPER_* variable, no cluster, no GitHub.\n")
		return b.String(), nil
	}
	vars, err := c.reads()
	if err != nil {
		return "", fmt.Errorf("the variables %s reads: %w", c.name, err)
	}
	b.WriteString(textwrap.Wrap("The variables it reads, with their defaults ("+
		"docs/configuration.md describes each in full; an unknown REAPER_ "+
		"variable is refused):", helpWidth, "") + "\n")
	group := -1
	for _, v := range vars {
		if v.Group != group {
			b.WriteString("\n")
			group = v.Group
		}
		head := strings.Join(v.Names, ", ")
		if v.Default != "" {
			head += "  (default: " + config.Plain(v.Default) + ")"
		}
		b.WriteString(textwrap.Hanging(head, helpWidth, "  ", "      ") + "\n")
		b.WriteString(textwrap.Wrap(v.Summary(), helpWidth, "      ") + "\n")
	}
	b.WriteString("\n" + textwrap.Wrap(config.Plain(config.KubernetesAccess), helpWidth, "") + "\n")
	return b.String(), nil
}
