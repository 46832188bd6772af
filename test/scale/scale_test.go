// Package scale_test measures the compiled binary's sweep over ARC fleets
// of up to 100,000 runners, on a control plane of its own (see
// testenv.StartLarge): what one CronJob run costs in time, CPU and memory,
// what its ledger holds, and how its requests grow with the fleet; beside
// it, the same binary built to read through client-go's reflectors
// (-tags stdread, see kube/readpath_std.go); and, after a size's CronJob
// rows, the long-running mode on the same world (see serve_test.go): two
// `runner-reaper serve` replicas while the fleet churns, what the leader
// costs a minute, how long a planted zombie takes to go, and the same
// across a kill -9 of the leader.
//
// Each size's world is the last one's plus more runners (see world), each
// runner an EphemeralRunner and its pod as ARC leaves them, and a
// registration on the GitHub simulator, 100 a scope. Nothing in it is to
// be reaped, so every CronJob sweep is the steady state: the binary lists
// everything, finds nothing, saves its ledger and exits.
//
// Environment:
//
//	BENCH_SIZES          fleet sizes, ascending multiples of 100
//	                     (default 10000,50000,100000)
//	BENCH_BASELINE       other binaries, comma-separated, swept in turn
//	                     with this tree's on the same world, each on a
//	                     ledger of its own (rows baseline, baseline2, ...)
//	BENCH_WORKERS        writers that build the world (default 48)
//	BENCH_SWEEP_TIMEOUT  the binary's REAPER_SWEEP_TIMEOUT (default: its
//	                     own, 45s, as an operator gets it)
//	BENCH_KEEP_BINARY    a path to copy this tree's binary to, to serve as
//	                     a later run's BENCH_BASELINE
//	BENCH_MEMORY_LIMIT   a memory limit (a quantity: 192Mi) under which
//	                     this tree's binaries (current and stdread) also
//	                     sweep, in turn with the others, as in a container
//	                     with that limit
//	BENCH_LEDGER         the binaries' ledger backend: configmap (default),
//	                     a ConfigMap each binary and size, as the CronJob
//	                     keeps it; or file, a JSON file each, which costs
//	                     the API server nothing
//	BENCH_SERVE_SIZES    the sizes of the serve rows, each among
//	                     BENCH_SIZES (default 10000,100000, those of them
//	                     among BENCH_SIZES); none for no serve rows
//	BENCH_SERVE_CHURN    the churn rates of the serve rows, in percent of
//	                     the runners replaced a minute (default 0.1,1,10)
//	BENCH_SERVE_MINUTES  the measured minutes of a serve row (default 3)
//	BENCH_SERVE_CONFIRM_AFTER  the replicas' REAPER_CONFIRM_AFTER (default:
//	                     their own, 5m, as the CronJob rows run); a planted
//	                     zombie's goal is it and two intervals
package scale_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// defaultSizes are the fleets measured when BENCH_SIZES is not set:
// 50,000 is where the shipped 128 MiB limit is judged.
const defaultSizes = "10000,50000,100000"

// defaultWorkers is how many writers build the world. The API server's
// CPU is the limit (about 15 ms of it a runner, its four writes): on 2
// cores 8 writers built as fast as 48, and more writers only keep it busy
// through each one's round trips.
const defaultWorkers = 48

