package churn_test

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// printTable writes one line per row and binary: how many of its sweeps
// judged the scope, what a warm sweep cost in GitHub requests, and when
// the planted pods went; then the problems, numbered.
func printTable(out io.Writer, rows []row, s settings, took time.Duration) {
	if len(rows) == 0 {
		return
	}
	timeout := s.timeout
	if timeout == "" {
		timeout = "the binary's default"
	}
	fmt.Fprintf(out, "\nSweeps of a churning org (GitHub simulator at %s a request; confirm-after %s, registration deadline %s, a sweep every %s or at once after a longer one; %d-%d sweeps a row; REAPER_SWEEP_TIMEOUT %s)\n",
		latency, confirmAfter, registrationDeadline, sweepEvery, s.minSweeps, s.maxSweeps, timeout)
	fmt.Fprintln(out, "judged: sweeps that judged the scope (listed it, neither skipped nor deferred); moved: sweeps whose summary says the list moved (\"-\": the binary does not say)")
	fmt.Fprintln(out, "requests: GitHub requests of a warm sweep (every sweep but the first), mean: 200 and 304 are page reads (again: of them, a page the same sweep had read), by-name look-ups, registration deletes, other; cold: the first sweep's total")
	fmt.Fprintln(out, "floor: what a quiet org of that size costs a sweep, P pages + P-1 revalidations; gone: the sweep after which the planted pod was deleted, and when that sweep ended, from the first sweep's start")
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%7s %6s %5s %-9s %6s %7s %6s %8s | %6s %6s %6s %7s %5s %5s %7s %6s | %-13s %-13s %-14s %s\n",
		"runners", "rate/s", "floor", "binary", "sweeps", "judged", "moved", "wall s",
		"200", "304", "again", "by-name", "del", "other", "total", "cold",
		"zombie gone", "unreg. gone", "churn +/-/busy", "exits; check")
	var problems []string
	for _, r := range rows {
		warm := r.sweeps
		if len(warm) > 1 {
			warm = warm[1:]
		}
		mean := func(f func(sweepRun) int) string {
			if len(warm) == 0 {
				return "-"
			}
			n := 0
			for _, x := range warm {
				n += f(x)
			}
			return strconv.FormatFloat(float64(n)/float64(len(warm)), 'f', 1, 64)
		}
		judged, moved, says := 0, 0, false
		var exits []string
		var walls []float64
		for _, x := range r.sweeps {
			if x.judged {
				judged++
			}
			if x.Moved != nil {
				says = true
				if slices.Contains(*x.Moved, scope) {
					moved++
				}
			}
			exits = append(exits, strconv.Itoa(x.Code))
			walls = append(walls, x.Wall.Seconds())
		}
		movedText := "-"
		if says {
			movedText = fmt.Sprintf("%d/%d", moved, len(r.sweeps))
		}
		wall := "-"
		if len(walls) > 0 {
			slices.Sort(walls)
			wall = fmt.Sprintf("%.1f", walls[len(walls)/2])
			if walls[0] != walls[len(walls)-1] {
				wall = fmt.Sprintf("%.1f-%.1f", walls[0], walls[len(walls)-1])
			}
		}
		cold := "-"
		if len(r.sweeps) > 0 {
			cold = strconv.Itoa(r.sweeps[0].total())
		}
		check := "ok"
		if len(r.problems) > 0 {
			problems = append(problems, fmt.Sprintf("runners=%d rate=%s %s: %s", r.size, fmtRate(r.rate), r.bin, strings.Join(r.problems, "; ")))
			check = fmt.Sprintf("FAILED [%d]", len(problems))
		}
		fmt.Fprintf(out, "%7d %6s %5d %-9s %6d %7s %6s %8s | %6s %6s %6s %7s %5s %5s %7s %6s | %-13s %-13s %-14s %s; %s\n",
			r.size, fmtRate(r.rate), floor(r.size), r.bin, len(r.sweeps),
			fmt.Sprintf("%d/%d", judged, len(r.sweeps)), movedText, wall,
			mean(func(x sweepRun) int { return x.pages }),
			mean(func(x sweepRun) int { return x.notModified }),
			mean(func(x sweepRun) int { return x.again }),
			mean(func(x sweepRun) int { return x.byName }),
			mean(func(x sweepRun) int { return x.deletes }),
			mean(func(x sweepRun) int { return x.other }),
			mean(func(x sweepRun) int { return x.total() }),
			cold,
			gone(r.zombieAt, r.zombieTime, len(r.sweeps)), gone(r.unregisteredAt, r.unregisteredTime, len(r.sweeps)),
			fmt.Sprintf("%d/%d/%d", r.adds, r.removes, r.flips),
			strings.Join(exits, ","), check)
	}
	if len(problems) > 0 {
		fmt.Fprintln(out)
	}
	for i, p := range problems {
		fmt.Fprintf(out, "[%d] %s\n", i+1, p)
	}
	var sweeping time.Duration
	for _, r := range rows {
		sweeping += r.took
	}
	fmt.Fprintf(out, "\ntotal %s (sweeping %s)\n", took.Round(time.Second), sweeping.Round(time.Second))
}

// gone is when a planted pod went: "2 (4.1s)", or "no (6 sweeps)".
func gone(at int, when time.Duration, sweeps int) string {
	if at == 0 {
		return fmt.Sprintf("no (%d sweeps)", sweeps)
	}
	return fmt.Sprintf("%d (%.1fs)", at, when.Seconds())
}
