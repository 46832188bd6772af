// Command chaos runs the deterministic simulation: many sweeps
// of the real reaper in a seeded world, every invariant checked after every
// sweep. It prints the seed first, so that any run can be repeated, and on a
// failure a shrunk reproduction to paste into the regression table.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/runner-reaper/runner-reaper/test/chaos"
)

func main() {
	sweeps := flag.Int("sweeps", 10000, "sweeps to run")
	seed := flag.Uint64("seed", 0, "the world's seed; 0 draws a fresh one")
	hazards := flag.String("hazards", "all", "comma-separated hazards, or all")
	brk := flag.String("break", "none", "run a product broken on purpose, by name (no-job-guard: the product before the job guard); none is the product as it is")
	logsForbidden := flag.Bool("logs-forbidden", false, "a world whose reaper lacks the pods/log right: every runner log read is refused 403")
	unschedOptIn := flag.Bool("unschedulable-opt-in", false, "the reaper is told to delete Unschedulable pods too (REAPER_DELETE_UNSCHEDULABLE), which hazard start-faults makes")
	busyOrg := flag.Int("busy-org-runners", 0, fmt.Sprintf("the busy org's size under hazard busy-org; %d when 0", chaos.DefaultBusyOrgRunners))
	flag.Parse()
	chaos.TuneGC()
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	hz, err := chaos.ParseHazards(*hazards)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	b, err := chaos.ParseBreak(*brk)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Printf("chaos: seed %d, hazards %s\n", *seed, hz)
	if b != chaos.None {
		fmt.Printf("chaos: the product broken on purpose: %s\n", b)
	}
	cfg := chaos.Config{Seed: *seed, Sweeps: *sweeps, Hazards: hz, Break: b, BusyOrgRunners: *busyOrg, LogsForbidden: *logsForbidden,
		UnschedulableOptIn: *unschedOptIn}
	st, err := chaos.Run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	fmt.Println(st.Summary())
	fmt.Print(st.Distribution())
	if hz.Has(chaos.ARC) {
		fmt.Println(st.ARCSummary())
	}
	if hz.Has(chaos.BusyOrg) {
		fmt.Println(st.BusyOrgSummary())
	}
	fmt.Print(st.JobSummary())
	fmt.Println(st.LogSummary())
	if hz.Has(chaos.StartFaults) {
		fmt.Print(st.StartSummary())
	}
	fmt.Printf("chaos: %d of the cleaned leaks waited on a documented cause (bound, skipped scope, refused delete, ledger wipe or overlap)\n", st.Delayed)
	fmt.Printf("chaos: %d shifts, %d lists taken as complete after one, %d pages listing a runner twice, %d wrong marks, %d rate-limited sweeps exited 1, run time %s\n",
		st.Shifts, st.Undetected, st.Repeats, st.WrongMarks, st.RateLimitFailed, st.Duration.Round(1e6))
	if len(st.Violations) == 0 {
		return
	}
	fmt.Printf("chaos: %d violations by invariant: %s\n", len(st.Violations), st.ViolationCounts())
	for i, v := range st.Violations {
		if i == 10 {
			fmt.Printf("... and %d more\n", len(st.Violations)-10)
			break
		}
		fmt.Println("violation:", v)
	}
	repro, err := chaos.Shrink(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: shrink:", err)
		os.Exit(1)
	}
	if b != chaos.None {
		fmt.Printf("reproduction (with -break %s): %s\n", b, repro)
	} else {
		fmt.Printf("reproduction: %s\n", repro)
	}
	os.Exit(1)
}
