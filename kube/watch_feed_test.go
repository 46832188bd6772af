package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// fakeSource is a narrow stand-in for the API server behind a feed's
// ListerWatcher: each watch it opens is a FakeWatcher the test drives,
// each list answers what the test set.
type fakeSource struct {
	watches  chan *watch.FakeWatcher
	listErr  error
	listed   *corev1.PodList
	watchErr error
	// tails, if set, gets each watch's streamTail, sent as the Client's
	// transport marks it.
	tails chan *streamTail
}

func (s *fakeSource) list(context.Context, metav1.ListOptions) (runtime.Object, error) {
	if s.listErr != nil {
		return nil, s.listErr
	}
	return s.listed, nil
}

func (s *fakeSource) watch(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	tail, _ := ctx.Value(streamTailKey{}).(*streamTail)
	tail.sending()
	if s.watchErr != nil {
		return nil, s.watchErr
	}
	w := watch.NewFake()
	s.watches <- w
	if s.tails != nil {
		s.tails <- tail
	}
	return w, nil
}

func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + name), ResourceVersion: "1"}}
}

// newTestFeed is a pod feed over src, on clk, stale after a minute.
func newTestFeed(t *testing.T, ns string, src *fakeSource, clk *clocktesting.FakeClock) *feed[fleet.Pod] {
	t.Helper()
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{})
	require.NoError(t, err)
	f := newFeed(c, "pods", ns, podKind(Mapping{}), &corev1.Pod{}, "", time.Minute, clk)
	f.lw = trackedListWatch(f, c.timeout, src.list, src.watch)
	return f
}

