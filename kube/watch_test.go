package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// waitFor is how long a test waits for a watch to deliver what it waits
// for; polling ends as soon as it has.
const waitFor = 30 * time.Second

// runWatch runs w until the test ends, and waits for it to stop then.
func runWatch(t *testing.T, w *Watch) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitSynced waits until every store of w is Live.
func waitSynced(t *testing.T, w *Watch) {
	t.Helper()
	require.Eventually(t, w.Synced, waitFor, 10*time.Millisecond, "the stores never synced: %+v", w.State())
}

// TestWatchKeepsWhatListsGive: the stores keep exactly the views that
// ListPods and ListEphemeralRunners give of the same objects (pods in
// every state, EphemeralRunners with jobs, finalizers, deleting), filled by
// one watch-list each; before that, they answer ErrIncomplete; and each
// change the watch delivers is in the next list.
func TestWatchKeepsWhatListsGive(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "watch")
	var none corev1.ContainerState
	for i := range 4 {
		_, err := testenv.ApplyARCPod(ctx, env.Client, ns, testenv.ARCPod{Name: fmt.Sprintf("arc-%02d", i), Org: "acme"})
		require.NoError(t, err)
	}
	runner := map[string]string{"app": "runner"}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "failed", Labels: runner,
		Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), stateTerminated(1, 0, "Error")))})
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "pending", Labels: runner, Unscheduled: true})
	pull := podStatus(corev1.PodPending, containerStatus("dind", stateRunning(), none),
		containerStatus("runner", stateWaiting("ImagePullBackOff", "Back-off pulling image"), none))
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "pull", Labels: runner, Sidecar: true, Status: pull})
	noRoom := podStatus(corev1.PodPending)
	noRoom.Conditions = []corev1.PodCondition{unschedulable("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "no-room", Labels: runner, Status: noRoom})
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "stamped", Labels: map[string]string{"app": "runner", "pool/claimed-by": "gone"},
		Annotations: map[string]string{"pool/job": "acme/api/4242/77"}, PodState: testenv.Running()})
	// A pod deleting: its finalizer holds it.
	held := env.RunnerPod(t, ns, testenv.RunnerPod{Name: "deleting", Labels: runner, PodState: testenv.Running()})
	held.Finalizers = []string{"test.runner-reaper/hold"}
	_, err := env.Client.CoreV1().Pods(ns).Update(ctx, held, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Client.CoreV1().Pods(ns).Delete(ctx, "deleting", metav1.DeleteOptions{}))

	job := &testenv.ARCJob{RequestID: 991, Repository: "acme/api", RunID: 4242, Name: "build", JobID: "77"}
	for _, er := range []testenv.EphemeralRunner{
		{Name: "er-running", Finalizers: testenv.ARCFinalizers(), Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 7, Job: job}},
		{Name: "er-failed", Status: &testenv.EphemeralRunnerStatus{Phase: "Failed", Reason: "TooManyPodFailures", Message: "5 failures"}},
		{Name: "er-new"},
		{Name: "er-enterprise", ConfigURL: "https://github.com/enterprises/big", Status: &testenv.EphemeralRunnerStatus{Phase: "Pending"}},
		{Name: "er-elsewhere", ConfigURL: "https://ghes.example/acme", Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 9}},
		{Name: "er-deleting", Finalizers: testenv.ARCFinalizers(), Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 8}},
	} {
		env.EphemeralRunner(t, ns, er)
	}
	require.NoError(t, env.Dynamic.Resource(testenv.EphemeralRunners).Namespace(ns).Delete(ctx, "er-deleting", metav1.DeleteOptions{}))

	m := Mapping{Scopes: mustScopes(t, "org:acme"), StampLabel: "pool/claimed-by", JobAnnotation: "pool/job"}
	opts := Options{GitHubHost: "github.com"}
	lists := newClient(t, opts)
	wantPods := func() []fleet.Pod {
		pods, err := lists.ListPods(ctx, []string{ns}, "", m)
		require.NoError(t, err)
		return sorted(pods)
	}
	wantERs := func() []fleet.EphemeralRunner {
		ers, err := lists.ListEphemeralRunners(ctx, []string{ns}, nil)
		require.NoError(t, err)
		return sortedERs(ers)
	}

	c := newClient(t, opts)
	w := c.Watch(WatchOptions{Namespaces: []string{ns}, Mapping: m, ARC: true, StaleAfter: time.Hour})

	t.Run("before the first sync, no list", func(t *testing.T) {
		pods, err := w.ListPods(ctx)
		require.ErrorIs(t, err, ErrIncomplete)
		assert.Nil(t, pods)
		assert.Contains(t, err.Error(), fmt.Sprintf("pods in namespace %q: incomplete observation: not synced yet", ns))
		ers, err := w.ListEphemeralRunners(ctx)
		require.ErrorIs(t, err, ErrIncomplete)
		assert.Nil(t, ers)
		assert.False(t, w.Synced())
		assert.Zero(t, c.Counts().Requests, "nothing is sent before Run")
	})

	runWatch(t, w)
	waitSynced(t, w)

	t.Run("the stores hold what the lists give", func(t *testing.T) {
		assert.Equal(t, int64(2), c.Counts().Requests, "one watch-list for each store, and nothing else")
		pods, err := w.ListPods(ctx)
		require.NoError(t, err)
		want := wantPods()
		require.Len(t, want, 10)
		assert.Equal(t, want, sorted(pods))
		assert.Equal(t, names(sorted(pods)), names(pods), "in the order of a list")
		ers, err := w.ListEphemeralRunners(ctx)
		require.NoError(t, err)
		require.Len(t, ers, 6)
		assert.Equal(t, wantERs(), ers)
		for _, s := range w.State() {
			assert.True(t, s.Live, s.Resource)
			assert.Equal(t, 1, s.Relists, s.Resource)
			assert.Equal(t, ns, s.Namespace)
			assert.False(t, s.LastEvent.IsZero())
		}
		assert.Equal(t, []int{10, 6}, []int{w.State()[0].Objects, w.State()[1].Objects})
	})

	podNamed := func(pods []fleet.Pod, name string) *fleet.Pod {
		for i := range pods {
			if pods[i].Name == name {
				return &pods[i]
			}
		}
		return nil
	}
	erNamed := func(ers []fleet.EphemeralRunner, name string) *fleet.EphemeralRunner {
		for i := range ers {
			if ers[i].Name == name {
				return &ers[i]
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		change func()
		seen   func(pods []fleet.Pod, ers []fleet.EphemeralRunner) bool
	}{
		{"a pod is created", func() {
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: "new", Labels: runner, PodState: testenv.PodState{Waiting: "ContainerCreating"}})
		}, func(pods []fleet.Pod, _ []fleet.EphemeralRunner) bool { return podNamed(pods, "new") != nil }},
		{"its runner ends", func() {
			env.WritePodState(t, ns, "new", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
		}, func(pods []fleet.Pod, _ []fleet.EphemeralRunner) bool {
			p := podNamed(pods, "new")
			return p != nil && p.Phase == string(corev1.PodFailed)
		}},
		{"a pod is deleted", func() {
			require.NoError(t, env.Client.CoreV1().Pods(ns).Delete(ctx, "failed", metav1.DeleteOptions{}))
		}, func(pods []fleet.Pod, _ []fleet.EphemeralRunner) bool { return podNamed(pods, "failed") == nil }},
		{"an EphemeralRunner is created", func() {
			env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "er-later"})
		}, func(_ []fleet.Pod, ers []fleet.EphemeralRunner) bool { return erNamed(ers, "er-later") != nil }},
		{"a job starts on it", func() {
			env.WriteEphemeralRunnerStatus(t, ns, "er-later", testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 11, Job: job})
		}, func(_ []fleet.Pod, ers []fleet.EphemeralRunner) bool {
			e := erNamed(ers, "er-later")
			return e != nil && e.Job != nil && e.RunnerID == 11
		}},
		{"an EphemeralRunner is deleted", func() {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, "er-new")
		}, func(_ []fleet.Pod, ers []fleet.EphemeralRunner) bool { return erNamed(ers, "er-new") == nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			// A change may be several writes (a pod, then its status):
			// the store has them all once it gives what a list gives.
			require.Eventually(t, func() bool {
				pods, err := w.ListPods(ctx)
				if err != nil {
					return false
				}
				ers, err := w.ListEphemeralRunners(ctx)
				if err != nil || !tc.seen(pods, ers) {
					return false
				}
				listedPods, err := lists.ListPods(ctx, []string{ns}, "", m)
				if err != nil {
					return false
				}
				listedERs, err := lists.ListEphemeralRunners(ctx, []string{ns}, nil)
				return err == nil && assert.ObjectsAreEqual(sorted(listedPods), sorted(pods)) && assert.ObjectsAreEqual(sortedERs(listedERs), ers)
			}, waitFor, 10*time.Millisecond)
		})
	}
}

