package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	benchPods   = 10000
	benchScopes = 100
	// podReads is the pod requests of a sweep: one watch-list in the one
	// namespace.
	podReads int64 = 1
)

// BenchmarkSweepFleet runs whole sweeps over 10,000 runner pods on the real
// API server and 10,000 registrations in 100 scopes on the simulator. The
// first sweep reads every page afresh; every later one (the timed loop)
// finds nothing changed and is answered 304. Both must cost exactly one
// pod watch-list per namespace plus, per scope of P = ceil(runners / 100) pages,
// P list pages and P-1 revalidations of the earlier pages (answered 304;
// none at 100 runners a scope).
func BenchmarkSweepFleet(b *testing.B) {
	r := newBenchRig(b)
	wantGH, coldRevalidations := int64(0), int64(0)
	for i := 0; i < benchScopes; i++ {
		pages := int64((benchPods/benchScopes + 99) / 100)
		wantGH += 2*pages - 1
		coldRevalidations += pages - 1
	}

	coldStart := time.Now()
	cold := r.run(sweep.Act)
	coldTook := time.Since(coldStart)
	if cold.Err != nil {
		b.Fatal(cold.Err)
	}
	check(b, "cold", cold, wantGH, coldRevalidations)
	b.Logf("cold sweep: %d GitHub requests (%d answered 304), %d Kubernetes requests (the pod watch-list, the ledger's get and save), %s",
		cold.GitHub.Requests, cold.GitHub.NotModified, cold.Kube.Requests, coldTook.Round(time.Millisecond))

	b.ReportAllocs()
	b.ResetTimer()
	var warm sweep.Result
	for b.Loop() {
		warm = r.run(sweep.Act)
	}
	b.StopTimer()
	if warm.Err != nil {
		b.Fatal(warm.Err)
	}
	check(b, "warm", warm, wantGH, wantGH)
	var took, pods, github, ledger []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		res, p := r.timedRun(sweep.Act)
		total := time.Since(start)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		took, pods, github, ledger = append(took, total), append(pods, p.pods), append(github, p.github), append(ledger, p.ledger)
	}
	b.Logf(`where a warm sweep's time goes, in process (5 sweeps, min / median / max):
  %-24s %s
  %-24s %s
  %-24s %s
  %-24s %s
  %-24s %s`,
		"whole sweep", durSpread(took),
		"pods (one watch-list)", durSpread(pods),
		"GitHub lists (304s)", durSpread(github),
		"ledger load and save", durSpread(ledger),
		"the rest (classify...)", durSpread(rest(took, pods, github, ledger)))
	b.ReportMetric(float64(warm.GitHub.Requests), "github-requests/sweep")
	b.ReportMetric(float64(warm.GitHub.NotModified), "github-304s/sweep")
	b.ReportMetric(float64(warm.Kube.Requests), "kube-requests/sweep")
}

func check(b *testing.B, which string, res sweep.Result, wantGH, want304 int64) {
	b.Helper()
	if res.GitHub.Requests != wantGH || res.GitHub.NotModified != want304 {
		b.Fatalf("%s sweep: %d GitHub requests (%d 304), want %d (%d 304)", which, res.GitHub.Requests, res.GitHub.NotModified, wantGH, want304)
	}
	// The pod watch-list, one ledger get and one ledger save; no actions.
	if res.Kube.Requests != podReads+2 {
		b.Fatalf("%s sweep: %d Kubernetes requests, want %d pod watch-list + 2", which, res.Kube.Requests, podReads)
	}
	if len(res.Observation.Pods) != benchPods {
		b.Fatalf("%s sweep observed %d pods, want %d", which, len(res.Observation.Pods), benchPods)
	}
}

// newBenchRig builds the fleet once: realistic ARC runner pods (see
// testenv.ARCPod) applied in parallel through a client without client-go's
// default 5 requests a second, and their registrations on the simulator.
func newBenchRig(b *testing.B) *rig {
	b.Helper()
	env := plane.Env(b)
	var scopes []fleet.Scope
	for i := 0; i < benchScopes; i++ {
		s, err := fleet.ParseScope(fmt.Sprintf("org:acme-%03d", i))
		if err != nil {
			b.Fatal(err)
		}
		scopes = append(scopes, s)
	}
	r := newRig(b, func(c *config.Config) {
		c.Scopes = scopes
		c.Policy.GhostNamePrefix = ""
		c.Policy.StampEnabled = false
	})
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 2000, 2000
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchScopes; i++ {
		r.sim.AddScope(scopes[i].String())
	}
	for i := 0; i < benchPods; i++ {
		x := ghRunner(fmt.Sprintf("runner-%05d", i))
		r.sim.AddRunner(scopes[i%benchScopes].String(), x)
	}
	start := time.Now()
	if err := applyFleet(cs, r.ns, scopes); err != nil {
		b.Fatal(err)
	}
	b.Logf("fleet of %d pods created in %s", benchPods, time.Since(start).Round(time.Second))
	return r
}

