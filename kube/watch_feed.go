package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// objKey is an object's place in a store. Its strings are the view's own,
// so a key costs no bytes of its own.
type objKey struct{ namespace, name string }

// kind is what a feed needs to know of the objects it keeps.
type kind[V any] struct {
	// transform reduces an object as the API server sent it to its item:
	// the view, in a type the reflector's own stores can key (see
	// podItem). An item given back is returned as it is, since the
	// reflector's watch-list hands the store the items its temporary
	// store already transformed.
	transform cache.TransformFunc
	// view is the view an item holds.
	view func(item any) (*V, bool)
	// key is where a view goes in the store.
	key func(*V) objKey
}

// feed is one reflector's: the store it fills (a cache.ReflectorStore that
// keeps only the views) and what is known of its watch, from which its
// completeness is judged (see the top of watch.go).
type feed[V any] struct {
	resource  string
	namespace string
	kind      kind[V]
	// expected is the type (and for Unstructured the kind) of object the
	// reflector accepts.
	expected   runtime.Object
	lw         *cache.ListWatch
	pageSize   int64
	staleAfter time.Duration
	clock      clock.Clock
	log        *slog.Logger
	// refused, when set, is why the feed never runs: its namespace cannot
	// be watched as asked.
	refused string

	mu    sync.Mutex
	items map[objKey]*V
	// synced: a complete list has landed (Replace) at least once.
	synced bool
	// relisting: a list, or a watch-list, was asked for and has not
	// landed yet; the store holds the last one's objects.
	relisting bool
	// gen counts the lists and watches asked for; open says that the
	// last one asked for is a watch that is open now. A watch that ends
	// says so under its own gen, so that a late word from one the
	// reflector has left behind changes nothing.
	gen   uint64
	ended uint64
	open  bool
	// broke is why the last list or watch failed or ended; "" once a
	// watch opened, or a list answered, since.
	broke string
	// lastEvent is when the last event or bookmark came, or the last
	// list landed.
	lastEvent time.Time
	relists   int
	// resumed is the gen of a watch resumed from a resourceVersion whose
	// answer came but nothing on it yet; watchList the gen of a
	// watch-list that has not landed yet.
	resumed   uint64
	watchList uint64
	// expiredGen is the gen of the last watch that ended at its
	// timeoutSeconds, as the API server ends every watch, having been
	// heard from (heardOn). pending is the gen of a watch opened on its
	// answer after one such (see accepted) that has not yet had
	// firstWord without an error.
	expiredGen uint64
	heardOn    uint64
	pending    uint64
	// newest is the newest resourceVersion the store is known to have
	// caught up with: its last list's, then each event's and bookmark's
	// as the reflector passes them on (UpdateResourceVersion). replaced
	// is when its last list landed; behind is the API server's reading
	// the last listing found it had not reached (see views).
	newest   string
	replaced time.Time
	behind   reading
}

// watch builds the Watch, with clk as the clock of its staleness.
func (c *Client) watch(o WatchOptions, clk clock.Clock) *Watch {
	stale := o.StaleAfter
	if stale <= 0 {
		stale = DefaultStaleAfter
	}
	w := &Watch{arc: o.ARC, nudgeEvery: nudgeEvery}
	namespaces, refused := watchedNamespaces(o.Namespaces)
	// One read per resource proves every store of it: a resourceVersion
	// is the whole store's revision, whichever namespace it is read in.
	w.podsFresh = &freshness{resource: "pods", namespace: namespaces[0], read: c.podVersion(namespaces[0], o.Selector), stale: stale, clock: clk}
	w.ersFresh = &freshness{resource: "ephemeralrunners", namespace: namespaces[0], read: c.erVersion(namespaces[0]), stale: stale, clock: clk}
	for _, ns := range namespaces {
		pods := newFeed(c, "pods", ns, podKind(o.Mapping), &corev1.Pod{}, refused, stale, clk)
		pods.lw = trackedListWatch(pods, c.timeout, c.podLister(ns, o.Selector), c.podWatcher(ns, o.Selector))
		w.pods = append(w.pods, pods)
		if !o.ARC {
			continue
		}
		// No expected type: the watch's decoder gives the runners as
		// their items and the bookmarks as metadata, having refused
		// anything that is not an EphemeralRunner itself.
		memo := newERMemo(c.githubHost)
		ers := newFeed(c, "ephemeralrunners", ns, erKind(memo), nil, refused, stale, clk)
		ers.lw = trackedListWatch(ers, c.timeout, c.erLister(ns), c.erWatcher(ns, memo))
		w.ers = append(w.ers, ers)
	}
	return w
}