// BenchmarkSweepScale sweeps fleets of each BENCH_SIZES size with the
// binary this tree builds, its stdread build (and BENCH_BASELINE's),
// alternately: per size, a cold sweep on an empty ledger, then b.Loop's
// warm sweeps (-benchtime 5x for five), each one process as the CronJob
// runs it. Every sweep must observe the whole fleet and cost exactly its
// floor of requests (see sweeper.check); a scope the budget defers to a
// later sweep of the rotation is recorded, not failed. A sweep that falls
// short is measured and kept, and fails its size (a stdread one's is shown
// and fails nothing); a binary its default deadline stopped is swept again
// with REAPER_SWEEP_TIMEOUT=10m, to measure what it would have cost. Then
// the size's serve rows, if it has any (see measureServe). It logs each
// sweep as it ends and prints the tables of every size at the end, also
// after a failure.
func BenchmarkSweepScale(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a control plane and fleets of up to 100,000 runners; `make bench` runs it")
	}
	sizes, err := parseSizes(cmp.Or(os.Getenv("BENCH_SIZES"), defaultSizes))
	if err != nil {
		b.Fatal(err)
	}
	workers := defaultWorkers
	if v := os.Getenv("BENCH_WORKERS"); v != "" {
		if workers, err = strconv.Atoi(v); err != nil || workers < 1 {
			b.Fatalf("BENCH_WORKERS=%q: want a positive number of writers", v)
		}
	}
	ledger := ledgerBackend(cmp.Or(os.Getenv("BENCH_LEDGER"), string(ledgerConfigMap)))
	if ledger != ledgerConfigMap && ledger != ledgerFile {
		b.Fatalf("BENCH_LEDGER=%q: want %s or %s", ledger, ledgerConfigMap, ledgerFile)
	}
	serve, err := parseServeSettings(sizes)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// dir holds the binary, the kubeconfig and the file ledgers.
	dir := b.TempDir()
	built, err := testenv.BuildBinary(dir)
	if err != nil {
		b.Fatal(err)
	}
	// The same tree reading through client-go's reflectors, for the
	// read-path rows.
	stdread, err := testenv.BuildBinaryWith(dir, testenv.BuildOptions{Tags: []string{"stdread"}})
	if err != nil {
		b.Fatal(err)
	}
	if keep := os.Getenv("BENCH_KEEP_BINARY"); keep != "" {
		if err := copyFile(built, keep); err != nil {
			b.Fatalf("keep the binary at BENCH_KEEP_BINARY: %v", err)
		}
	}
	timeout := os.Getenv("BENCH_SWEEP_TIMEOUT")
	bins := []binary{{name: "current", path: built, timeout: timeout}, {name: "stdread", path: stdread, timeout: timeout, variant: true}}
	if v := os.Getenv("BENCH_MEMORY_LIMIT"); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			b.Fatalf("BENCH_MEMORY_LIMIT=%q: want a positive quantity of memory, such as 192Mi", v)
		}
		bins = []binary{bins[0], {name: "current@" + v, path: built, timeout: timeout, memoryLimit: q.Value()},
			bins[1], {name: "stdread@" + v, path: stdread, timeout: timeout, memoryLimit: q.Value(), variant: true}}
	}
	if list := os.Getenv("BENCH_BASELINE"); list != "" {
		for i, base := range strings.Split(list, ",") {
			if _, err := os.Stat(base); err != nil {
				b.Fatalf("BENCH_BASELINE: %v", err)
			}
			name := "baseline"
			if i > 0 {
				name += strconv.Itoa(i + 1)
			}
			bins = append(bins, binary{name: name, path: base, timeout: timeout})
		}
	}

	planeStart := time.Now()
	env, err := testenv.StartLarge(testenv.LargeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Errorf("stop the control plane: %v", err)
		}
	})
	b.Logf("control plane started in %s", time.Since(planeStart).Round(100*time.Millisecond))
	w, err := newWorld(ctx, env, workers)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.close)
	// The ledgers' namespace holds the serve rows' Leases too.
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ledgerNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create namespace %s: %v", ledgerNamespace, err)
	}
	kubeconfig, err := env.Kubeconfig(dir)
	if err != nil {
		b.Fatal(err)
	}

	began := time.Now()
	var results []sizeResult
	defer func() {
		// Also after a failure: the sizes measured before it stand.
		printTable(os.Stdout, results, cmp.Or(timeout, "the default"), ledger, time.Since(began))
		printServeTable(os.Stdout, results, serve, ledger)
	}()
	for i, n := range sizes {
		res := &sizeResult{size: n, runs: map[string][]sweepRun{}}
		ok := b.Run(fmt.Sprintf("runners=%d", n), func(b *testing.B) {
			s := sweeper{w: w, kubeconfig: kubeconfig, size: n, ledger: ledger, dir: dir}
			measureSize(ctx, b, w, s, bins, res)
			if slices.Contains(serve.sizes, n) {
				res.serve = measureServe(ctx, b, w, s, built, timeout, serve, res.fullRead())
			}
		})
		// A failed size's sweeps so far are printed too.
		results = append(results, *res)
		if !ok && i < len(sizes)-1 {
			b.Fatalf("runners=%d failed; no larger fleet is built on it", n)
		}
	}
}

