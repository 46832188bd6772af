package kube

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The retry behaviour of the writes inside an action, said
// out loud. An Event is optional and never retried; a required write (a
// delete) keeps client-go's retries of a 429 with Retry-After, which the
// action's budget bounds.

// throttled answers the requests match picks with 429 and Retry-After: 1,
// as API priority and fairness does, the first n times (every time for n <
// 0), and lets the rest through to the API server.
func throttled(match func(*http.Request) bool, n int) func(http.ResponseWriter, *http.Request) bool {
	var mu sync.Mutex
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if n == 0 {
			return false
		}
		n--
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too many requests","reason":"TooManyRequests","code":429}`))
		return true
	}
}

// deadRunner creates a terminated runner pod named name in ns and returns
// its view as c lists it.
func deadRunner(t *testing.T, env *testenv.Env, c *Client, ns, name string) fleet.Pod {
	t.Helper()
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: name, Labels: map[string]string{"app": name},
		Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), corev1.ContainerState{}))})
	pods, err := c.ListPods(context.Background(), []string{ns}, "app="+name, Mapping{})
	require.NoError(t, err)
	require.Len(t, pods, 1)
	return pods[0]
}

func isEventCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events")
}

func TestEventIsNeverRetried(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	proxy := env.Proxy(t, throttled(isEventCreate, -1))
	c, err := New(proxy.Config(), Options{})
	require.NoError(t, err)
	pod := deadRunner(t, env, c, ns, "runner-1")

	start := time.Now()
	err = c.RecordEvent(ctx, pod, "RunnerReaped", "terminal: test")
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too many requests")
	assert.Equal(t, 1, proxy.Seen(http.MethodPost, "/api/v1/namespaces/"+ns+"/events"), "one try, no retry")
	// client-go would have waited out Retry-After before a retry.
	assert.Less(t, took, time.Second, "the refusal came back without waiting out Retry-After")

	// The delete that follows is unaffected and goes.
	res, err := c.DeletePod(ctx, pod)
	require.NoError(t, err)
	assert.Equal(t, fleet.Deleted, res)
}

func TestRequiredDeleteRetriesAThrottledAnswer(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	proxy := env.Proxy(t, throttled(func(r *http.Request) bool { return r.Method == http.MethodDelete }, 1))
	c, err := New(proxy.Config(), Options{})
	require.NoError(t, err)
	pod := deadRunner(t, env, c, ns, "runner-1")

	res, err := c.DeletePod(ctx, pod)
	require.NoError(t, err, "a 429 with Retry-After is retried for a write that must finish")
	assert.Equal(t, fleet.Deleted, res)
	assert.Equal(t, 2, proxy.Seen(http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/runner-1"))

	// Within the write's budget only: a context that ends first ends it.
	pod = deadRunner(t, env, c, ns, "runner-2")
	proxy.Intercept(throttled(func(r *http.Request) bool { return r.Method == http.MethodDelete }, -1))
	bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.DeletePod(bctx, pod)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 900*time.Millisecond, "the budget, not Retry-After, ended the retries")
}

// countingLimiter counts the waits of the requests it throttles, and
// throttles none.
type countingLimiter struct {
	flowcontrol.RateLimiter
	mu    sync.Mutex
	waits int
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	l.waits++
	l.mu.Unlock()
	return nil
}

func (l *countingLimiter) TryAccept() bool { return true }

// Events take no token from the limiter the required writes wait on, so a
// burst of Events never delays a delete behind them.
func TestEventsTakeNoTokenOfTheDeletes(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	lim := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	cfg := *env.Config
	cfg.RateLimiter = lim
	c, err := New(&cfg, Options{})
	require.NoError(t, err)
	pod := deadRunner(t, env, c, ns, "runner-1")
	lim.mu.Lock()
	lim.waits = 0
	lim.mu.Unlock()
	for range 5 {
		require.NoError(t, c.RecordEvent(ctx, pod, "RunnerReaped", "terminal: test"))
	}
	res, err := c.DeletePod(ctx, pod)
	require.NoError(t, err)
	assert.Equal(t, fleet.Deleted, res)
	lim.mu.Lock()
	defer lim.mu.Unlock()
	assert.Equal(t, 1, lim.waits, "only the delete waited on the required writes' limiter")
}

// The API server's Warning headers are text from outside: they reach the
// process's logger as warnings (which redacts, escapes and filters them),
// never stderr through klog.
func TestWarningHeadersGoToTheLogger(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "kube")
	proxy := env.Proxy(t, nil)
	var buf safeBuffer
	c, err := New(proxy.Config(), Options{Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	require.NoError(t, err)
	proxy.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Add("Warning", `299 - "admission: runner \u202eexe.live"`)
		return false
	})
	_, err = c.ListPods(context.Background(), []string{ns}, "app=none", Mapping{})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), `"msg":"warning from the Kubernetes API"`)
	assert.Contains(t, buf.String(), `admission: runner`)
}

type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *safeBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
