package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

	"github.com/runner-reaper/runner-reaper/fleet"
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
// first, so its answer opens it, once an error it may open with has had
// time to come: a quiet namespace, whose next bookmark is a minute away,
// does not hold every sweep back for that minute. Any other end (before
// its timeoutSeconds, or not the body's clean end) was a cut, and its
// successor is open only once something came on it. Here the stream's end
// is the fake's Stop; whether its body ended cleanly is what the Client's
// transport would have recorded.
func TestWatchResumedAfterItsTimeoutIsOpenAtOnce(t *testing.T) {
	const resumed = "watch resumed from resourceVersion 10, nothing on it yet"
	for _, tc := range []struct {
		name string
		// lived is how long the first watch ran before its stream
		// ended, and clean whether its body ended cleanly.
		lived time.Duration
		clean bool
		live  bool
		why   string
	}{
		{"ended by the API server at its timeoutSeconds", 7 * time.Minute, true, true, ""},
		{"ended cleanly a second before its timeoutSeconds (a server shutting down)", 7*time.Minute - time.Second, true, false, resumed},
		{"cut after its timeoutSeconds (a connection reset)", 7*time.Minute + time.Second, false, false, resumed},
		{"cut at once", 0, false, false, resumed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRewatchRig(t)
			r.watchList(7 * 60)
			r.carry(tc.lived)
			r.end(tc.clean)
			require.False(t, r.f.state().Live, "no watch is open")

			r.resume(7 * 60)
			if tc.live {
				st := r.f.state()
				assert.False(t, st.Live, "an error the stream may open with has not had its time")
				assert.Contains(t, st.Why, "waiting 500ms for an error it may open with")
				r.clk.Step(firstWord)
				// The watch's reader vouches for it, in its own time.
				require.Eventually(t, func() bool { return r.f.state().Live }, 5*time.Second, time.Millisecond, "%+v", r.f.state())
			}
			st := r.f.state()
			assert.Equal(t, tc.live, st.Live, st.Why)
			assert.Equal(t, tc.why, st.Why)

			// Whatever opened it, the compacted resourceVersion the stream
			// may then report closes it.
			go r.fw.Error(&apierrors.NewResourceExpired("too old resource version: 10 (250)").ErrStatus)
			ev := <-r.tw.ResultChan()
			require.Equal(t, watch.Error, ev.Type)
			assert.False(t, r.f.state().Live)
		})
	}

	// Only the watch right after one that reached its timeoutSeconds
	// having been open is opened on its answer.
	for _, tc := range []struct {
		name    string
		between func(r *rewatchRig)
	}{
		{"a list in between", func(r *rewatchRig) {
			_, err := r.f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.NoError(t, r.f.Replace([]any{testPod("ci", "a")}, "10"))
		}},
		{"a watch in between, cut", func(r *rewatchRig) {
			r.resume(7 * 60)
			r.clk.Step(firstWord)
			r.end(false)
		}},
		{"a watch in between that never said a word, ended at its timeoutSeconds", func(r *rewatchRig) {
			// Cut, so that the next one waits for its first word...
			r.resume(7 * 60)
			r.clk.Step(firstWord)
			r.end(false)
			// ...which never comes before its timeoutSeconds.
			r.resume(30)
			r.clk.Step(30 * time.Second)
			r.end(true)
		}},
		{"a watch in between opened on its answer that never heard a word, ended at its timeoutSeconds", func(r *rewatchRig) {
			r.resume(30)
			r.clk.Step(30 * time.Second)
			r.end(true)
		}},
		{"a watch in between whose timeoutSeconds came, with an ERROR", func(r *rewatchRig) {
			r.resume(7 * 60)
			r.clk.Step(firstWord)
			r.carry(7 * time.Minute)
			go r.fw.Error(&apierrors.NewInternalError(errors.New("etcd")).ErrStatus)
			<-r.tw.ResultChan()
			r.end(true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRewatchRig(t)
			r.watchList(7 * 60)
			r.carry(7 * time.Minute)
			r.end(true)
			tc.between(r)
			r.resume(7 * 60)
			r.clk.Step(firstWord)
			st := r.f.state()
			assert.False(t, st.Live, "the store cannot vouch for what changed while no watch was open")
			assert.Equal(t, resumed, st.Why)
		})
	}
}

// rewatchRig is a pod feed's watches, one at a time, on a fake clock.
type rewatchRig struct {
	t    *testing.T
	clk  *clocktesting.FakeClock
	src  *fakeSource
	f    *feed[fleet.Pod]
	tw   watch.Interface
	fw   *watch.FakeWatcher
	tail *streamTail
}

func newRewatchRig(t *testing.T) *rewatchRig {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1), tails: make(chan *streamTail, 1)}
	return &rewatchRig{t: t, clk: clk, src: src, f: newTestFeed(t, "ci", src, clk)}
}

// open asks for a watch as the reflector does.
func (r *rewatchRig) open(opts metav1.ListOptions) {
	var err error
	r.tw, err = r.f.lw.WatchWithContext(context.Background(), opts)
	require.NoError(r.t, err)
	r.fw, r.tail = <-r.src.watches, <-r.src.tails
}

