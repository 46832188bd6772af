package scale_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	// namespaces is how many namespaces the fleet is spread over, evenly.
	namespaces = 10
	// perScope is the registrations of one scope: one page of GitHub's
	// list (100 a page), so a scope costs one request a sweep.
	perScope = 100
	// token is the one the simulator accepts.
	token = "ghp_scale_bench_token"
	// firstRunnerID is the registration id of runner 0; GitHub's ids are
	// large, and counted from here they are not mistaken for indexes.
	firstRunnerID = 40_000_001
	// firstChurnID is the first registration id of a runner the serve
	// rows make (a replacement, a planted zombie): above every slot's own
	// at any size the bench builds, so that no id is ever two runners'.
	firstChurnID = 90_000_001
)

// world is the fleet the binary sweeps, grown in place: runner i (from 0)
// is pod and EphemeralRunner runner-NNNNNN in namespace i mod 10, and
// registration firstRunnerID+i in scope org:acme-(i/100) on the simulator.
// Growing from n to m runners adds runners n..m-1 and leaves the first n
// as they are, so each size's fleet is the last one's plus more, and every
// scope keeps its 100 registrations.
type world struct {
	env *testenv.Env
	// cs creates the pods in protobuf; cs and dyn send without a client
	// side rate limit.
	cs  kubernetes.Interface
	dyn dynamic.Interface
	sim *ghsim.Sim
	// simURL is the simulator's base URL: the binary's
	// REAPER_GITHUB_API_URL, and the host of the EphemeralRunners'
	// githubConfigUrl.
	simURL     string
	namespaces []string
	scopes     []fleet.Scope
	// size is how many runners exist.
	size    int
	workers int
	started time.Time

	// The serve rows' churn replaces runners in place: slot i keeps its
	// namespace and scope, and gets a new runner (name, registration id,
	// objects) each time. mu guards each slot's runner now.
	mu sync.Mutex
	// gens is each slot's generation, 0 as growTo made it; ids its
	// registration id once replaced; busy the slots being replaced now.
	gens []uint32
	ids  []int64
	busy map[int]bool
	// nextID hands out the registration ids of replacements and planted
	// runners: from firstChurnID, apart from the slots' own.
	nextID atomic.Int64
	// cursor is the churn's next replacement, counted across rows.
	cursor atomic.Int64
	// planted is how many zombies were planted, for their names.
	planted atomic.Int64
}

// newWorld makes the namespaces and the clients that build the fleet, and
// starts the simulator; it holds no runner yet.
func newWorld(ctx context.Context, env *testenv.Env, workers int) (*world, error) {
	cfg := rest.CopyConfig(env.Config)
	// No client-side limit: the build is as fast as the API server takes
	// it.
	cfg.QPS, cfg.Burst = -1, 0
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for the fleet: %w", err)
	}
	proto := rest.CopyConfig(cfg)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(proto)
	if err != nil {
		return nil, fmt.Errorf("clientset for the fleet: %w", err)
	}
	// GitHub's own budget would be spent by the cold sweeps of the larger
	// sizes (one request a scope); the bench measures the reaper, not
	// GitHub's limit, and reports what each sweep spends.
	sim := ghsim.New(ghsim.Options{Token: token, RateLimit: 1 << 30})
	url, err := sim.Start()
	if err != nil {
		return nil, fmt.Errorf("start the GitHub simulator: %w", err)
	}
	w := &world{env: env, cs: cs, dyn: dyn, sim: sim, simURL: url, workers: workers, started: time.Now(), busy: map[int]bool{}}
	w.nextID.Store(firstChurnID - 1)
	for i := range namespaces {
		ns := fmt.Sprintf("arc-runners-%d", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			sim.Close()
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
		w.namespaces = append(w.namespaces, ns)
	}
	return w, nil
}

// close stops the simulator.
func (w *world) close() { w.sim.Close() }

// scopeKeys are every scope's key, as REAPER_SCOPES takes them.
func (w *world) scopeKeys() []string {
	out := make([]string, len(w.scopes))
	for i, s := range w.scopes {
		out[i] = s.String()
	}
	return out
}

// growth is what one growTo did.
type growth struct {
	runners int
	took    time.Duration
}

// rate is the objects (pods and EphemeralRunners) created a second.
func (g growth) rate() float64 { return float64(2*g.runners) / g.took.Seconds() }

// growTo adds runners until there are n: their registrations on the
// simulator, then their EphemeralRunners and pods from w.workers workers.
// On an error the world is left part grown, and unusable.
func (w *world) growTo(ctx context.Context, n int) (growth, error) {
	if n < w.size || n%perScope != 0 {
		return growth{}, fmt.Errorf("grow the fleet from %d to %d runners: sizes grow, in whole scopes of %d", w.size, n, perScope)
	}
	for i := len(w.scopes); i < n/perScope; i++ {
		s, err := fleet.ParseScope(fmt.Sprintf("org:acme-%03d", i))
		if err != nil {
			return growth{}, err
		}
		w.sim.AddScope(s.String())
		w.scopes = append(w.scopes, s)
	}
	runners := make([]testenv.ARCRunner, 0, n-w.size)
	for i := w.size; i < n; i++ {
		r, err := w.runner(i)
		if err != nil {
			return growth{}, err
		}
		scope := w.scopes[i/perScope].String()
		w.sim.AddRunner(scope, ghsim.Runner{ID: r.RunnerID, Name: r.Name, Status: "online", Ephemeral: true, RunnerGroupID: 1,
			Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: testenv.ScaleSet, Type: "read-only"}}})
		runners = append(runners, r)
	}

	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1)) - 1
				if j >= len(runners) || ctx.Err() != nil {
					return
				}
				i := w.size + j
				if err := testenv.CreateARCRunner(ctx, w.cs, w.dyn, w.namespaces[i%namespaces], runners[j]); err != nil {
					cancel(fmt.Errorf("runner %d: %w", i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return growth{}, fmt.Errorf("grow the fleet from %d to %d runners: %w", w.size, n, err)
	}
	g := growth{runners: n - w.size, took: time.Since(start)}
	w.mu.Lock()
	w.gens = append(w.gens, make([]uint32, n-w.size)...)
	w.ids = append(w.ids, make([]int64, n-w.size)...)
	w.size = n
	w.mu.Unlock()
	return g, nil
}

// runner is runner i as the world builds it.
func (w *world) runner(i int) (testenv.ARCRunner, error) {
	scope := w.scopes[i/perScope]
	url, err := ghsim.ConfigURL(w.simURL, scope.String())
	if err != nil {
		return testenv.ARCRunner{}, err
	}
	return testenv.ARCRunner{
		ARCPod: testenv.ARCPod{
			Name: fmt.Sprintf("runner-%06d", i), Org: scope.Name,
			// Started before the world was, so that none is ever young
			// or in the future.
			Started: w.started.Add(-time.Hour),
		},
		ConfigURL: url,
		RunnerID:  firstRunnerID + int64(i),
	}, nil
}