// applyFleet applies benchPods ARC runner pods in ns, spread over scopes,
// from 8 workers.
func applyFleet(cs kubernetes.Interface, ns string, scopes []fleet.Scope) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < benchPods; i += 8 {
				if _, err := testenv.ApplyARCPod(context.Background(), cs, ns, testenv.ARCPod{
					Name: fmt.Sprintf("runner-%05d", i), Org: scopes[i%benchScopes].Name}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkSweepBinary is the figure an operator gets: the compiled binary,
// one process a sweep as the CronJob runs it, over the same fleet as
// BenchmarkSweepFleet (10,000 ARC runner pods, 10,000 registrations in 100
// scopes), on loopback. Each iteration is one whole process: start, read
// the configuration, load the ledger, list, classify, save, report, exit.
// It reports the process's wall time and two measures of its memory: the
// kernel's count of its peak resident set (ru_maxrss, from wait4), and the
// peak charge of a cgroup that held only it (memory.peak, what the
// CronJob's memory limit holds to; "n/a" where cgroup v2 with the memory
// controller is not usable, see testenv.Run), and fails unless every sweep
// costs exactly the floor.
func BenchmarkSweepBinary(b *testing.B) {
	r := newBenchRig(b)
	dir := b.TempDir()
	bin, err := testenv.BuildBinary(dir)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := r.env.Kubeconfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 0, len(r.cfg.Scopes))
	for _, s := range r.cfg.Scopes {
		names = append(names, s.String())
	}
	vars := map[string]string{
		"KUBECONFIG":            kubeconfig,
		"REAPER_SCOPES":         strings.Join(names, ","),
		"REAPER_NAMESPACES":     r.ns,
		"REAPER_GITHUB_API_URL": r.url,
		"REAPER_GITHUB_TOKEN":   token,
		"REAPER_LEDGER":         "configmap:" + r.ns + "/runner-reaper-ledger",
	}
	// One request per scope (100 runners fit one page): a cold sweep reads
	// it, a warm one is answered 304.
	wantGH := int64(benchScopes)
	wantKube := podReads + 2
	sweepOnce := func(which string, want304 int64) binaryRun {
		b.Helper()
		run, err := testenv.RunBinary(context.Background(), bin, vars, "sweep")
		if err != nil {
			b.Fatal(err)
		}
		got := summaryOf(b, run)
		if run.Code != 0 || got.Pods != benchPods || got.Registrations != benchPods {
			b.Fatalf("%s sweep: exit %d, %d pods and %d registrations observed, want 0, %d and %d\n%s%s",
				which, run.Code, got.Pods, got.Registrations, benchPods, benchPods, run.Stdout, run.Stderr)
		}
		if got.GitHub != wantGH || got.NotModified != want304 || got.Kube != wantKube {
			b.Fatalf("%s sweep: %d GitHub requests (%d 304), %d Kubernetes requests; the floor is %d (%d 304) and %d pod watch-list + ledger get and save = %d",
				which, got.GitHub, got.NotModified, got.Kube, wantGH, want304, wantKube-2, wantKube)
		}
		got.Run = run
		return got
	}
	cold := sweepOnce("cold", 0)
	// One line: a benchmark's log is cut at ten lines (without -v).
	unmeasured := ""
	if cold.Unmeasured != "" {
		unmeasured = " (" + cold.Unmeasured + ")"
	}
	b.Logf("cold sweep: %s wall, %s CPU, ru_maxrss %s, cgroup peak %s%s", cold.Wall.Round(time.Millisecond), cold.CPU.Round(time.Millisecond),
		withMiB(cold.MaxRSS), withMiB(cold.CgroupPeak), unmeasured)

	var runs []binaryRun
	b.ResetTimer()
	for b.Loop() {
		runs = append(runs, sweepOnce("warm", wantGH))
	}
	b.StopTimer()
	wall := spread(runs, func(x binaryRun) float64 { return x.Wall.Seconds() * 1000 })
	cpu := spread(runs, func(x binaryRun) float64 { return x.CPU.Seconds() * 1000 })
	inner := spread(runs, func(x binaryRun) float64 { return float64(x.DurationMS) })
	rss := spread(runs, func(x binaryRun) float64 { return float64(x.MaxRSS) })
	peak := spread(runs, func(x binaryRun) float64 { return float64(x.CgroupPeak) })
	b.ReportMetric(wall[1], "wall-ms/sweep")
	b.ReportMetric(mib(int64(rss[2])), "peak-RSS-MiB")
	if peak[0] > 0 {
		b.ReportMetric(mib(int64(peak[2])), "cgroup-peak-MiB")
	}
	b.ReportMetric(float64(wantKube), "kube-requests/sweep")
	b.ReportMetric(float64(wantGH), "github-requests/sweep")
	inOrder := make([]string, len(runs))
	for i, r := range runs {
		inOrder[i] = fmt.Sprint(r.Wall.Round(time.Millisecond))
	}
	b.Logf("process wall of each warm sweep, in order: %s", strings.Join(inOrder, " "))
	b.Logf(`the binary over %d ARC pods and %d registrations in %d scopes, %d warm sweeps (min / median / max):
  %-22s %8.0f %8.0f %8.0f
  %-22s %8.0f %8.0f %8.0f
  %-22s %8.0f %8.0f %8.0f
  %-22s %8s %8s %8s   (cold: %s)
  %-22s %8s %8s %8s   (cold: %s)
  %-22s %d Kubernetes (%d pod watch-list + ledger get and save) and %d GitHub (one a scope, each a 304): exactly the floor`,
		benchPods, benchPods, benchScopes, len(runs),
		"process wall, ms", wall[0], wall[1], wall[2],
		"sweep duration_ms", inner[0], inner[1], inner[2],
		"process CPU, ms", cpu[0], cpu[1], cpu[2],
		"ru_maxrss, MiB", mibs(rss[0]), mibs(rss[1]), mibs(rss[2]), testenv.MiB(cold.MaxRSS),
		"cgroup peak, MiB", mibs(peak[0]), mibs(peak[1]), mibs(peak[2]), testenv.MiB(cold.CgroupPeak),
		"requests a sweep", wantKube, wantKube-2, wantGH)
}

// mibs is a spread's figure in bytes as testenv.MiB prints it ("n/a" for a
// figure not measured).
func mibs(bytes float64) string { return testenv.MiB(int64(bytes)) }

// withMiB is n bytes as "12.3 MiB", or "n/a" when not measured.
func withMiB(n int64) string {
	if n <= 0 {
		return testenv.MiB(n)
	}
	return testenv.MiB(n) + " MiB"
}

// binaryRun is one run of the binary with the figures of its summary line.
type binaryRun struct {
	testenv.Run
	DurationMS    int64 `json:"duration_ms"`
	Pods          int   `json:"pods_observed"`
	Registrations int   `json:"registrations_observed"`
	GitHub        int64 `json:"github_requests"`
	NotModified   int64 `json:"github_not_modified"`
	Kube          int64 `json:"kube_requests"`
}

// summaryOf decodes the run's summary line (msg "sweep").
func summaryOf(b *testing.B, run testenv.Run) binaryRun {
	b.Helper()
	for _, l := range strings.Split(run.Stdout, "\n") {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &line) != nil || line.Msg != "sweep" {
			continue
		}
		var out binaryRun
		if err := json.Unmarshal([]byte(l), &out); err != nil {
			b.Fatalf("summary line %q: %v", l, err)
		}
		return out
	}
	b.Fatalf("no summary line in the run's output (exit %d)\n%s%s", run.Code, run.Stdout, run.Stderr)
	return binaryRun{}
}

