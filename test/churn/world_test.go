package churn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	// org is the one scope of every world, as the pods' label and
	// REAPER_SCOPES name it.
	org   = "acme"
	scope = "org:" + org
	// token is the one the simulator accepts.
	token = "ghp_churn_bench_token"
)

// The pods every world plants, by name (a runner's name is its pod's).
const (
	// zombiePod runs, and its registration is listed offline, not busy:
	// it must go, registration first.
	zombiePod = "acme-zombie"
	// unregisteredPod runs past the registration deadline, and its
	// runner never registered: it must go, after a look-up by name.
	unregisteredPod = "acme-unregistered"
	// healthyPod runs, and its registration is online and idle: it
	// stays.
	healthyPod = "acme-healthy"
	// busyPod runs, and its registration is listed offline and busy
	// (rule 2 beats every GitHub-based verdict): it stays.
	busyPod = "acme-busy"
)

// planted is the registrations planted beside the churned ones.
const planted = 3

// world is one row's universe for one binary: a simulator of its own
// holding the org, a namespace of its own holding the pods, the ledger
// in it, and the churn that moves the org's list.
type world struct {
	env *testenv.Env
	sim *ghsim.Sim
	url string
	ns  string
	// size is the org's size the churn keeps: between size-2 and size
	// registrations, so that it always lists in pages(size) pages.
	size  int
	churn *churn
	// regs are the planted registrations: the zombie's, the healthy
	// one's and the busy one's.
	zombieID, healthyID, busyID int64
}

// newWorld builds a world of size runners: size-3 churned registrations
// without pods, half of them with ids below the planted ones and half
// above, so that the planted registrations sit mid-list, where every
// removal before them slides them back; and the four pods.
func newWorld(ctx context.Context, env *testenv.Env, size int, seed int64) (*world, error) {
	sim := ghsim.New(ghsim.Options{Token: token, RateLimit: 1 << 30, Latency: latency})
	url, err := sim.Start()
	if err != nil {
		return nil, fmt.Errorf("start the GitHub simulator: %w", err)
	}
	sim.AddScope(scope)
	w := &world{env: env, sim: sim, url: url, size: size}
	w.churn = &churn{sim: sim, target: size - planted, rng: rand.New(rand.NewPCG(uint64(seed), uint64(size)))}
	others := size - planted
	for range others / 2 {
		w.churn.add()
	}
	w.zombieID = sim.AddRunner(scope, runner(zombiePod, "offline", false)).ID
	w.healthyID = sim.AddRunner(scope, runner(healthyPod, "online", false)).ID
	w.busyID = sim.AddRunner(scope, runner(busyPod, "offline", true)).ID
	for range others - others/2 {
		w.churn.add()
	}

	ns, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "churn-"}}, metav1.CreateOptions{})
	if err != nil {
		sim.Close()
		return nil, fmt.Errorf("create a namespace: %w", err)
	}
	w.ns = ns.Name
	for _, name := range []string{zombiePod, unregisteredPod, healthyPod, busyPod} {
		if _, err := testenv.CreateRunnerPod(ctx, env.Client, w.ns, testenv.RunnerPod{Name: name, Org: org, PodState: testenv.Running()}); err != nil {
			w.close(ctx)
			return nil, err
		}
	}
	return w, nil
}

// runner is a registration as ARC's ephemeral runners have it.
func runner(name, status string, busy bool) ghsim.Runner {
	return ghsim.Runner{Name: name, Status: status, Busy: busy, Ephemeral: true, RunnerGroupID: 1,
		Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: "linux", Type: "read-only"}}}
}

// close stops the churn and the simulator and deletes the namespace.
func (w *world) close(ctx context.Context) {
	w.churn.stop()
	w.sim.Close()
	if w.ns != "" {
		_ = w.env.Client.CoreV1().Namespaces().Delete(ctx, w.ns, metav1.DeleteOptions{})
	}
}

// podExists says whether the pod is still there.
func (w *world) podExists(ctx context.Context, name string) (bool, error) {
	_, err := w.env.Client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// registered says whether the simulator still holds the registration.
func (w *world) registered(id int64) bool {
	for _, r := range w.sim.Runners(scope) {
		if r.ID == id {
			return true
		}
	}
	return false
}

// churn moves an org's list as an ephemeral fleet does, in real time: at
// each tick it registers a runner (the next id, listed last) or removes a
// random one of its own (every later runner slides back one place),
// keeping the org between target-2 and target runners of its own; on a
// quarter of the ticks it also flips a random runner's busy, as jobs start
// and end. It never touches the planted registrations.
type churn struct {
	sim    *ghsim.Sim
	target int

	mu  sync.Mutex
	rng *rand.Rand
	ids []int64
	// adds, removes and flips are what it did since it started.
	adds, removes, flips int

	cancel context.CancelFunc
	done   chan struct{}
}

// add registers one runner, as a new ephemeral runner does.
func (c *churn) add() {
	r := c.sim.AddRunner(scope, runner("", "online", false))
	c.ids = append(c.ids, r.ID)
}

// start moves the list rate times a second until stop; a rate of 0
// leaves it quiet.
func (c *churn) start(rate float64) {
	if rate == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.step()
			}
		}
	}()
}

// stop ends the churn and waits for it; a churn never started stops at
// once.
func (c *churn) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
}

// step is one change, and on a quarter of them a busy flip.
func (c *churn) step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.ids)
	if n <= c.target-2 || (n < c.target && c.rng.IntN(2) == 0) {
		c.add()
		c.adds++
	} else {
		i := c.rng.IntN(n)
		id := c.ids[i]
		c.ids[i] = c.ids[n-1]
		c.ids = c.ids[:n-1]
		c.sim.RemoveRunner(scope, id)
		c.removes++
	}
	if c.rng.IntN(4) == 0 && len(c.ids) > 0 {
		id := c.ids[c.rng.IntN(len(c.ids))]
		c.sim.SetRunner(scope, id, func(r *ghsim.Runner) { r.Busy = !r.Busy })
		c.flips++
	}
}

// counts is what the churn did so far.
func (c *churn) counts() (adds, removes, flips int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adds, c.removes, c.flips
}
