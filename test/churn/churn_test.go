// Package churn_test measures what the compiled binary's sweeps make of an
// ephemeral fleet's runner list that moves while it is read: a new
// registration gets the next id and is listed last, a removal slides every
// later runner back one place, so total_count differs between pages and a
// runner can slide onto a page already read.
//
// Each row is one org of a given size on the GitHub simulator (real HTTP
// on 127.0.0.1, 150 ms a request, the real go-github client inside the
// binary), changed in real time at a given rate by a churn goroutine, and
// a namespace of the real API server (envtest) holding four runner pods of
// that org: a planted zombie (running, its registration listed offline and
// not busy), a planted unregistered pod (running, started past the
// registration deadline, its runner never registered), and two that must
// survive (a healthy runner, online; a runner listed busy, offline). Every
// other runner of the org has no pod. The binary sweeps the row again and
// again, each sweep one process as the CronJob runs it, and the table says
// how many sweeps judged the scope, what each sweep cost in requests
// (counted from the simulator's request log), and how long the planted
// pods took to go.
//
// It is a bench, not a test: `make bench` runs it, `go test ./...` and
// `make unit` skip it. Run it alone with
//
//	BENCH_CHURN=1 go test -count=1 -timeout 90m -v -run '^TestChurnTable$' ./test/churn/
//
// Environment:
//
//	BENCH_CHURN             1 to run it (naming it in -run does too)
//	BENCH_CHURN_SIZES       org sizes in runners (default 300,2000,10000)
//	BENCH_CHURN_RATES       registration changes a second (default 1,5,20;
//	                        0 is a quiet org, to measure the floor)
//	BENCH_BASELINE          other binaries, comma-separated, swept in turn
//	                        with this tree's, each on a world of its own
//	                        (rows baseline, baseline2, ...)
//	BENCH_CHURN_MIN_SWEEPS  sweeps a row runs at least (default 4)
//	BENCH_CHURN_MAX_SWEEPS  sweeps a row runs at most, when a planted pod
//	                        is still there (default 6)
//	BENCH_SWEEP_TIMEOUT     the binaries' REAPER_SWEEP_TIMEOUT (default:
//	                        their own, 45s, as an operator gets it)
//	BENCH_CHURN_SEED        the churn's random seed (default 1)
package churn_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	defaultSizes = "300,2000,10000"
	defaultRates = "1,5,20"
	// latency is every GitHub request's round trip, as api.github.com's.
	latency = 150 * time.Millisecond
	// confirmAfter, registrationDeadline: the holds the binary runs with,
	// short so that a row takes seconds of confirmation, not minutes.
	confirmAfter         = 2 * time.Second
	registrationDeadline = 1 * time.Second
	// sweepEvery is how often a sweep starts, as a CronJob's schedule
	// (one that takes longer is followed at once): just past confirmAfter,
	// so that a mark made by one sweep can act in the next.
	sweepEvery = 3 * time.Second
	// perPage is GitHub's largest page, the one the binary asks for.
	perPage = 100
)