// podVersion reads the resourceVersion the API server has now for the
// pods: a list of one pod at no resourceVersion, which is a consistent
// read, and whose resourceVersion is the store-wide revision, not one of
// the pods'.
func (c *Client) podVersion(ns, selector string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		list, err := c.cs.listPods(ctx, ns, metav1.ListOptions{LabelSelector: selector, Limit: 1})
		if err != nil {
			return "", err
		}
		return list.ResourceVersion, nil
	}
}

// erVersion is podVersion for the EphemeralRunners.
func (c *Client) erVersion(ns string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		list, err := c.dyn.Resource(ephemeralRunners).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return "", err
		}
		return list.GetResourceVersion(), nil
	}
}

func newFeed[V any](c *Client, resource, ns string, k kind[V], expected runtime.Object, refused string, stale time.Duration, clk clock.Clock) *feed[V] {
	return &feed[V]{
		resource:   resource,
		namespace:  ns,
		kind:       k,
		expected:   expected,
		pageSize:   c.pageSize,
		staleAfter: stale,
		clock:      clk,
		log:        c.log.With(slog.String("resource", resource), slog.String("namespace", ns)),
		refused:    refused,
		items:      map[objKey]*V{},
	}
}

// watchedNamespaces is the namespaces to watch, one reflector each: all
// ("") when none is named, else each named one once. An empty name among
// named ones means all namespaces to the API and would keep every object
// twice: it is refused, and the refusal is what every store then says.
func watchedNamespaces(named []string) (namespaces []string, refused string) {
	if len(named) == 0 {
		return []string{""}, ""
	}
	for _, ns := range named {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
		if ns == "" {
			refused = fmt.Sprintf("empty namespace name in %q (leave the list empty for all namespaces)", named)
		}
	}
	return namespaces, refused
}

// where names a namespace in messages.
func where(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return fmt.Sprintf("namespace %q", ns)
}

// run runs the feed's reflector until ctx ends. Its logs (client-go's
// klog, contextual) go to the Client's logger, not to stderr.
func (f *feed[V]) run(ctx context.Context) {
	if f.refused != "" {
		return
	}
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		f.log.Warn("the store is filled by lists in pages, not by a watch-list: client-go's WatchListClient feature is off (KUBE_FEATURE_WatchListClient)")
	}
	logger := logr.FromSlogHandler(f.log.Handler())
	r := cache.NewReflectorWithOptions(f.lw, f.expected, f, cache.ReflectorOptions{
		Name:            f.resource + " in " + where(f.namespace),
		TypeDescription: f.resource,
		Logger:          &logger,
	})
	// Where the API server gives no watch-list, the reflector lists: in
	// pages of the Client's size, as the CronJob reads, each one bounded
	// by the Client's timeout, rather than in one answer of the whole
	// fleet that no timeout a request may have would let finish.
	r.WatchListPageSize = f.pageSize
	r.RunWithContext(logr.NewContext(ctx, logger))
}

// The store: cache.ReflectorStore, and cache.TransformingStore so that the
// reflector's temporary store of a watch-list keeps the items too.

func (f *feed[V]) Add(obj any) error    { return f.put(obj) }
func (f *feed[V]) Update(obj any) error { return f.put(obj) }

func (f *feed[V]) put(obj any) error {
	v, err := f.viewOf(obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[f.kind.key(v)] = v
	return nil
}

func (f *feed[V]) Delete(obj any) error {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return fmt.Errorf("%s in %s: delete: %w", f.resource, where(f.namespace), err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.items, objKey{name.Namespace, name.Name})
	return nil
}

// Replace is a complete list landing: the store is what it listed, and
// the feed is synced until its watch says otherwise.
func (f *feed[V]) Replace(list []any, resourceVersion string) error {
	items := make(map[objKey]*V, len(list))
	for _, obj := range list {
		v, err := f.viewOf(obj)
		if err != nil {
			return err
		}
		items[f.kind.key(v)] = v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = items
	f.synced, f.relisting = true, false
	f.relists++
	f.lastEvent = f.clock.Now()
	// A list is a consistent read: what the API server had before it
	// landed is proven, so no earlier reading is held against it.
	f.newest, f.replaced, f.behind = resourceVersion, f.lastEvent, reading{}
	f.watchList = 0
	return nil
}

// UpdateResourceVersion is the reflector telling the store the
// resourceVersion of each event and bookmark it has passed on. An
// object's own resourceVersion, as Add or Update get it, is not taken
// instead: a watch from no resourceVersion begins with its objects in no
// order of theirs, and the reflector passes a resourceVersion on only
// once the stream is past them.
func (f *feed[V]) UpdateResourceVersion(resourceVersion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.newest = resourceVersion
}

// Resync has nothing to do: nothing is queued between the reflector and
// this store.
func (f *feed[V]) Resync() error { return nil }

func (f *feed[V]) Transformer() cache.TransformFunc { return f.kind.transform }

// viewOf is the view of an object as the API server sent it, or of its
// item.
func (f *feed[V]) viewOf(obj any) (*V, error) {
	it, err := f.kind.transform(obj)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", f.resource, where(f.namespace), err)
	}
	v, ok := f.kind.view(it)
	if !ok {
		return nil, fmt.Errorf("%s in %s: a %T is no item of this store", f.resource, where(f.namespace), it)
	}
	return v, nil
}

// What the ListerWatcher tells the feed (see trackedListWatch).

// listing: the reflector asks for a list, so its store is to be replaced.
// While a watch-list has yet to land, the list is not the reflector's
// own: client-go's consistency check (KUBE_WATCHLIST_INCONSISTENCY_DETECTOR)
// lists between the watch-list's end and its landing, and the watch-list's
// watch goes on after it. That list changes nothing and gets gen 0, on
// which answered and failed do nothing.
func (f *feed[V]) listing() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watchList == f.gen && f.watchList != 0 && f.ended != f.gen {
		return 0
	}
	f.gen++
	f.open, f.relisting = false, true
	return f.gen
}

