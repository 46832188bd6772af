package sweep_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/testenv"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

const (
	benchPods   = 10000
	benchScopes = 100
	podPage     = 500 // kube.DefaultPageSize
)

// BenchmarkSweepFleet runs whole sweeps over 10,000 runner pods on the real
// API server and 10,000 registrations in 100 scopes on the simulator. The
// first sweep reads every page afresh; every later one (the timed loop)
// finds nothing changed and is answered 304. Both must cost exactly one pod
// list per namespace page plus, per scope of P = ceil(runners / 100) pages,
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
	wantPodPages := int64((benchPods + podPage - 1) / podPage)

	coldStart := time.Now()
	cold := r.run(sweep.Act)
	coldTook := time.Since(coldStart)
	if cold.Err != nil {
		b.Fatal(cold.Err)
	}
	check(b, "cold", cold, wantGH, coldRevalidations, wantPodPages)
	b.Logf("cold sweep: %d GitHub requests (%d answered 304), %d Kubernetes requests (%d pod list pages + ledger get and save), %s",
		cold.GitHub.Requests, cold.GitHub.NotModified, cold.Kube.Requests, wantPodPages, coldTook.Round(time.Millisecond))

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
	check(b, "warm", warm, wantGH, wantGH, wantPodPages)
	b.ReportMetric(float64(warm.GitHub.Requests), "github-requests/sweep")
	b.ReportMetric(float64(warm.GitHub.NotModified), "github-304s/sweep")
	b.ReportMetric(float64(warm.Kube.Requests), "kube-requests/sweep")
}

func check(b *testing.B, which string, res sweep.Result, wantGH, want304, podPages int64) {
	b.Helper()
	if res.GitHub.Requests != wantGH || res.GitHub.NotModified != want304 {
		b.Fatalf("%s sweep: %d GitHub requests (%d 304), want %d (%d 304)", which, res.GitHub.Requests, res.GitHub.NotModified, wantGH, want304)
	}
	// Pod list pages, one ledger get and one ledger save; no actions.
	if res.Kube.Requests != podPages+2 {
		b.Fatalf("%s sweep: %d Kubernetes requests, want %d pod pages + 2", which, res.Kube.Requests, podPages)
	}
	if len(res.Observation.Pods) != benchPods {
		b.Fatalf("%s sweep observed %d pods, want %d", which, len(res.Observation.Pods), benchPods)
	}
}

// newBenchRig builds the fleet once: pods are created in parallel through
// a client without client-go's default 5 requests a second.
func newBenchRig(b *testing.B) *rig {
	b.Helper()
	env := plane.Env(b)
	var scopes []reconcile.Scope
	for i := 0; i < benchScopes; i++ {
		s, err := reconcile.ParseScope(fmt.Sprintf("org:acme-%03d", i))
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
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < benchPods; i += 8 {
				if _, err := testenv.CreateRunnerPod(context.Background(), cs, r.ns, testenv.RunnerPod{
					Name: fmt.Sprintf("runner-%05d", i), Org: scopes[i%benchScopes].Name, PodState: testenv.Running()}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.Logf("fleet of %d pods created in %s", benchPods, time.Since(start).Round(time.Second))
	return r
}