// TestFeedCompleteness walks one feed through what its reflector and the
// API server do, and checks after each step whether it vouches for its
// store, and why not: only a complete list that landed, with a watch open
// since and heard from within StaleAfter, is Live.
func TestFeedCompleteness(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1)}
	f := newTestFeed(t, "ci", src, clk)
	send := true
	var fw *watch.FakeWatcher
	var tw watch.Interface
	openWatch := func(initial bool) {
		opts := metav1.ListOptions{}
		if initial {
			opts.SendInitialEvents = &send
		}
		var err error
		tw, err = f.lw.WatchWithContext(ctx, opts)
		require.NoError(t, err)
		fw = <-src.watches
	}
	// deliver sends an event through the tracked watch, as the reflector
	// would read it.
	deliver := func(ev func(), want watch.EventType) {
		go ev()
		got, ok := <-tw.ResultChan()
		require.True(t, ok)
		assert.Equal(t, want, got.Type)
	}
	closed := func() {
		_, ok := <-tw.ResultChan()
		require.False(t, ok, "the tracked watch closes when its stream does")
	}

	for _, step := range []struct {
		name string
		do   func()
		live bool
		why  string // what Why says
	}{
		{"nothing yet", func() {}, false, "not synced yet"},
		{"a watch-list opens", func() { openWatch(true) }, false, "not synced yet"},
		{"its initial events come", func() { deliver(func() { fw.Add(testPod("ci", "a")) }, watch.Added) }, false, "not synced yet"},
		{"its end bookmark lands the list", func() {
			require.NoError(t, f.Replace([]any{&podItem{Mapping{}.View(testPod("ci", "a"))}}, "10"))
		}, true, ""},
		{"a change comes", func() {
			deliver(func() { fw.Add(testPod("ci", "b")) }, watch.Added)
			require.NoError(t, f.Add(testPod("ci", "b")))
		}, true, ""},
		{"the stream ends", func() { fw.Stop(); closed() }, false, "watch broken: the stream ended"},
		{"a watch from the resourceVersion opens", func() { openWatch(false) }, false, "watch resumed from resourceVersion 10, nothing on it yet"},
		{"a bookmark comes on it", func() {
			deliver(func() { fw.Action(watch.Bookmark, testPod("ci", "")) }, watch.Bookmark)
		}, true, ""},
		{"an ERROR event", func() {
			deliver(func() { fw.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus) }, watch.Error)
		}, false, "watch broken: an ERROR event: too old resource version"},
		{"the reflector stops it and lists again", func() {
			tw.Stop()
			src.listed = &corev1.PodList{Items: []corev1.Pod{*testPod("ci", "a")}}
			_, err := f.lw.ListWithContext(ctx, metav1.ListOptions{})
			require.NoError(t, err)
		}, false, "relisting"},
		{"the list lands", func() {
			require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "20"))
		}, false, "watch not open yet"},
		{"the watch after it is refused", func() {
			src.watchErr = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no watch"))
			_, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{})
			require.Error(t, err)
			src.watchErr = nil
		}, false, "watch broken: watch: pods is forbidden"},
		{"a list that fails", func() {
			src.listErr = errors.New("connection refused")
			_, err := f.lw.ListWithContext(ctx, metav1.ListOptions{})
			require.Error(t, err)
			src.listErr = nil
		}, false, "relisting: list: connection refused"},
		{"a watch-list after it opens", func() { openWatch(true) }, false, "relisting"},
		{"and lands", func() { require.NoError(t, f.Replace([]any{testPod("ci", "a"), testPod("ci", "c")}, "30")) }, true, ""},
		// The watchdog may end the watch before the state is read: either
		// way the store is not Live, for its silence.
		{"StaleAfter passes in silence", func() { clk.Step(time.Minute + time.Second) }, false, "no event or bookmark for 1m"},
		{"the silent watch is ended, to be watched again", func() { closed() }, false, "watch broken: no event or bookmark for 1m0s: watching again"},
		{"a new watch opens, but nothing came yet", func() { openWatch(false) }, false, "watch resumed from resourceVersion 30, nothing on it yet"},
		{"a bookmark comes", func() {
			deliver(func() { fw.Action(watch.Bookmark, testPod("ci", "")) }, watch.Bookmark)
		}, true, ""},
		{"the reflector stops", func() { tw.Stop(); closed() }, false, "watch broken: the watch was stopped"},
	} {
		step.do()
		s := f.state()
		assert.Equal(t, step.live, s.Live, "%s: live (why %q)", step.name, s.Why)
		if step.why == "" {
			assert.Empty(t, s.Why, step.name)
		} else {
			assert.Contains(t, s.Why, step.why, step.name)
		}
		views, err := f.views(clk.Now(), nil)
		if step.live {
			assert.NoError(t, err, step.name)
			assert.Len(t, views, s.Objects, step.name)
		} else {
			assert.ErrorIs(t, err, ErrIncomplete, step.name)
			assert.Nil(t, views, step.name)
			if err != nil {
				assert.Contains(t, err.Error(), `pods in namespace "ci"`, step.name)
			}
		}
	}
	s := f.state()
	assert.Equal(t, 3, s.Relists)
	assert.Equal(t, 2, s.Objects)
}

