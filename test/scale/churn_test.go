package scale_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// churnStride spreads the churn over the fleet: replacement k takes slot
// k×churnStride mod size, so that consecutive replacements fall in
// different scopes and namespaces, as an ephemeral fleet's jobs end all
// over it, rather than emptying one scope after another. A prime, so that
// it visits every slot of any size it does not divide.
const churnStride = 7919

// registration is a runner's registration as the world's runners have it.
func registration(id int64, name, status string) ghsim.Runner {
	return ghsim.Runner{ID: id, Name: name, Status: status, Ephemeral: true, RunnerGroupID: 1,
		Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: testenv.ScaleSet, Type: "read-only"}}}
}

// slotRunner is who slot i is now: its name and registration id.
func (w *world) slotRunner(i int) (string, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gens[i] == 0 {
		return fmt.Sprintf("runner-%06d", i), firstRunnerID + int64(i)
	}
	return fmt.Sprintf("runner-%06d-%d", i, w.gens[i]), w.ids[i]
}

// takeSlot is the next slot the churn replaces, marked busy until
// releaseSlot: the next one along the stride that no other replacement
// holds.
func (w *world) takeSlot() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		k := w.cursor.Add(1) - 1
		i := int(k * churnStride % int64(w.size))
		if !w.busy[i] {
			w.busy[i] = true
			return i
		}
	}
}

func (w *world) releaseSlot(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, i)
}

// replace retires slot i's runner and makes a new one in its place, as an
// ephemeral fleet does when a job ends: the old pod and EphemeralRunner
// go, then its registration; the new registration comes first, then its
// EphemeralRunner and pod, started now. In that order no moment of it
// shows the reaper a pod without its registration or a registration
// offline: the churn alone makes no candidate. The slot keeps its
// namespace and scope, so the world's shape holds for the next size.
func (w *world) replace(ctx context.Context, i int) error {
	name, id := w.slotRunner(i)
	ns, scope := w.namespaces[i%namespaces], w.scopes[i/perScope]
	if err := testenv.DeleteARCRunner(ctx, w.cs, w.dyn, ns, name); err != nil {
		return fmt.Errorf("retire runner %d (%s): %w", i, name, err)
	}
	w.sim.RemoveRunner(scope.String(), id)
	w.mu.Lock()
	gen := w.gens[i] + 1
	w.mu.Unlock()
	newID := w.nextID.Add(1)
	newName := fmt.Sprintf("runner-%06d-%d", i, gen)
	url, err := ghsim.ConfigURL(w.simURL, scope.String())
	if err != nil {
		return err
	}
	w.sim.AddRunner(scope.String(), registration(newID, newName, "online"))
	r := testenv.ARCRunner{ARCPod: testenv.ARCPod{Name: newName, Org: scope.Name, Started: time.Now()}, ConfigURL: url, RunnerID: newID}
	if err := testenv.CreateARCRunner(ctx, w.cs, w.dyn, ns, r); err != nil {
		return fmt.Errorf("replace runner %d: %w", i, err)
	}
	w.mu.Lock()
	w.gens[i], w.ids[i] = gen, newID
	w.mu.Unlock()
	return nil
}

// zombie is a planted runner whose registration is offline and not busy
// while its pod runs: the reaper's zombie, which it must clean, and the
// only thing a serve row lets it act on.
type zombie struct {
	name, ns string
	scope    string
	id       int64
	// planted is when its registration, EphemeralRunner and pod all
	// existed.
	planted time.Time
}

// plantZombie plants a zombie in the first namespace and scope, beside
// the slots: an ARC runner like the rest, running for an hour, whose
// registration is listed offline and idle.
func (w *world) plantZombie(ctx context.Context) (zombie, error) {
	scope := w.scopes[0]
	z := zombie{name: fmt.Sprintf("zombie-%04d", w.planted.Add(1)), ns: w.namespaces[0], scope: scope.String(), id: w.nextID.Add(1)}
	url, err := ghsim.ConfigURL(w.simURL, z.scope)
	if err != nil {
		return z, err
	}
	w.sim.AddRunner(z.scope, registration(z.id, z.name, "offline"))
	r := testenv.ARCRunner{ARCPod: testenv.ARCPod{Name: z.name, Org: scope.Name, Started: w.started.Add(-time.Hour)}, ConfigURL: url, RunnerID: z.id}
	if err := testenv.CreateARCRunner(ctx, w.cs, w.dyn, z.ns, r); err != nil {
		return z, fmt.Errorf("plant zombie %s: %w", z.name, err)
	}
	z.planted = time.Now()
	return z, nil
}

// clearZombie removes what is left of a zombie, reaped or not: the
// reaper deletes its registration and its EphemeralRunner, and with no
// ARC controller here the EphemeralRunner stays deleting and the pod
// running (see DeleteARCRunner), as ARC's controller would not leave them.
func (w *world) clearZombie(ctx context.Context, z zombie) error {
	if err := testenv.DeleteARCRunner(ctx, w.cs, w.dyn, z.ns, z.name); err != nil {
		return fmt.Errorf("clear zombie %s: %w", z.name, err)
	}
	w.sim.RemoveRunner(z.scope, z.id)
	return nil
}

// churn replaces perMinute runners a minute, evenly paced, from the
// world's writers, until stop. Replacement k is due k/perMinute minutes
// after the start; a writer that finds it due already does it at once, so
// that when the API server cannot keep up the churn runs as fast as it
// can and counts what it did, rather than queueing without end.
type churn struct {
	w         *world
	perMinute float64
	start     time.Time
	// stopping ends the waits for the next replacement; one in flight
	// runs to its end on the row's context, so that no slot is left
	// half replaced.
	stopping chan struct{}
	wg       sync.WaitGroup

	mu   sync.Mutex
	next int64
	// done are when each replacement finished, in order of finishing.
	done []time.Time
	err  error
}

// startChurn starts replacing perMinute runners a minute.
func (w *world) startChurn(ctx context.Context, perMinute float64) *churn {
	c := &churn{w: w, perMinute: perMinute, start: time.Now(), stopping: make(chan struct{})}
	for range w.workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for c.step(ctx) {
			}
		}()
	}
	return c
}

// step waits for the next replacement to be due and does it; false once
// the churn is stopped or has failed.
func (c *churn) step(ctx context.Context) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	k := c.next
	c.next++
	c.mu.Unlock()
	due := c.start.Add(time.Duration(float64(k) * float64(time.Minute) / c.perMinute))
	select {
	case <-c.stopping:
		return false
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(due)):
	}
	i := c.w.takeSlot()
	err := c.w.replace(ctx, i)
	c.w.releaseSlot(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = err
		return false
	}
	c.done = append(c.done, time.Now())
	return true
}

// stop ends the churn, waits for the replacements in flight, and says
// whether one failed: a world part replaced is unusable.
func (c *churn) stop() error {
	close(c.stopping)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// between is how many replacements finished in [from, to).
func (c *churn) between(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.done {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}
