package scale_test

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// printServeTable writes the serve rows of every size: per row the churn
// asked and achieved, the leader's CPU, API bytes (and their share of the
// CronJob's full read at that size), peak memory and GitHub requests a
// measured minute, the zombie's time against its goal, the failover, and
// the verdict against the goals; the standby's CPU and memory; then the
// rows' problems and notes, numbered.
func printServeTable(out io.Writer, results []sizeResult, st serveSettings, ledger ledgerBackend) {
	var rows []serveRow
	for _, r := range results {
		rows = append(rows, r.serve...)
	}
	if len(rows) == 0 {
		return
	}
	confirm := st.confirmAfter.String()
	if !st.set {
		confirm += " (the binary's default)"
	}
	fmt.Fprintf(out, "\nThe long-running mode: two `runner-reaper serve` replicas (%s MiB cgroup each, %s ledger, REAPER_CONFIRM_AFTER %s), the leader measured over %s of churn; failover is kill -9 of the leader\n",
		testenv.MiB(serveMemoryLimit), ledger, confirm, plural(st.minutes, "minute"))
	fmt.Fprintln(out, "churn: runners replaced a minute, % asked/achieved; API MB: kube_bytes of the leader's summary lines a minute, and % of the CronJob's full read (its warm median) at that size; peak: VmHWM/cgroup peak since start, first list included; zombie: planted to its action line (goal: confirm-after + 2 intervals); after: the zombie planted just before the kill")
	fmt.Fprintln(out, "goals (set at 100,000 runners and 1% churn, judged on every row): CPU < 1 s/min, API < 1% of a full read, peak < 256 MiB, zombie within its goal")
	fmt.Fprintf(out, "\n%8s %-13s %-6s %8s %-16s %-15s %8s %-14s %-10s %-9s %-12s %s\n",
		"runners", "churn %", "GOGC", "CPU s", "API MB (%full)", "peak MiB", "GH req", "zombie s", "failover", "after s", "standby", "goals")
	fmt.Fprintf(out, "%8s %-13s %-6s %8s %-16s %-15s %8s %-14s %-10s %-9s %-12s %s\n",
		"", "asked/done", "", "/min", "/min", "VmHWM/cgroup", "/min", "(goal)", "s", "", "s/min MiB", "")
	var notes []string
	for _, r := range rows {
		cpu, cpuOK := r.cpuPerMinute()
		bytes, bytesOK := r.bytesPerMinute()
		gh, ghOK := r.githubPerMinute()
		api := "n/a"
		if bytesOK {
			api = fmtMB(bytes)
			if r.fullRead > 0 {
				api += fmt.Sprintf(" (%.2f%%)", bytes/float64(r.fullRead)*100)
			}
		}
		gogc := r.gogc
		if gogc == "" {
			gogc = "-"
		}
		var refs []string
		for _, p := range r.problems {
			notes = append(notes, "PROBLEM "+r.label()+": "+strings.ReplaceAll(p, "\n", "; "))
			refs = append(refs, fmt.Sprintf("[%d]", len(notes)))
		}
		for _, n := range r.notes {
			notes = append(notes, r.label()+": "+strings.ReplaceAll(n, "\n", "; "))
			refs = append(refs, fmt.Sprintf("[%d]", len(notes)))
		}
		fmt.Fprintf(out, "%8d %-13s %-6s %8s %-16s %-15s %8s %-14s %-10s %-9s %-12s %s %s\n",
			r.size, fmtPct(r.churn)+"/"+fmt.Sprintf("%.3g", r.achieved), gogc,
			orNA(cpuOK, fmt.Sprintf("%.2f", cpu)), api,
			testenv.MiB(r.hwm)+"/"+testenv.MiB(r.cgroupPeak),
			orNA(ghOK, fmt.Sprintf("%.0f", gh)),
			secs(r.zombie)+" ("+secs(r.goal)+")", secs(r.failover), secs(r.zombieAfter),
			fmt.Sprintf("%.2f %s", r.standbyCPU, testenv.MiB(max(r.standbyHWM, r.standbyCgroupPeak))),
			r.verdict(), strings.Join(refs, ""))
	}
	if len(notes) > 0 {
		fmt.Fprintln(out)
	}
	for i, n := range notes {
		fmt.Fprintf(out, "[%d] %s\n", i+1, short(n, 600))
	}
}

// plural is n things, "1 minute" or "3 minutes".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// secs is a duration in whole seconds, or "-" for 0 (not seen).
func secs(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", d.Seconds())
}

// orNA is s, or "n/a" when it could not be measured.
func orNA(ok bool, s string) string {
	if !ok {
		return "n/a"
	}
	return s
}