// TestChurnTable sweeps every row (size × rate) with this tree's binary and
// each BENCH_BASELINE, and prints the table (see printTable), also after
// a failure.
func TestChurnTable(t *testing.T) {
	if testing.Short() {
		t.Skip("a bench of minutes against a real API server and the GitHub simulator; `make bench` runs it")
	}
	if !asked() {
		t.Skip("a bench of minutes; run it with BENCH_CHURN=1 or -run TestChurnTable (`make bench` does)")
	}
	sizes, err := parseInts(cmp.Or(os.Getenv("BENCH_CHURN_SIZES"), defaultSizes))
	if err != nil {
		t.Fatalf("BENCH_CHURN_SIZES: %v", err)
	}
	rates, err := parseRates(cmp.Or(os.Getenv("BENCH_CHURN_RATES"), defaultRates))
	if err != nil {
		t.Fatalf("BENCH_CHURN_RATES: %v", err)
	}
	minSweeps, err := envInt("BENCH_CHURN_MIN_SWEEPS", 4)
	if err != nil {
		t.Fatal(err)
	}
	maxSweeps, err := envInt("BENCH_CHURN_MAX_SWEEPS", 6)
	if err != nil {
		t.Fatal(err)
	}
	if maxSweeps < minSweeps {
		t.Fatalf("BENCH_CHURN_MAX_SWEEPS=%d is below BENCH_CHURN_MIN_SWEEPS=%d", maxSweeps, minSweeps)
	}
	seed, err := envInt("BENCH_CHURN_SEED", 1)
	if err != nil {
		t.Fatal(err)
	}
	timeout := os.Getenv("BENCH_SWEEP_TIMEOUT")
	if timeout != "" {
		if _, err := time.ParseDuration(timeout); err != nil {
			t.Fatalf("BENCH_SWEEP_TIMEOUT=%q: %v", timeout, err)
		}
	}

	began := time.Now()
	dir := t.TempDir()
	type built struct {
		path string
		err  error
	}
	building := make(chan built, 1)
	go func() {
		p, err := testenv.BuildBinary(dir)
		building <- built{p, err}
	}()
	env, startErr := testenv.Start()
	b := <-building
	if startErr != nil {
		t.Fatal(startErr)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	bins := []binary{{name: "current", path: b.path}}
	if list := os.Getenv("BENCH_BASELINE"); list != "" {
		for i, p := range strings.Split(list, ",") {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("BENCH_BASELINE: %v", err)
			}
			name := "baseline"
			if i > 0 {
				name += strconv.Itoa(i + 1)
			}
			bins = append(bins, binary{name: name, path: p})
		}
	}
	kubeconfig, err := env.Kubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane and binary ready in %s", time.Since(began).Round(100*time.Millisecond))

	settings := settings{
		kubeconfig: kubeconfig, timeout: timeout,
		minSweeps: minSweeps, maxSweeps: maxSweeps,
	}
	var rows []row
	defer func() {
		printTable(os.Stdout, rows, settings, time.Since(began))
	}()
	ctx := context.Background()
	for _, size := range sizes {
		for _, rate := range rates {
			for _, bin := range bins {
				name := fmt.Sprintf("runners=%d/rate=%s/%s", size, fmtRate(rate), bin.name)
				var r row
				t.Run(name, func(t *testing.T) {
					r = runRow(ctx, t, env, settings, bin, size, rate, int64(seed))
				})
				rows = append(rows, r)
			}
		}
	}
}

// asked says whether the bench was asked for: BENCH_CHURN=1, or a -run
// pattern that names it (`go test ./...` gives none).
func asked() bool {
	if os.Getenv("BENCH_CHURN") == "1" {
		return true
	}
	f := flag.Lookup("test.run")
	return f != nil && strings.Contains(f.Value.String(), "TestChurnTable")
}

// binary is one binary the bench sweeps with.
type binary struct {
	// name labels its rows: "current" (built from this tree) or
	// "baseline" (BENCH_BASELINE).
	name, path string
}

// settings are what every row shares.
type settings struct {
	kubeconfig string
	// timeout is REAPER_SWEEP_TIMEOUT; empty leaves the binary's default.
	timeout              string
	minSweeps, maxSweeps int
}

// parseInts reads a comma-separated list of positive whole numbers.
func parseInts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			return nil, fmt.Errorf("%q: want org sizes of at least 10 runners, comma-separated", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseRates reads a comma-separated list of positive rates a second.
func parseRates(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r < 0 || r > 1000 {
			return nil, fmt.Errorf("%q: want changes a second, each from 0 (a quiet org) to 1000, comma-separated", v)
		}
		out = append(out, r)
	}
	return out, nil
}

// envInt reads a positive whole number from the environment, or def.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number", name, v)
	}
	return n, nil
}

// fmtRate is a rate as the table shows it: 1, 5, 0.5.
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// pages is how many pages GitHub lists n runners in.
func pages(n int) int { return max(1, (n+perPage-1)/perPage) }

// floor is what a quiet org of n runners costs a sweep: every page once
// (a 304 when unchanged since the last sweep) and every page but the last
// once more, to prove that nothing slid onto a page already read.
func floor(n int) int { return pages(n) + pages(n) - 1 }
