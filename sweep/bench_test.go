package sweep_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/fleet"
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
	if res.Observed.Pods != benchPods {
		b.Fatalf("%s sweep observed %d pods, want %d", which, res.Observed.Pods, benchPods)
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
	return reported(context.Background(), s, mode, s.Log), p
}