// TestWatchAllNamespacesWithoutARC: with no namespace named, one
// reflector watches all of them, through the selector; without ARC no
// EphemeralRunner is ever asked for, and ListEphemeralRunners gives none
// and no error.
func TestWatchAllNamespacesWithoutARC(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nsA, nsB := env.Namespace(t, "watch"), env.Namespace(t, "watch")
	label := map[string]string{"watch-all": nsA}
	for _, ns := range []string{nsA, nsB} {
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: "r-1", Labels: label, PodState: testenv.Running()})
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: "r-2", Labels: label, Unscheduled: true})
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: "other", Labels: map[string]string{"app": "other"}, Unscheduled: true})
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: "r-1"})
	}
	proxy := env.Proxy(t, nil)
	c, err := New(proxy.Config(), Options{})
	require.NoError(t, err)
	selector := "watch-all=" + nsA
	w := c.Watch(WatchOptions{Selector: selector, StaleAfter: time.Hour})
	runWatch(t, w)
	waitSynced(t, w)

	pods, err := w.ListPods(ctx)
	require.NoError(t, err)
	want, err := newClient(t, Options{}).ListPods(ctx, nil, selector, Mapping{})
	require.NoError(t, err)
	require.Len(t, want, 4)
	assert.Equal(t, sorted(want), sorted(pods))
	state := w.State()
	require.Len(t, state, 1)
	assert.Equal(t, WatchState{Resource: "pods", Live: true, Objects: 4, Relists: 1, LastEvent: state[0].LastEvent}, state[0])

	ers, err := w.ListEphemeralRunners(ctx)
	assert.NoError(t, err)
	assert.Nil(t, ers)
	assert.Equal(t, 2, proxy.Seen(http.MethodGet, "/api/v1/pods"), "one watch-list of all namespaces, and one read of where the API server is for the listing")
	assert.Zero(t, proxy.Seen(http.MethodGet, "/apis/actions.github.com/v1alpha1/ephemeralrunners"))
	for _, ns := range []string{nsA, nsB} {
		assert.Zero(t, proxy.Seen(http.MethodGet, "/apis/actions.github.com/v1alpha1/namespaces/"+ns+"/ephemeralrunners"))
	}
}

