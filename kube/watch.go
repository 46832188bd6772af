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
// a store is Live only when it has been filled by a complete list at least
// once, no relist is under way (the store still holds the last one's
// objects), its watch is open now (a watch resumed from a resourceVersion
// once something came on it: until then the store lacks what changed while
// none was open, and the stream may yet say that is lost), and the API
// server spoke on it within StaleAfter (an open stream that carries
// nothing, not even the bookmark the API server sends every minute, may be
// a dead one). Hearing is not keeping up: an API server whose watch cache
// is stuck goes on sending bookmarks at a resourceVersion that no longer
// moves. So ListPods also reads where the API server is, one list of at
// most one object a resource, and answers only from stores that have
// caught up with where it was at a listing StaleAfter or more before (and
// after their last list landed, which was itself a consistent read): a
// store may lag the API server by StaleAfter and one interval, never for
// ever. Otherwise ListPods returns ErrIncomplete, which the sweep takes as
// it takes a list that failed: no verdicts.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
// now: not synced yet, a watch broken, resumed but silent, or relisting,
// nothing heard within StaleAfter, not caught up with the API server, or
// where the API server is could not be read. The error names the
// resource, the namespace and why.
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
	// bookmark, and how long it has to catch up with a resourceVersion a
	// listing read; 0 is DefaultStaleAfter.
	StaleAfter time.Duration
}

// WatchState is one reflector's state, for /readyz, logs and metrics.
type WatchState struct {
	// Resource is "pods" or "ephemeralrunners".
	Resource string
	// Namespace is the namespace watched; "" is all.
	Namespace string
	// Live: synced, its watch open, an event or a bookmark within
	// StaleAfter, and not found behind the API server by the last
	// listing; its store is what ListPods gives, once it has read where
	// the API server is.
	Live bool
	// Why it is not Live: "not synced yet", "relisting", "watch broken:
	// ...", "watch resumed from resourceVersion ..., nothing on it yet",
	// "the watch reached its timeoutSeconds; watching again",
	// "no event or bookmark for 2m0s", "the watch has not caught up with
	// resourceVersion ...".
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
	pods      []*feed[fleet.Pod]
	ers       []*feed[fleet.EphemeralRunner]
	podsFresh *freshness
	ersFresh  *freshness
	arc       bool
	started   atomic.Bool
	// nudgeEvery is how often nudge reads a resource a store of which is
	// not Live or has heard nothing for as long; 0 never.
	nudgeEvery time.Duration
}

// nudgeEvery is Watch.nudgeEvery: a third of a bookmark's minute.
const nudgeEvery = 20 * time.Second

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
	// The nudges last as long as the reflectors.
	nctx, stop := context.WithCancel(ctx)
	nudged := make(chan struct{})
	go func() {
		defer close(nudged)
		if w.nudgeEvery > 0 {
			w.nudge(nctx)
		}
	}()
	for range n {
		<-done
	}
	stop()
	<-nudged
}

// nudge keeps bookmarks coming to the watches of a resource in which
// nothing changes. A bookmark carries the API server's watch cache's
// resourceVersion, and reaches a watch only once that has moved past the
// watch's own; in a resource in which nothing changes, the cache moves
// only when a consistent read makes it catch up with etcd. Each listing's
// reading (freshness) is such a read, but no sweep lists while a store is
// not Live: a watch resumed after a cut, which vouches only once something
// came on it, would wait until something in its resource changed, and a
// standby, which never lists, would find its stores stale every StaleAfter.
// So while a store of a resource is not Live, or has heard nothing for
// nudgeEvery, the resource is read every nudgeEvery; what the read says
// is dropped (a listing reads again). A resource whose watches carry
// events is never read so.
func (w *Watch) nudge(ctx context.Context) {
	next := w.podsFresh.clock.NewTimer(w.nudgeEvery)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C():
			next.Reset(w.nudgeEvery)
		}
		lagging := map[string]bool{}
		for _, s := range w.State() {
			if !s.Live || w.podsFresh.clock.Since(s.LastEvent) >= w.nudgeEvery {
				lagging[s.Resource] = true
			}
		}
		for _, fresh := range []*freshness{w.podsFresh, w.ersFresh} {
			if lagging[fresh.resource] {
				_, _ = fresh.read(ctx)
			}
		}
	}
}

// ListPods is the views of the pods in the stores, in a slice of their own,
// namespace by namespace in the order WatchOptions named them, each by
// name. It is all or nothing: when any store is not Live, the error wraps
// ErrIncomplete and says which and why. The views' pointed-to parts (owner,
// job, start wait) are shared with the store, which never writes to them.
func (w *Watch) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	return snapshot(ctx, w.pods, w.podsFresh, func(a, b *fleet.Pod) int {
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
	ers, err := snapshot(ctx, w.ers, w.ersFresh, func(a, b *fleet.EphemeralRunner) int {
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
// ListEphemeralRunners) would answer, short of what its reading of the
// API server finds.
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
// compare, once fresh has read where the API server is. A view is never
// written once made (the store replaces it whole), so only the picking of
// the views needs a feed's lock.
func snapshot[V any](ctx context.Context, feeds []*feed[V], fresh *freshness, compare func(a, b *V) int) ([]V, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No request while a store could not answer anyway.
	for _, f := range feeds {
		if err := f.ready(); err != nil {
			return nil, err
		}
	}
	now, reads, err := fresh.take(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	picked := make([][]*V, len(feeds))
	n := 0
	for i, f := range feeds {
		vs, err := f.views(now, reads)
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

// reading is the API server's resourceVersion for a resource, and when a
// listing read it, on the Watch's clock.
type reading struct {
	at time.Time
	rv string
}

// freshness is one resource's readings of the API server's
// resourceVersion, one each listing, against which its stores are held
// (see feed.views): a store that hears from the API server but no longer
// moves (a watch cache that is stuck sends bookmarks at a resourceVersion
// that stays put) is refused within StaleAfter and one interval, not
// trusted for ever. Each costs one list of at most one object a resource
// a listing, counted as every request.
type freshness struct {
	resource  string
	namespace string
	read      func(context.Context) (string, error)
	stale     time.Duration
	clock     clock.Clock

	mu    sync.Mutex
	reads []reading
}

// take reads the API server's resourceVersion now, and gives when, and
// the readings kept so far, this one included. A reading that failed is
// ErrIncomplete: there is nothing to hold the stores to at a later
// listing.
func (p *freshness) take(ctx context.Context) (time.Time, []reading, error) {
	rv, err := p.read(ctx)
	if err == nil && rv == "" {
		err = errors.New("the API server gave no resourceVersion")
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("%s in %s: %w: reading the API server's resourceVersion: %w", p.resource, where(p.namespace), ErrIncomplete, err)
	}
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads = append(p.reads, reading{at: now, rv: rv})
	// Only the newest reading StaleAfter old, and those after it, can be
	// held against a store from now on.
	keep := 0
	for i, r := range p.reads {
		if !r.at.After(now.Add(-p.stale)) {
			keep = i
		}
	}
	p.reads = slices.Delete(p.reads, 0, keep)
	return now, slices.Clone(p.reads), nil
}