// TestWatchListsAllOrNothing: the views of every store, namespace by
// namespace as named, each by name; any store not Live fails the whole
// list, naming it; a runner's UID twice fails the EphemeralRunners'.
func TestWatchListsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{})
	require.NoError(t, err)
	w := c.watch(WatchOptions{Namespaces: []string{"b", "a", "b"}, ARC: true}, clk)
	require.Len(t, w.pods, 2, "each namespace once")
	require.Len(t, w.ers, 2)
	assert.Equal(t, []string{"b", "a"}, []string{w.pods[0].namespace, w.pods[1].namespace})

	// Both stores synced, their watches open, in the order the reflector
	// makes them so.
	live := func(f interface {
		watching(bool) uint64
		opened(uint64)
	}) {
		f.opened(f.watching(true))
	}
	// Where the API server is: a reading that no store is held to
	// before a minute has passed.
	w.podsFresh.read = func(context.Context) (string, error) { return "1", nil }
	w.ersFresh.read = w.podsFresh.read
	live(w.pods[0])
	require.NoError(t, w.pods[0].Replace([]any{testPod("b", "z"), testPod("b", "y")}, "1"))
	_, err = w.ListPods(ctx)
	require.ErrorIs(t, err, ErrIncomplete)
	assert.Contains(t, err.Error(), `pods in namespace "a": incomplete observation: not synced yet`)
	assert.False(t, w.Synced())

	live(w.pods[1])
	require.NoError(t, w.pods[1].Replace([]any{testPod("a", "x")}, "1"))
	pods, err := w.ListPods(ctx)
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	assert.Equal(t, []string{"b/y", "b/z", "a/x"}, names)
	assert.False(t, w.Synced(), "the EphemeralRunners are not synced yet")

	er := func(ns, name, uid string) *erItem {
		return &erItem{fleet.EphemeralRunner{Namespace: ns, Name: name, UID: uid, ResourceVersion: "1"}}
	}
	live(w.ers[0])
	live(w.ers[1])
	require.NoError(t, w.ers[0].Replace([]any{er("b", "r1", "u1")}, "1"))
	require.NoError(t, w.ers[1].Replace([]any{er("a", "r2", "u2")}, "1"))
	assert.True(t, w.Synced())
	ers, err := w.ListEphemeralRunners(ctx)
	require.NoError(t, err)
	assert.Len(t, ers, 2)
	require.NoError(t, w.ers[1].Add(er("a", "r3", "u1")))
	_, err = w.ListEphemeralRunners(ctx)
	require.ErrorContains(t, err, `two runners under UID "u1"`)

	// A view given out is the caller's: changing it changes no store.
	pods[0].Name = "changed"
	again, err := w.ListPods(ctx)
	require.NoError(t, err)
	assert.Equal(t, "y", again[0].Name)

	require.NoError(t, w.pods[0].Delete(testPod("b", "y")))
	again, err = w.ListPods(ctx)
	require.NoError(t, err)
	assert.Len(t, again, 2)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = w.ListPods(cancelled)
	assert.ErrorIs(t, err, context.Canceled)

	t.Run("an empty namespace among named ones is refused by every store", func(t *testing.T) {
		w := c.watch(WatchOptions{Namespaces: []string{"a", ""}}, clk)
		w.Run(ctx) // nothing to run: returns at once
		_, err := w.ListPods(ctx)
		require.ErrorIs(t, err, ErrIncomplete)
		assert.Contains(t, err.Error(), "empty namespace name")
		for _, s := range w.State() {
			assert.False(t, s.Live)
			assert.Contains(t, s.Why, "leave the list empty for all namespaces")
		}
	})
	t.Run("without ARC, no EphemeralRunners and no error", func(t *testing.T) {
		w := c.watch(WatchOptions{}, clk)
		ers, err := w.ListEphemeralRunners(ctx)
		assert.NoError(t, err)
		assert.Nil(t, ers)
		require.Len(t, w.State(), 1)
		assert.Equal(t, WatchState{Resource: "pods", Why: "not synced yet"}, w.State()[0])
	})
}