// sizeResult is one fleet size's measurements.
type sizeResult struct {
	size   int
	scopes int
	grown  growth
	// built is the control plane after the world was grown; swept after
	// the sweeps (its peaks are the process's so far).
	built, swept testenv.PlaneUsage
	// runs are each binary's sweeps, the cold one first, by name; order
	// is the names in the order they were first swept.
	runs  map[string][]sweepRun
	order []string
	// serve are the serve rows at this size.
	serve []serveRow
}

// fullRead is what the CronJob read from the API server a sweep at this
// size: the median kube_bytes of this tree's warm sweeps (its cold one
// when it has none); 0 when its sweeps did not say.
func (r sizeResult) fullRead() int64 {
	runs := r.runs["current"]
	if long, ok := r.runs["current@"+longTimeout]; ok && stopped(runs) {
		// Stopped sweeps read part of the fleet.
		runs = long
	}
	if len(runs) > 1 {
		runs = runs[1:]
	}
	if len(runs) == 0 {
		return 0
	}
	return int64(spread(runs, func(x sweepRun) float64 { return float64(x.KubeBytes) })[1])
}

// measureSize grows the world to s.size, then sweeps it: a cold sweep of
// each binary, then b.Loop's warm sweeps, one of each binary an
// iteration, in turns (A B, B A, ...) so that neither always runs
// second. It records into res as it goes, so that what a failure leaves
// measured is kept.
func measureSize(ctx context.Context, b *testing.B, w *world, s sweeper, bins []binary, res *sizeResult) {
	g, err := w.growTo(ctx, s.size)
	if err != nil {
		b.Fatal(err)
	}
	res.grown, res.scopes = g, len(w.scopes)
	if res.built, err = w.env.Usage(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("world grown by %d runners (%d objects) to %d in %s: %.0f objects/s from %d writers; kube-apiserver %s MiB resident, etcd %s MiB, etcd database %s MiB (%s MiB in use)",
		g.runners, 2*g.runners, s.size, g.took.Round(100*time.Millisecond), g.rate(), w.workers,
		testenv.MiB(res.built.APIServerRSS), testenv.MiB(res.built.EtcdRSS),
		testenv.MiB(res.built.EtcdDBBytes), testenv.MiB(res.built.EtcdDBInUseBytes))

	sweepOnce := func(bin binary, cold bool) {
		b.Helper()
		r, err := s.sweep(ctx, bin, cold)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := res.runs[bin.name]; !ok {
			res.order = append(res.order, bin.name)
		}
		res.runs[bin.name] = append(res.runs[bin.name], r)
		switch {
		case r.problem != nil && bin.variant:
			// Shown in the table, and failing nothing: see variant.
			b.Logf("%s's %s sweep over %d runners: %v\n%s%s", bin.name, kind(cold), s.size, r.problem, tail(r.Stdout, 4096), r.Stderr)
		case r.problem != nil:
			// Measured and kept; the size fails, and no larger world
			// is built on it.
			b.Errorf("%s's %s sweep over %d runners: %v\n%s%s", bin.name, kind(cold), s.size, r.problem, tail(r.Stdout, 4096), r.Stderr)
		}
		b.Logf("%s %s sweep: %s wall (sweep %d ms), %s CPU, ru_maxrss %s MiB, cgroup peak %s MiB; %d of %d scopes listed, GitHub %d (%d 304), Kubernetes %d; %s ledger %d bytes, trimmed %d lists and %d marks",
			bin.name, kind(cold), r.Wall.Round(time.Millisecond), r.DurationMS, r.CPU.Round(time.Millisecond),
			testenv.MiB(r.MaxRSS), testenv.MiB(r.CgroupPeak), r.listed, r.Scopes, r.GitHub, r.NotModified, r.Kube,
			s.ledger, r.ledgerBytes, r.TrimmedLists, r.TrimmedMarks)
	}
	for _, bin := range bins {
		sweepOnce(bin, true)
	}
	turn := 0
	for b.Loop() {
		for i := range bins {
			sweepOnce(bins[(i+turn)%len(bins)], false)
		}
		turn++
	}
	// A sweep its default deadline stopped says only that the fleet does
	// not fit it: the size fails (unless the binary is a variant), and
	// each binary so stopped is swept again, as many times, with a
	// deadline it fits, to measure what such a sweep costs.
	var long []binary
	for _, bin := range bins {
		if bin.timeout == "" && stopped(res.runs[bin.name]) {
			long = append(long, binary{name: bin.name + "@" + longTimeout, path: bin.path, timeout: longTimeout, memoryLimit: bin.memoryLimit, variant: bin.variant})
		}
	}
	if len(long) > 0 {
		for _, bin := range long {
			sweepOnce(bin, true)
		}
		for t := range turn {
			for i := range long {
				sweepOnce(long[(i+t)%len(long)], false)
			}
		}
	}
	if res.swept, err = w.env.Usage(ctx); err != nil {
		b.Fatal(err)
	}
	if warm := res.runs[bins[0].name][1:]; len(warm) > 0 {
		wall := spread(warm, func(r sweepRun) float64 { return float64(r.Wall.Milliseconds()) })
		cpu := spread(warm, func(r sweepRun) float64 { return float64(r.CPU.Milliseconds()) })
		rss := spread(warm, func(r sweepRun) float64 { return float64(r.MaxRSS) })
		b.ReportMetric(wall[1], "wall-ms/sweep")
		b.ReportMetric(cpu[1], "cpu-ms/sweep")
		b.ReportMetric(rss[2]/(1<<20), "maxrss-MiB")
		b.ReportMetric(float64(warm[len(warm)-1].Kube), "kube-requests/sweep")
		b.ReportMetric(float64(warm[len(warm)-1].GitHub), "github-requests/sweep")
	}
}

// longTimeout is the REAPER_SWEEP_TIMEOUT a size is swept again with when
// the default deadline stopped its sweeps.
const longTimeout = "10m"

// stopped reports whether a sweep of runs was stopped by its deadline.
func stopped(runs []sweepRun) bool {
	return slices.ContainsFunc(runs, func(r sweepRun) bool { return r.Stopped != "" })
}

// parseSizes reads BENCH_SIZES: ascending fleet sizes, each a multiple of
// 100 (whole scopes).
func parseSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n%perScope != 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("BENCH_SIZES=%q: want ascending fleet sizes, each a positive multiple of %d", v, perScope)
		}
		out = append(out, n)
	}
	return out, nil
}

