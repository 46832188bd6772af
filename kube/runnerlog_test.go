package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/runnerlog"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// logServer answers every request with status and body, and keeps the
// requests it was sent.
func logServer(t *testing.T, status int, body string) (*Client, func() []*http.Request) {
	t.Helper()
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(context.Background()))
		mu.Unlock()
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	return c, func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]*http.Request(nil), got...)
	}
}

var logPod = fleet.Pod{Namespace: "runners", Name: "runner-1", UID: "u1"}

// The read asks for the runner container's tail only, bounded in lines and
// bytes, in one counted request.
func TestTailRunnerLogAsksForABoundedTail(t *testing.T) {
	const tail = "2026-01-01 10:00:05Z: Running job: build\n"
	c, sent := logServer(t, http.StatusOK, tail)
	before := c.Counts().Requests

	b, err := c.RunnerLogs("worker").TailRunnerLog(context.Background(), logPod)
	require.NoError(t, err)
	assert.Equal(t, tail, string(b))

	reqs := sent()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, http.MethodGet, r.Method)
	assert.Equal(t, "/api/v1/namespaces/runners/pods/runner-1/log", r.URL.Path)
	q := r.URL.Query()
	assert.Equal(t, "worker", q.Get("container"))
	assert.Equal(t, "50", q.Get("tailLines"))
	assert.Equal(t, "16384", q.Get("limitBytes"))
	assert.Len(t, q, 3, "no other parameter: no follow, no previous container")
	assert.Equal(t, before+1, c.Counts().Requests, "the request is counted")

	assert.Equal(t, DefaultRunnerContainer, c.RunnerLogs("").container)
}

// A server that sends more than was asked for is read no further than the
// bound: the tail then fills it, which the parser takes for a cut tail.
func TestTailRunnerLogReadsNoMoreThanTheBound(t *testing.T) {
	c, _ := logServer(t, http.StatusOK, strings.Repeat("Running job: x\n", runnerlog.MaxBytes))
	b, err := c.RunnerLogs("runner").TailRunnerLog(context.Background(), logPod)
	require.NoError(t, err)
	assert.Len(t, b, runnerlog.MaxBytes)
	assert.True(t, runnerlog.Parse(b).Cut)
}

func TestTailRunnerLogErrors(t *testing.T) {
	status := func(code int, reason, msg, kind string) string {
		return `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg + `","reason":"` + reason +
			`","details":{"name":"runner-1","kind":"` + kind + `"},"code":` + strconv.Itoa(code) + `}`
	}
	for _, tc := range []struct {
		name      string
		code      int
		body      string
		forbidden bool
		says      string
	}{
		{"RBAC refuses", http.StatusForbidden, status(403, "Forbidden", `pods \"runner-1\" is forbidden: User \"reaper\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"runners\"`, "pods"), true, "cannot get"},
		// The API server passes the kubelet's status on, under the
		// resource pods/log: a 403 there is the node refusing the API
		// server, which no right of the reaper's would change.
		{"the kubelet refuses the API server", http.StatusForbidden, status(403, "Forbidden", "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource=proxy)", "pods/log"), false, "the node's kubelet refused the API server"},
		{"the pod is gone", http.StatusNotFound, status(404, "NotFound", `pods \"runner-1\" not found`, "pods"), false, "not found"},
		{"the container is not running", http.StatusBadRequest, status(400, "BadRequest", `container \"runner\" in pod \"runner-1\" is waiting to start`, ""), false, "waiting to start"},
		{"the kubelet is unreachable", http.StatusInternalServerError, status(500, "InternalError", "dial tcp: i/o timeout", ""), false, "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := logServer(t, tc.code, tc.body)
			b, err := c.RunnerLogs("runner").TailRunnerLog(context.Background(), logPod)
			require.Error(t, err)
			assert.Nil(t, b)
			assert.Equal(t, tc.forbidden, errors.Is(err, fleet.ErrNoLogRight), "%v", err)
			assert.Contains(t, err.Error(), "read the log of pod runners/runner-1 container runner")
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	t.Run("no answer in time", func(t *testing.T) {
		addr := testenv.SilentServer(t)
		c, err := New(&rest.Config{Host: "http://" + addr}, Options{Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		_, err = c.RunnerLogs("runner").TailRunnerLog(context.Background(), logPod)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.NotErrorIs(t, err, fleet.ErrNoLogRight)
	})
}

// Against a real API server: without the right, the read is refused by
// RBAC and says which right; with `get` on pods/log it is allowed (the pod
// has no node here, in a control plane without kubelets, so the API server
// answers an empty log, which says nothing).
func TestTailRunnerLogRBAC(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	running := podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))
	pod := env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"}, Status: running})
	view := Mapping{}.View(pod)

	env.Grant(t, ns, "read-logs", "logreader-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}})
	nobody := userClient(t, "nobody-"+ns)
	reader := userClient(t, "logreader-"+ns)

	_, err := nobody.RunnerLogs("runner").TailRunnerLog(ctx, view)
	require.Error(t, err)
	assert.ErrorIs(t, err, fleet.ErrNoLogRight)
	assert.Contains(t, err.Error(), "pods/log")

	b, err := reader.RunnerLogs("runner").TailRunnerLog(ctx, view)
	require.NoError(t, err)
	assert.Equal(t, runnerlog.Word{}, runnerlog.Parse(b))
}