// cutWriter passes on the first left bytes of an answer, then fails the
// write, on which the proxy drops the connection mid-stream.
type cutWriter struct {
	http.ResponseWriter
	left int
	cut  *atomic.Bool
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if len(p) <= w.left {
		w.left -= len(p)
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:w.left])
	w.left = 0
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	w.cut.Store(true)
	return n, errors.New("cut by the test")
}

func (w *cutWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *cutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// silentWriter passes an answer on until silent is set; from then on it
// passes nothing of it, holding the stream open and silent for good.
type silentWriter struct {
	http.ResponseWriter
	silent *atomic.Bool
	dead   bool
}

func (w *silentWriter) Write(p []byte) (int, error) {
	if w.dead || w.silent.Load() {
		w.dead = true
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *silentWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *silentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streams forwards watches through a proxy, each cancellable: cutAll cuts
// every stream forwarded so far where it is.
type streams struct {
	proxy   *testenv.KubeProxy
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (s *streams) forward(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s.mu.Lock()
	s.cancels = append(s.cancels, cancel)
	s.mu.Unlock()
	s.proxy.Forward(w, r.WithContext(ctx))
}

func (s *streams) cutAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
}

// podWatch says whether r is a watch of the pods in ns, and whether a
// watch-list.
func podWatch(r *http.Request, ns string) (watch, initial bool) {
	q := r.URL.Query()
	return r.URL.Path == "/api/v1/namespaces/"+ns+"/pods" && q.Get("watch") == "true", q.Get("sendInitialEvents") == "true"
}

// lists records every ListPods answer a Watch gives while it is polled.
type lists struct {
	mu     sync.Mutex
	counts []int
	errs   []error
}

// poll calls ListPods every few milliseconds until the test ends.
func (l *lists) poll(t *testing.T, w *Watch) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			pods, err := w.ListPods(ctx)
			l.mu.Lock()
			if err != nil {
				l.errs = append(l.errs, err)
			} else {
				l.counts = append(l.counts, len(pods))
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// check asserts that every list the polling got was whole: n objects, or
// n+1 once one more had been created, never fewer once more had been seen;
// and that every refusal was ErrIncomplete.
func (l *lists) check(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.counts) > 0
	}, waitFor, time.Millisecond, "the polling saw a whole list")
	l.mu.Lock()
	defer l.mu.Unlock()
	low := n
	for i, got := range l.counts {
		assert.True(t, got == low || got == n+1, "list %d has %d pods, want %d (or %d)", i, got, low, n+1)
		low = max(low, got)
	}
	for _, err := range l.errs {
		if errors.Is(err, context.Canceled) {
			continue
		}
		assert.ErrorIs(t, err, ErrIncomplete)
	}
}

// TestWatchCutMidStream: a watch cut mid-stream, whether the first
// watch-list part-way or the live watch after the sync, makes the store
// refuse to list, never list part of the pods, until the reflector is
// watching again (from its resourceVersion) or, when that is too old, until
// its relist has landed.
func TestWatchCutMidStream(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const n = 30
	for _, tc := range []struct {
		name string
		// cutFirst cuts the first watch-list part-way; otherwise the
		// live watch is cut after the sync.
		cutFirst bool
		// expire answers the watch after the cut 410 Gone: the
		// reflector must relist.
		expire bool
	}{
		{name: "the first watch-list, part-way", cutFirst: true},
		{name: "the live watch, watched again from its resourceVersion"},
		{name: "the live watch, its resourceVersion expired", expire: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "watch")
			for i := range n {
				env.RunnerPod(t, ns, testenv.RunnerPod{Name: fmt.Sprintf("r-%02d", i), Labels: map[string]string{"app": "runner"}, Unscheduled: true})
			}
			proxy := env.Proxy(t, nil)
			ss := &streams{proxy: proxy}
			var (
				mu                  sync.Mutex
				watchLists, watches int
				hold                chan struct{}
				expireNext          bool
				cut                 atomic.Bool
			)
			proxy.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				isWatch, initial := podWatch(r, ns)
				if !isWatch {
					return false
				}
				mu.Lock()
				if initial {
					watchLists++
				} else {
					watches++
				}
				first := initial && watchLists == 1
				expire := expireNext && !initial
				if expire {
					expireNext = false
				}
				h := hold
				mu.Unlock()
				switch {
				case expire:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusGone)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}`))
					return true
				case h != nil:
					select {
					case <-h:
					case <-r.Context().Done():
						return true
					}
				}
				if first && tc.cutFirst {
					ss.forward(&cutWriter{ResponseWriter: w, left: 2000, cut: &cut}, r)
					return true
				}
				ss.forward(w, r)
				return true
			})
			c, err := New(proxy.Config(), Options{})
			require.NoError(t, err)
			w := c.Watch(WatchOptions{Namespaces: []string{ns}, StaleAfter: time.Hour})
			var got lists
			got.poll(t, w)
			runWatch(t, w)
			waitSynced(t, w)

			if tc.cutFirst {
				assert.True(t, cut.Load(), "the first watch-list was cut")
				mu.Lock()
				assert.Equal(t, 2, watchLists, "a second watch-list, whole")
				mu.Unlock()
				assert.Equal(t, 1, w.State()[0].Relists, "only a whole list landed")
				got.check(t, n)
				return
			}

			// One change on the live watch first: a watch cut before any
			// event came on it is one the reflector relists after.
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: "r-later", Labels: map[string]string{"app": "runner"}, Unscheduled: true})
			require.Eventually(t, func() bool {
				pods, err := w.ListPods(ctx)
				return err == nil && len(pods) == n+1
			}, waitFor, 10*time.Millisecond)

			release := make(chan struct{})
			mu.Lock()
			hold, expireNext = release, tc.expire
			mu.Unlock()
			ss.cutAll()
			want := "watch broken: "
			if tc.expire {
				want = "relisting"
			}
			require.Eventually(t, func() bool { return strings.HasPrefix(w.State()[0].Why, want) }, waitFor, 10*time.Millisecond,
				"the store says why it cannot list: %+v", w.State())
			pods, err := w.ListPods(ctx)
			require.ErrorIs(t, err, ErrIncomplete)
			assert.Contains(t, err.Error(), want)
			assert.Nil(t, pods)
			assert.False(t, w.Synced())

			mu.Lock()
			hold = nil
			mu.Unlock()
			close(release)
			if !tc.expire {
				// A watch resumed from a resourceVersion is open once
				// something came on it: a change, rather than the
				// bookmark a minute later.
				touched, err := env.Client.CoreV1().Pods(ns).Get(ctx, "r-later", metav1.GetOptions{})
				require.NoError(t, err)
				touched.Annotations = map[string]string{"touched": "yes"}
				_, err = env.Client.CoreV1().Pods(ns).Update(ctx, touched, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			waitSynced(t, w)
			pods, err = w.ListPods(ctx)
			require.NoError(t, err)
			assert.Len(t, pods, n+1)
			mu.Lock()
			defer mu.Unlock()
			if tc.expire {
				assert.Equal(t, 2, w.State()[0].Relists, "the relist landed")
				assert.Equal(t, 2, watchLists, "the relist is a watch-list")
			} else {
				assert.Equal(t, 1, w.State()[0].Relists, "no relist: watched again from the resourceVersion")
				assert.Equal(t, 1, watches, "one watch from the resourceVersion")
			}
			got.check(t, n)
		})
	}
}

// TestWatchSilentGoesStale: a watch whose stream stays open but carries
// nothing (a proxy that holds it) makes the store not Live once StaleAfter
// has passed without an event or a bookmark, on the Watch's clock; once
// the stream is cut and a watch carries again, the store is Live with what
// it missed.
func TestWatchSilentGoesStale(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "watch")
	for i := range 3 {
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: fmt.Sprintf("r-%d", i), Labels: map[string]string{"app": "runner"}, Unscheduled: true})
	}
	proxy := env.Proxy(t, nil)
	ss := &streams{proxy: proxy}
	var silent atomic.Bool
	proxy.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if isWatch, _ := podWatch(r, ns); !isWatch {
			return false
		}
		ss.forward(&silentWriter{ResponseWriter: w, silent: &silent}, r)
		return true
	})
	c, err := New(proxy.Config(), Options{})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Now())
	w := c.watch(WatchOptions{Namespaces: []string{ns}, StaleAfter: time.Minute}, clk)
	runWatch(t, w)
	waitSynced(t, w)

	silent.Store(true)
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "late", Labels: map[string]string{"app": "runner"}, Unscheduled: true})
	clk.Step(time.Minute + time.Second)
	assert.False(t, w.Synced())
	pods, err := w.ListPods(ctx)
	require.ErrorIs(t, err, ErrIncomplete)
	assert.Contains(t, err.Error(), "no event or bookmark for 1m")
	assert.Nil(t, pods)

	silent.Store(false)
	ss.cutAll()
	require.Eventually(t, func() bool {
		pods, err := w.ListPods(ctx)
		return err == nil && len(pods) == 4
	}, waitFor, 10*time.Millisecond, "live again, with the pod it missed: %+v", w.State())
}

// TestWatchForbiddenNeverLive: a user RBAC does not let watch pods never
// gets a Live store, whether it may list them (the reflector then lists,
// and its watch is refused) or not; the refusal is what the store says.
func TestWatchForbiddenNeverLive(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		// lists: the reflector's lists land, only its watch is refused.
		lists bool
	}{
		{"list but not watch", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}, true},
		{"no rights", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "watch")
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: "r-1", Labels: map[string]string{"app": "runner"}, Unscheduled: true})
			user := "watcher-" + ns
			if tc.rules != nil {
				env.Grant(t, ns, "pods-"+ns, user, tc.rules...)
			}
			cfg, err := env.AddUser(user)
			require.NoError(t, err)
			c, err := New(cfg, Options{})
			require.NoError(t, err)
			w := c.Watch(WatchOptions{Namespaces: []string{ns}, StaleAfter: time.Hour})
			runWatch(t, w)
			var everLive atomic.Bool
			require.Eventually(t, func() bool {
				s := w.State()[0]
				if s.Live {
					everLive.Store(true)
				}
				// Twice round the reflector's loop: listed (or refused)
				// and refused its watch, and again.
				return strings.Contains(s.Why, "forbidden") && (!tc.lists || s.Relists >= 2)
			}, waitFor, 5*time.Millisecond, "%+v", w.State())
			assert.False(t, everLive.Load(), "never Live")
			pods, err := w.ListPods(ctx)
			require.ErrorIs(t, err, ErrIncomplete)
			assert.Contains(t, err.Error(), "forbidden")
			assert.Nil(t, pods)
			if tc.lists {
				assert.Equal(t, 1, w.State()[0].Objects, "the list landed, the store is still refused")
			}
		})
	}
}