// watchList fills the store with one pod by a watch-list that lasts
// seconds.
func (r *rewatchRig) watchList(seconds int64) {
	send := true
	r.open(metav1.ListOptions{SendInitialEvents: &send, TimeoutSeconds: &seconds})
	require.NoError(r.t, r.f.Replace([]any{testPod("ci", "a")}, "10"))
	require.True(r.t, r.f.state().Live)
}

// resume watches again from resourceVersion 10, for seconds.
func (r *rewatchRig) resume(seconds int64) {
	r.open(metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: &seconds})
}

// carry lets d pass on the watch with a bookmark every 30 seconds, as a
// quiet namespace's watch carries nothing else.
func (r *rewatchRig) carry(d time.Duration) {
	for lived := time.Duration(0); lived < d; {
		step := min(30*time.Second, d-lived)
		r.clk.Step(step)
		lived += step
		go r.fw.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10"}})
		<-r.tw.ResultChan()
	}
}

// end ends the stream, its body cleanly or not.
func (r *rewatchRig) end(clean bool) {
	if clean {
		r.tail.end()
	}
	r.fw.Stop()
	for range r.tw.ResultChan() {
	}
}

// TestWatchQuietNamespaceStaysLiveAcrossItsWatches: on a real API server
// that ends each watch at its timeoutSeconds, the watch of a namespace
// whose pods do not change carries only bookmarks (one a minute, and one
// two seconds before its end, once the cluster's other pods have moved the
// resourceVersion), yet the store stays Live through the re-watches, but
// for the moment of each re-watch and its first word's wait, rather than
// until the new watch's first bookmark: a sweep is not held back in a
// quiet fleet. The watches here last 4 seconds instead of the reflector's
// five to ten minutes; the samples cover five of them. Each new watch is
// refused for its first word's half second; waiting for its first
// bookmark would refuse it for two seconds.
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
	// The cluster's other pods: one created elsewhere twice a second.
	writeElsewhere(t, env, func(ctx context.Context, ns, name string) error {
		_, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}}}, metav1.CreateOptions{})
		return err
	})

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
	assert.Less(t, longest, 1500*time.Millisecond, "the longest time the store was not Live (%d of %d samples Live): %+v", live, samples, w.State())
}

// TestWatchQuietResourceVouchesAgainAfterACut: on a real API server, a
// watch resumed after a cut vouches only once something came on it, and
// in a resource in which nothing changes, the only thing to come is a
// bookmark, which the API server sends only once a consistent read has
// brought its watch cache up to where etcd is (the cluster's other writes
// move that). No sweep lists while the store is not Live, so the Watch
// reads the resource itself meanwhile (nudge); without that, the store
// would never vouch again.
func TestWatchQuietResourceVouchesAgainAfterACut(t *testing.T) {
	env := plane.Env(t)
	// The cluster's other writes: a ConfigMap twice a second.
	writeElsewhere(t, env, func(ctx context.Context, ns, name string) error {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	})

	// One at a time, the control first: the API server's watch cache is
	// one for all pods, and a nudge moves it for every watch of pods.
	for _, tc := range []struct {
		name  string
		nudge time.Duration
	}{
		{"control: not nudged", 0},
		{"nudged", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "quiet")
			for i := range 3 {
				env.RunnerPod(t, ns, testenv.RunnerPod{Name: fmt.Sprintf("r-%d", i), Labels: map[string]string{"app": "runner"}, Unscheduled: true})
			}
			proxy := env.Proxy(t, nil)
			ss := &streams{proxy: proxy}
			proxy.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				if isWatch, _ := podWatch(r, ns); !isWatch {
					return false
				}
				ss.forward(w, r)
				return true
			})
			c, err := New(proxy.Config(), Options{})
			require.NoError(t, err)
			w := c.watch(WatchOptions{Namespaces: []string{ns}, Selector: "app=runner"}, clock.RealClock{})
			w.nudgeEvery = tc.nudge
			runWatch(t, w)
			waitSynced(t, w)

			// A cut more than a second into a watch (a sooner one is an
			// error to the reflector, which lists again) is followed by a
			// watch from the store's resourceVersion.
			time.Sleep(2 * time.Second)
			ss.cutAll()
			require.Eventually(t, func() bool { return !w.Synced() }, waitFor, 10*time.Millisecond, "the cut is seen")
			// The API server's bookmarks come a minute into a watch.
			vouched := assert.Eventually
			if tc.nudge == 0 {
				vouched = assert.Never
			}
			vouched(t, w.Synced, 80*time.Second, 100*time.Millisecond, "%+v", w.State())
		})
	}
}

// writeElsewhere has create write an object in a namespace of its own
// twice a second until the test ends, as a cluster's other work moves its
// resourceVersion.
func writeElsewhere(t *testing.T, env *testenv.Env, create func(ctx context.Context, ns, name string) error) {
	t.Helper()
	ns := env.Namespace(t, "elsewhere")
	ctx, cancel := context.WithCancel(context.Background())
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; ctx.Err() == nil; i++ {
			_ = create(ctx, ns, fmt.Sprintf("w-%d", i))
			time.Sleep(500 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-written })
}