// copyFile copies the binary at from to to, executable.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// short is s cut to n bytes in the middle, keeping how it starts (what
// failed) and how it ends (why).
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " ... " + s[len(s)-n/2:]
}

// tail is the last n bytes of s: a sweep's output holds a line with every
// deferred scope, thousands of them.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// spread is the minimum, median and maximum of f over runs.
func spread(runs []sweepRun, f func(sweepRun) float64) [3]float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return [3]float64{v[0], v[len(v)/2], v[len(v)-1]}
}

// printTable writes every size's rows: per binary, its cold sweep and the
// spread (median [min-max]) of its warm ones; then each size's world.
func printTable(out io.Writer, results []sizeResult, timeout string, ledger ledgerBackend, took time.Duration) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(out, "\nThe binary's sweep over ARC fleets (pods and EphemeralRunners in %d namespaces, %d registrations a scope; REAPER_SWEEP_TIMEOUT %s; %s ledger); warm: median [min-max]\n\n",
		namespaces, perScope, timeout, ledger)
	// problems are the first problem of each row that has one, numbered
	// under the table.
	var problems []string
	fmt.Fprintf(out, "%8s %-17s %-7s %-19s %-19s %-21s %-21s %9s %-9s %-12s %5s %-17s %-9s %s\n",
		"runners", "binary", "sweep", "wall ms", "CPU ms", "ru_maxrss MiB", "cgroup peak MiB", "ledger B", "trimmed", "GitHub(304)", "kube", "kube MB", "listed", "check")
	for _, r := range results {
		for _, name := range r.order {
			runs := r.runs[name]
			row := func(which string, rs []sweepRun) {
				last := rs[len(rs)-1]
				ms := func(f func(sweepRun) time.Duration) string {
					return spreadText(spread(rs, func(x sweepRun) float64 { return float64(f(x).Milliseconds()) }), "%.0f")
				}
				mib := func(f func(sweepRun) int64) string {
					s := spread(rs, func(x sweepRun) float64 { return float64(f(x)) / (1 << 20) })
					if s[2] <= 0 {
						return "n/a"
					}
					return spreadText(s, "%.1f")
				}
				listed := fmt.Sprintf("%d/%d", slices.MinFunc(rs, func(a, b sweepRun) int { return a.listed - b.listed }).listed, last.Scopes)
				check, failed := "ok", 0
				for _, x := range rs {
					if x.problem != nil {
						failed++
						if failed == 1 {
							problems = append(problems, strings.ReplaceAll(x.problem.Error(), "\n", "; "))
						}
					}
				}
				if failed > 0 {
					check = fmt.Sprintf("%d FAILED [%d]", failed, len(problems))
				}
				mb := "n/a"
				if s := spread(rs, func(x sweepRun) float64 { return float64(x.KubeBytes) / 1e6 }); s[2] > 0 {
					mb = spreadText(s, "%.1f")
				}
				fmt.Fprintf(out, "%8d %-17s %-7s %-19s %-19s %-21s %-21s %9d %-9s %-12s %5d %-17s %-9s %s\n",
					r.size, name, which,
					ms(func(x sweepRun) time.Duration { return x.Wall }),
					ms(func(x sweepRun) time.Duration { return x.CPU }),
					mib(func(x sweepRun) int64 { return x.MaxRSS }),
					mib(func(x sweepRun) int64 { return x.CgroupPeak }),
					last.ledgerBytes, fmt.Sprintf("%d/%d", last.TrimmedLists, last.TrimmedMarks),
					fmt.Sprintf("%d(%d)", last.GitHub, last.NotModified), last.Kube, mb, listed, check)
			}
			row("cold", runs[:1])
			if len(runs) > 1 {
				row(fmt.Sprintf("warm(%d)", len(runs)-1), runs[1:])
			}
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(out)
	}
	for i, p := range problems {
		fmt.Fprintf(out, "[%d] %s\n", i+1, short(p, 600))
	}
	fmt.Fprintf(out, "\n%8s %8s %10s %12s %16s %10s %10s %16s %16s\n",
		"runners", "scopes", "rotation", "built in", "objects/s", "apiserver", "etcd", "etcd DB", "(peak RSS)")
	fmt.Fprintf(out, "%8s %8s %10s %12s %16s %10s %10s %16s %16s\n",
		"", "", "sweeps", "", "", "RSS MiB", "RSS MiB", "MiB (in use)", "apiserver/etcd")
	for _, r := range results {
		// Of the first binary whose sweeps all listed.
		rot := "-"
		for _, name := range r.order {
			if n := rotation(r.runs[name], r.scopes); n > 0 {
				rot = strconv.Itoa(n)
				break
			}
		}
		fmt.Fprintf(out, "%8d %8d %10s %12s %16.0f %10s %10s %16s %16s\n",
			r.size, r.scopes, rot, r.grown.took.Round(time.Second), r.grown.rate(),
			testenv.MiB(r.swept.APIServerRSS), testenv.MiB(r.swept.EtcdRSS),
			testenv.MiB(r.swept.EtcdDBBytes)+" ("+testenv.MiB(r.swept.EtcdDBInUseBytes)+")",
			testenv.MiB(r.swept.APIServerPeakRSS)+"/"+testenv.MiB(r.swept.EtcdPeakRSS))
	}
	fmt.Fprintf(out, "\ntotal %s\n", took.Round(time.Second))
}

// spreadText is a spread as "median [min-max]", or the one figure when
// all three agree.
func spreadText(s [3]float64, format string) string {
	med, lo, hi := fmt.Sprintf(format, s[1]), fmt.Sprintf(format, s[0]), fmt.Sprintf(format, s[2])
	if lo == hi {
		return med
	}
	return med + " [" + lo + "-" + hi + "]"
}