// watching: the reflector asks for a watch; with initial events, a
// watch-list that is to replace the store.
func (f *feed[V]) watching(initial bool) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.open, f.watchList = false, 0
	if initial {
		f.relisting, f.watchList = true, f.gen
	}
	return f.gen
}

// current is the gen of the list or watch asked for last.
func (f *feed[V]) current() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// stale is how long a watch may carry nothing, on which clock.
func (f *feed[V]) stale() (time.Duration, clock.Clock) { return f.staleAfter, f.clock }

// opened: the watch gen is open.
func (f *feed[V]) opened(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen == f.gen && f.ended != gen {
		f.open, f.broke = true, ""
	}
}

// firstWord is how long a watch opened on its answer (see accepted) is
// not yet vouched for: an API server that cannot resume from the store's
// resourceVersion (compacted away, or a server that restarted since) says
// so in the stream's first frame, sent with the answer. It is counted by
// the watch's own reader (trackedWatch), so a reader held back by a busy
// process vouches for nothing it has not read.
const firstWord = 500 * time.Millisecond

// accepted: the watch gen, resumed from a resourceVersion, was accepted.
// After a watch that broke, its answer proves nothing of the store, which
// still lacks whatever changed while no watch was open, and the stream's
// first word may be that those changes are compacted away: it is open once
// something came on it (heard). A watch with nothing to replay says nothing
// until its bookmark, up to a minute.
//
// After a watch that the API server ended at its timeoutSeconds (every
// watch, every five to ten minutes), the reflector watches again at once,
// from a resourceVersion the last watch carried to its end: the store
// lacks only what changed in the moment between, which the new watch
// replays first, as events in flight are on a watch that stays open. Its
// answer opens it, once firstWord has passed without an error. Were it to
// wait for the bookmark too, every store in a quiet namespace would be
// refused for a minute of each watch, and with a few namespaces a sweep
// would seldom find them all Live. A store that nonetheless falls behind
// is refused by its resourceVersions (see views).
func (f *feed[V]) accepted(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen || f.ended == gen {
		return
	}
	f.broke = ""
	if f.expiredGen != 0 && f.expiredGen == gen-1 {
		f.open, f.pending = true, gen
		return
	}
	f.resumed = gen
}

// expired: the watch gen ended at its timeoutSeconds, as the API server
// ends every watch, not cut before (trackedWatch.expiredOnTime). Only a
// watch that was open, and not a watch-list still to land, vouches for
// its successor: one that was waiting for its first word leaves the next
// to wait too.
func (f *feed[V]) expired(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen || f.ended == gen {
		return
	}
	if f.open && f.heardOn == gen && (f.watchList != gen || !f.relisting) {
		f.expiredGen = gen
	}
	f.open, f.broke, f.ended = false, "", gen
}

// vouch: the watch gen, opened on its answer, had firstWord without an
// error or an end.
func (f *feed[V]) vouch(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == gen && f.ended != gen {
		f.pending = 0
	}
}

// answered: a page of the list gen came: why the last one failed is past.
func (f *feed[V]) answered(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen == f.gen && f.ended != gen {
		f.broke = ""
	}
}

// failed: the list or watch gen failed or ended, for why. The first word
// on a gen is kept.
func (f *feed[V]) failed(gen uint64, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen == f.gen && f.ended != gen {
		f.open, f.broke, f.ended = false, why, gen
	}
}