// spread is the minimum, median and maximum of f over runs.
func spread(runs []binaryRun, f func(binaryRun) float64) [3]float64 {
	v := make([]float64, len(runs))
	for i, x := range runs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return [3]float64{}
	}
	return [3]float64{v[0], v[len(v)/2], v[len(v)-1]}
}

func durSpread(d []time.Duration) string {
	v := append([]time.Duration(nil), d...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	ms := func(x time.Duration) float64 { return x.Seconds() * 1000 }
	return fmt.Sprintf("%8.0f %8.0f %8.0f ms", ms(v[0]), ms(v[len(v)/2]), ms(v[len(v)-1]))
}

// rest is each sweep's time less its timed phases.
func rest(total []time.Duration, parts ...[]time.Duration) []time.Duration {
	out := append([]time.Duration(nil), total...)
	for _, p := range parts {
		for i := range out {
			out[i] -= p[i]
		}
	}
	return out
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// phases times what a sweep waits on, by wrapping the Sweeper's ports:
// the ledger, the pod list and the GitHub lists. The rest of a sweep's
// time is its own work (classify, confirm, report).
type phases struct {
	ledger, pods, github time.Duration
}

type timedPods struct {
	sweep.PodLister
	d *time.Duration
}

func (t timedPods) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	defer since(t.d, time.Now())
	return t.PodLister.ListPods(ctx)
}

type timedRunners struct {
	sweep.RunnerLister
	d *time.Duration
}

func (t timedRunners) ListRunners(ctx context.Context, s fleet.Scope, c *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	defer since(t.d, time.Now())
	return t.RunnerLister.ListRunners(ctx, s, c)
}

type timedLedger struct {
	state.Store
	d *time.Duration
}

func (t timedLedger) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	defer since(t.d, time.Now())
	return t.Store.Load(ctx)
}

func (t timedLedger) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	defer since(t.d, time.Now())
	return t.Store.Save(ctx, l, v)
}

func since(d *time.Duration, start time.Time) { *d += time.Since(start) }

// timedRun is one sweep with its phases timed.
func (r *rig) timedRun(mode sweep.Mode) (sweep.Result, phases) {
	r.t.Helper()
	var p phases
	s := r.sweeper()
	s.Pods = timedPods{s.Pods, &p.pods}
	s.Runners = timedRunners{s.Runners, &p.github}
	s.Ledger = timedLedger{s.Ledger, &p.ledger}
	return app.Sweep(context.Background(), s, mode, s.Log), p
}
