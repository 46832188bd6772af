package kube

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestResumedWatchIsOpenOnceSomethingCameOnIt: after a watch broke, the
// reflector watches again from the resourceVersion its store reached. The
// answer's headers say only that the API server accepted the request: the
// store still lacks whatever changed while no watch was open, and the
// first thing the stream may carry is a 410 saying that those changes are
// compacted away and can never be replayed. Until the new watch has said
// something of its own (a bookmark: everything up to its resourceVersion
// was sent), the store cannot vouch that nothing is missing from it.
func TestResumedWatchIsOpenOnceSomethingCameOnIt(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1)}
	f := newTestFeed(t, "ci", src, clk)
	send := true

	// A watch-list lands: one pod, Live.
	tw, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &send})
	require.NoError(t, err)
	fw := <-src.watches
	require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "10"))
	require.True(t, f.state().Live)

	// The connection is cut (an API server restart, a partition); while
	// no watch is open, pod b is created. The store cannot know.
	fw.Stop()
	_, ok := <-tw.ResultChan()
	require.False(t, ok)
	require.False(t, f.state().Live)

	// The reflector watches again from resourceVersion 10; the API server
	// answers 200 and has not sent a single event yet.
	tw, err = f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	require.NoError(t, err)
	fw = <-src.watches
	views, err := f.views(clk.Now(), nil)
	assert.ErrorIs(t, err, ErrIncomplete,
		"a watch resumed from an old resourceVersion, before it delivered anything, vouches for a store without pod b (got %d views)", len(views))

	// What the API server then says: the resourceVersion was compacted.
	go fw.Error(&apierrors.NewResourceExpired("too old resource version: 10 (250)").ErrStatus)
	ev := <-tw.ResultChan()
	require.Equal(t, watch.Error, ev.Type)
	assert.False(t, f.state().Live)
}

// TestConsistencyCheckListKeepsTheWatchListsWatch: with
// KUBE_WATCHLIST_INCONSISTENCY_DETECTOR set, client-go lists through the
// same ListerWatcher after a watch-list's end bookmark and before Replace,
// then goes on reading the watch-list's watch. Were that list taken for a
// relist, the watch would no longer be the current one: the store would
// land and stay "watch not open yet" until that watch ended, five to ten
// minutes later, though it is open and carrying events all along.
func TestConsistencyCheckListKeepsTheWatchListsWatch(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1), listed: &corev1.PodList{Items: []corev1.Pod{*testPod("ci", "a")}}}
	f := newTestFeed(t, "ci", src, clk)
	send := true
	_, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &send})
	require.NoError(t, err)
	<-src.watches
	// checkWatchListDataConsistencyIfRequested's list.
	_, err = f.lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "10"))
	s := f.state()
	assert.True(t, s.Live, "the watch-list's watch is open and read on; why: %q", s.Why)
}

// TestWatchResumedAfterItsTimeoutIsOpenAtOnce: the API server ends every
// watch at its timeoutSeconds, and the reflector watches again at once from
// its resourceVersion. Nothing was missed but what the new watch replays
// first, so its answer opens it: a quiet namespace, whose next bookmark is
// a minute away, does not hold every sweep back for that minute. A watch
// that ends before its timeoutSeconds was cut, and its successor is open
// only once something came on it.
func TestWatchResumedAfterItsTimeoutIsOpenAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lived is how long the first watch ran before its stream ended.
		lived time.Duration
		live  bool
		why   string
	}{
		{"ended by the API server at its timeoutSeconds", 7 * time.Minute, true, ""},
		{"cut a second before its timeoutSeconds", 7*time.Minute - time.Second, false, "watch resumed from resourceVersion 10, nothing on it yet"},
		{"cut at once", 0, false, "watch resumed from resourceVersion 10, nothing on it yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
			src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1)}
			f := newTestFeed(t, "ci", src, clk)
			send, timeout := true, int64(7*60)
			tw, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &send, TimeoutSeconds: &timeout})
			require.NoError(t, err)
			fw := <-src.watches
			require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "10"))
			require.True(t, f.state().Live)

			// Bookmarks every 30 seconds, as a quiet namespace's watch
			// carries nothing else; then the stream ends.
			for lived := time.Duration(0); lived < tc.lived; {
				step := min(30*time.Second, tc.lived-lived)
				clk.Step(step)
				lived += step
				go fw.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10"}})
				<-tw.ResultChan()
			}
			fw.Stop()
			_, ok := <-tw.ResultChan()
			require.False(t, ok)
			require.False(t, f.state().Live, "no watch is open")

			tw, err = f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: &timeout})
			require.NoError(t, err)
			fw = <-src.watches
			st := f.state()
			assert.Equal(t, tc.live, st.Live, st.Why)
			assert.Equal(t, tc.why, st.Why)

			// Whatever opened it, the compacted resourceVersion the stream
			// may then report closes it.
			go fw.Error(&apierrors.NewResourceExpired("too old resource version: 10 (250)").ErrStatus)
			ev := <-tw.ResultChan()
			require.Equal(t, watch.Error, ev.Type)
			assert.False(t, f.state().Live)
		})
	}
}

// TestWatchQuietNamespaceStaysLiveAcrossItsWatches: on a real API server,
// the watch of a namespace whose pods do not change carries nothing but
// bookmarks, at most one a minute, and the API server ends each watch at
// its timeoutSeconds. The store stays Live through the re-watches, rather
// than waiting for each new watch's first bookmark: a sweep is not held
// back in a quiet fleet. The watches here last 4 seconds instead of the
// reflector's five to ten minutes.
func TestWatchQuietNamespaceStaysLiveAcrossItsWatches(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "quiet")
	for i := range 3 {
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: fmt.Sprintf("r-%d", i), Labels: map[string]string{"app": "runner"}, Unscheduled: true})
	}
	c, err := New(env.Config, Options{})
	require.NoError(t, err)
	w := c.watch(WatchOptions{Namespaces: []string{ns}, Selector: "app=runner"}, clock.RealClock{})
	const seconds = 4
	var watches atomic.Int32
	for _, f := range w.pods {
		inner := f.lw
		f.lw = &cache.ListWatch{
			ListWithContextFunc: inner.ListWithContext,
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				short := int64(seconds)
				opts.TimeoutSeconds = &short
				watches.Add(1)
				return inner.WatchWithContext(ctx, opts)
			},
		}
	}
	runWatch(t, w)
	waitSynced(t, w)
	// Sample for five watches' time: the store may be between two
	// watches for a moment, never for the seconds until a bookmark.
	var samples, live int
	var longest, run time.Duration
	const every = 20 * time.Millisecond
	for end := time.Now().Add(5 * seconds * time.Second); time.Now().Before(end); time.Sleep(every) {
		samples++
		if w.Synced() {
			live++
			run = 0
			continue
		}
		run += every
		longest = max(longest, run)
	}
	require.GreaterOrEqual(t, watches.Load(), int32(4), "the API server ended the watches at their timeoutSeconds")
	assert.Less(t, longest, time.Second, "the longest time the store was not Live (%d of %d samples Live): %+v", live, samples, w.State())
}
