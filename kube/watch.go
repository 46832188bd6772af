package kube

// The long-running mode keeps the fleet in memory, in stores that
// client-go's Reflector fills: one watch-list, then the changes as they
// come, so that what a minute costs follows what changed in it, not the
// fleet's size.
//
// A bare Reflector, not an informer: a SharedIndexInformer puts a DeltaFIFO
// between its reflector and its store and says only HasSynced, which turns
// true once and stays true. It cannot tell that a watch broke, nor when the
// relist that follows has landed. Here the Reflector writes straight into a
// store of this package (feed), whose Replace is the moment a complete list
// landed, and reaches the API server through a ListerWatcher of this
// package, which sees each watch open, break and end.
//
// A store answers only while it can vouch that nothing is missing from it:
// a list proves what it listed; only absence needs more proof, and absence
// is what the sweep acts on (a registration without its pod is a ghost). So
// a store is Live, and ListPods answers from it, only when it has been
// filled by a complete list at least once, no relist is under way (the
// store still holds the last one's objects), its watch is open now (what
// changed while none was open is not known until the reflector has caught
// up), and the API server spoke on it within StaleAfter (an open stream
// that carries nothing, not even the bookmark the API server sends every
// minute, may be a dead one). Otherwise ListPods returns ErrIncomplete,
// which the sweep takes as it takes a list that failed: no verdicts.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// DefaultStaleAfter is WatchOptions.StaleAfter when it is zero: twice the
// minute after which the API server sends a watch a bookmark when nothing
// else came.
const DefaultStaleAfter = 2 * time.Minute

// ErrIncomplete is wrapped by the error of ListPods and
// ListEphemeralRunners when a store cannot vouch for the whole fleet right
// now: not synced yet, a watch broken or relisting, or nothing heard within
// StaleAfter. The error names the resource, the namespace and why.
var ErrIncomplete = errors.New("incomplete observation")

// WatchOptions say what a Watch keeps.
type WatchOptions struct {
	// Namespaces are the namespaces watched, one reflector each, as
	// REAPER_NAMESPACES names them; empty watches all namespaces with one.
	Namespaces []string
	// Selector is the pods' label selector (REAPER_POD_SELECTOR).
	Selector string
	// Mapping is how the pods' views are made, as ListPods takes it.
	Mapping Mapping
	// ARC also watches ARC's EphemeralRunners.
	ARC bool
	// StaleAfter is how long a store stays Live without an event or a
	// bookmark; 0 is DefaultStaleAfter.
	StaleAfter time.Duration
}

// WatchState is one reflector's state, for /readyz, logs and metrics.
type WatchState struct {
	// Resource is "pods" or "ephemeralrunners".
	Resource string
	// Namespace is the namespace watched; "" is all.
	Namespace string
	// Live: synced, its watch open, and an event or a bookmark within
	// StaleAfter; its store is what ListPods gives.
	Live bool
	// Why it is not Live: "not synced yet", "relisting", "watch broken:
	// ...", "no event or bookmark for 2m0s".
	Why string
	// Objects is how many objects its store holds.
	Objects int
	// Relists is how many complete lists (the first included) have
	// filled its store since it started.
	Relists int
	// LastEvent is when its last event or bookmark came, or its last
	// list landed, on the local clock.
	LastEvent time.Time
}

// Watch keeps the runner pods (and, under ARC, the EphemeralRunners) of a
// cluster in memory, one reflector for each namespace (or one for all),
// and lists them from there. Build it with Client.Watch and start it with
// Run; its methods are safe for concurrent use.
type Watch struct {
	pods    []*feed[fleet.Pod]
	ers     []*feed[fleet.EphemeralRunner]
	arc     bool
	started atomic.Bool
}

// Watch builds a Watch of what o names, through this Client: every request
// its reflectors send is counted and bounded as this Client's are. Nothing
// is sent before Run.
func (c *Client) Watch(o WatchOptions) *Watch { return c.watch(o, clock.RealClock{}) }

// Run runs every reflector until ctx ends, and returns once all have
// stopped. A Watch runs once: a second call returns at once.
func (w *Watch) Run(ctx context.Context) {
	if !w.started.CompareAndSwap(false, true) {
		return
	}
	done := make(chan struct{})
	n := 0
	for _, f := range w.pods {
		n++
		go func() { defer func() { done <- struct{}{} }(); f.run(ctx) }()
	}
	for _, f := range w.ers {
		n++
		go func() { defer func() { done <- struct{}{} }(); f.run(ctx) }()
	}
	for range n {
		<-done
	}
}

// ListPods is the views of the pods in the stores, in a slice of their own,
// namespace by namespace in the order WatchOptions named them, each by
// name. It is all or nothing: when any store is not Live, the error wraps
// ErrIncomplete and says which and why. The views' pointed-to parts (owner,
// job, start wait) are shared with the store, which never writes to them.
func (w *Watch) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	return snapshot(ctx, w.pods, func(a, b *fleet.Pod) int {
		return cmpKey(a.Namespace, a.Name, b.Namespace, b.Name)
	})
}

// ListEphemeralRunners is ListPods for ARC's EphemeralRunners; nil and no
// error when the Watch does not watch them (WatchOptions.ARC). As
// Client.ListEphemeralRunners, it refuses two runners under one UID.
func (w *Watch) ListEphemeralRunners(ctx context.Context) ([]fleet.EphemeralRunner, error) {
	if !w.arc {
		return nil, nil
	}
	ers, err := snapshot(ctx, w.ers, func(a, b *fleet.EphemeralRunner) int {
		return cmpKey(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	if err != nil {
		return nil, err
	}
	if i, j, dup := duplicateUID(ers); dup {
		return nil, fmt.Errorf("ephemeralrunners from the watch: two runners under UID %q (%s/%s and %s/%s): the store cannot be trusted",
			ers[i].UID, ers[i].Namespace, ers[i].Name, ers[j].Namespace, ers[j].Name)
	}
	return ers, nil
}

// Synced reports whether every store is Live now: whether ListPods (and
// ListEphemeralRunners) would answer.
func (w *Watch) Synced() bool {
	for _, s := range w.State() {
		if !s.Live {
			return false
		}
	}
	return true
}

// State is each reflector's state, the pods' first.
func (w *Watch) State() []WatchState {
	out := make([]WatchState, 0, len(w.pods)+len(w.ers))
	for _, f := range w.pods {
		out = append(out, f.state())
	}
	for _, f := range w.ers {
		out = append(out, f.state())
	}
	return out
}

// snapshot is every feed's views, all or nothing, each feed's sorted by
// compare. A view is never written once made (the store replaces it whole),
// so only the picking of the views needs a feed's lock.
func snapshot[V any](ctx context.Context, feeds []*feed[V], compare func(a, b *V) int) ([]V, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	picked := make([][]*V, len(feeds))
	n := 0
	for i, f := range feeds {
		vs, err := f.views()
		if err != nil {
			return nil, err
		}
		slices.SortFunc(vs, compare)
		picked[i] = vs
		n += len(vs)
	}
	out := make([]V, 0, n)
	for _, vs := range picked {
		for _, v := range vs {
			out = append(out, *v)
		}
	}
	return out, nil
}

// cmpKey orders objects by namespace, then name, as the API server lists
// them.
func cmpKey(nsA, nameA, nsB, nameB string) int {
	if c := strings.Compare(nsA, nsB); c != 0 {
		return c
	}
	return strings.Compare(nameA, nameB)
}