// TestFeedFreshness: a Live store is held to the resourceVersion the API
// server had at a listing StaleAfter (here a minute) or more before, and
// after its last list landed. One that hears only bookmarks at a
// resourceVersion that no longer moves is refused, with why, by ListPods
// and by its state; one that caught up is not; a reading that fails is
// ErrIncomplete; a list that landed is held to no earlier reading. A
// listing reads once, and not at all while a store is not Live.
func TestFeedFreshness(t *testing.T) {
	ctx := context.Background()
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{})
	require.NoError(t, err)
	type listing struct {
		after    time.Duration // on the clock since the step before
		bookmark string        // a bookmark at this resourceVersion comes first
		relist   string        // a list at this resourceVersion lands first
		api      string        // the API server's resourceVersion now
		apiErr   error
		want     string // what the error says; "" lists
	}
	for _, tc := range []struct {
		name     string
		listings []listing
		reads    int
	}{
		{"the first listing after the sync lists, however far the API server is", []listing{
			{after: time.Second, api: "500"},
		}, 1},
		{"a store frozen while the API server moves is refused", []listing{
			{after: 10 * time.Second, api: "120"},
			{after: 61 * time.Second, bookmark: "100", api: "150",
				want: `pods in namespace "ci": incomplete observation: the watch has not caught up with resourceVersion 120, which the API server had at a listing 1m1s ago (the store is at 100)`},
			// Refused from its state now, with no reading.
			{after: 30 * time.Second, bookmark: "100", api: "160", want: "has not caught up with resourceVersion 120"},
		}, 2},
		{"a store that caught up lists", []listing{
			{after: 10 * time.Second, api: "120"},
			{after: 61 * time.Second, bookmark: "130", api: "150"},
			{after: 61 * time.Second, bookmark: "150", api: "180"},
		}, 3},
		{"a store that falls behind, then catches up", []listing{
			{after: 10 * time.Second, api: "120"},
			{after: 61 * time.Second, bookmark: "110", api: "150", want: "has not caught up with resourceVersion 120"},
			{after: time.Second, bookmark: "150", api: "155"},
		}, 3},
		{"a reading that fails is incomplete", []listing{
			{after: time.Second, apiErr: errors.New("connection refused"),
				want: `pods in namespace "ci": incomplete observation: reading the API server's resourceVersion: connection refused`},
		}, 1},
		{"a reading that is no number cannot prove anything", []listing{
			{after: 10 * time.Second, api: "abc"},
			{after: 61 * time.Second, bookmark: "130", api: "150", want: "cannot tell whether the watch has caught up with the API server: resource version is not well formed: abc"},
		}, 2},
		{"an empty reading is incomplete", []listing{
			{after: time.Second, api: "", want: "the API server gave no resourceVersion"},
		}, 1},
		{"a list that landed is held to no earlier reading", []listing{
			{after: 10 * time.Second, api: "120"},
			{after: 61 * time.Second, bookmark: "100", api: "150", want: "has not caught up with resourceVersion 120"},
			{after: 61 * time.Second, relist: "90", api: "160"},
		}, 3},
		{"no reading while the store is not Live", []listing{
			{after: 10 * time.Second, api: "120"},
			{after: 2 * time.Minute, api: "150", want: "no event or bookmark for 2m"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
			w := c.watch(WatchOptions{Namespaces: []string{"ci"}, StaleAfter: time.Minute}, clk)
			f := w.pods[0]
			reads := 0
			var api string
			var apiErr error
			w.podsFresh.read = func(context.Context) (string, error) {
				reads++
				return api, apiErr
			}
			f.opened(f.watching(true))
			require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "100"))
			for i, l := range tc.listings {
				clk.Step(l.after)
				if l.bookmark != "" {
					f.UpdateResourceVersion(l.bookmark)
					f.heard(f.current())
				}
				if l.relist != "" {
					require.NoError(t, f.Replace([]any{testPod("ci", "a")}, l.relist))
				}
				api, apiErr = l.api, l.apiErr
				pods, err := w.ListPods(ctx)
				if l.want == "" {
					require.NoError(t, err, "listing %d", i)
					assert.Len(t, pods, 1, "listing %d", i)
					assert.True(t, w.Synced(), "listing %d", i)
					continue
				}
				require.ErrorIs(t, err, ErrIncomplete, "listing %d", i)
				assert.Contains(t, err.Error(), l.want, "listing %d", i)
				assert.Nil(t, pods, "listing %d", i)
				why := l.want
				if _, after, ok := strings.Cut(why, "incomplete observation: "); ok {
					why = after
				}
				if strings.Contains(why, "caught up") {
					s := w.State()[0]
					assert.False(t, s.Live, "listing %d: the state says so too", i)
					assert.Contains(t, s.Why, why, "listing %d", i)
				}
			}
			assert.Equal(t, tc.reads, reads, "one reading a listing, none while not Live")
		})
	}
}