// heard: an event or a bookmark came on the watch gen, which is open.
func (f *feed[V]) heard(gen uint64) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastEvent = now
	f.heardOn = gen
	if f.pending == gen {
		f.pending = 0
	}
	if gen == f.gen && f.ended != gen {
		f.open, f.broke = true, ""
	}
}

// liveLocked says whether the store can vouch for the whole of what it
// watches now, and if not why.
func (f *feed[V]) liveLocked() (bool, string) {
	because := func(what string) string {
		if f.broke == "" {
			return what
		}
		return what + ": " + f.broke
	}
	switch {
	case f.refused != "":
		return false, f.refused
	case !f.synced:
		return false, because("not synced yet")
	case f.relisting:
		return false, because("relisting")
	case !f.open && f.resumed == f.gen && f.broke == "":
		return false, fmt.Sprintf("watch resumed from resourceVersion %s, nothing on it yet", f.newest)
	case !f.open && f.expiredGen == f.gen && f.ended == f.gen:
		return false, "the watch reached its timeoutSeconds; watching again"
	case !f.open && f.broke == "":
		return false, "watch not open yet"
	case f.pending == f.gen:
		return false, fmt.Sprintf("watch resumed from resourceVersion %s: waiting %s for an error it may open with", f.newest, firstWord)
	case !f.open:
		return false, "watch broken: " + f.broke
	}
	if quiet := f.clock.Since(f.lastEvent); quiet > f.staleAfter {
		return false, fmt.Sprintf("no event or bookmark for %s", quiet.Round(time.Second))
	}
	if f.behind.rv != "" {
		if caught, why := f.caughtUpLocked(f.behind); !caught {
			return false, why
		}
		f.behind = reading{}
	}
	return true, ""
}

// caughtUpLocked says whether the store has caught up with what the API
// server had at r, and if not why.
func (f *feed[V]) caughtUpLocked(r reading) (bool, string) {
	c, err := resourceversion.CompareResourceVersion(f.newest, r.rv)
	if err != nil {
		return false, fmt.Sprintf("cannot tell whether the watch has caught up with the API server: %v", err)
	}
	if c < 0 {
		return false, fmt.Sprintf("the watch has not caught up with resourceVersion %s, which the API server had at a listing %s ago (the store is at %s)",
			r.rv, f.clock.Since(r.at).Round(time.Second), f.newest)
	}
	return true, ""
}

// state is the feed's WatchState.
func (f *feed[V]) state() WatchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	live, why := f.liveLocked()
	return WatchState{
		Resource:  f.resource,
		Namespace: f.namespace,
		Live:      live,
		Why:       why,
		Objects:   len(f.items),
		Relists:   f.relists,
		LastEvent: f.lastEvent,
	}
}

// ready is nil when the store is Live, else an error that wraps
// ErrIncomplete.
func (f *feed[V]) ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readyLocked()
}

func (f *feed[V]) readyLocked() error {
	if live, why := f.liveLocked(); !live {
		return fmt.Errorf("%s in %s: %w: %s", f.resource, where(f.namespace), ErrIncomplete, why)
	}
	return nil
}

// views is every view in the store, when it is Live and has caught up
// with what the API server had StaleAfter ago; else an error that wraps
// ErrIncomplete. reads are the API server's resourceVersions as listings
// read them, the last at now: the store is held to the newest one read at
// least StaleAfter before now and after its last list landed. Being Live
// says only that the API server spoke within StaleAfter: one whose watch
// cache is stuck goes on sending bookmarks, at a resourceVersion that no
// longer moves. StaleAfter, not the last listing's reading, because a
// store learns where it is only from its events and the bookmarks that
// come about every minute: held to a reading one interval old, a store
// with nothing to change in a busy cluster would be refused whenever no
// bookmark fell in that interval. The first listings after a list landed
// have no reading to be held to, and need none: that list was a
// consistent read.
func (f *feed[V]) views(now time.Time, reads []reading) ([]*V, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.readyLocked(); err != nil {
		return nil, err
	}
	var due *reading
	for i, r := range reads {
		if r.at.After(f.replaced) && !r.at.After(now.Add(-f.staleAfter)) {
			due = &reads[i]
		}
	}
	if due != nil {
		if caught, why := f.caughtUpLocked(*due); !caught {
			f.behind = *due
			return nil, fmt.Errorf("%s in %s: %w: %s", f.resource, where(f.namespace), ErrIncomplete, why)
		}
	}
	out := make([]*V, 0, len(f.items))
	for _, v := range f.items {
		out = append(out, v)
	}
	return out, nil
}
