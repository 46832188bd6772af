package e2e_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Through the compiled binary: the Event POST answered 429
// with Retry-After: 1, or held for 6 s as a slow admission webhook holds
// it. The review saw the registration deleted, the Event's retries use up
// the action's 5 s budget, and the pod delete fail: a running pod with no
// registration, left by the reaper itself, on every sweep. Now the pod and
// its registration both go, the Event's failure is reported on the action
// line, and the sweep is complete.
func TestThrottledOrSlowEventsStrandNoRunner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		event func(w http.ResponseWriter)
	}{
		{"429 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too many requests, please try again later","reason":"TooManyRequests","code":429}`))
		}},
		{"a webhook that takes 6 s", func(w http.ResponseWriter) {
			time.Sleep(6 * time.Second)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGatewayTimeout)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"admission webhook timed out","code":504}`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := env.Proxy(t, func(w http.ResponseWriter, r *http.Request) bool {
				// The pre-flight of a namespace that lists no pod is a
				// dry-run Event; only the real Events are held up.
				if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/events") || r.URL.Query().Get("dryRun") != "" {
					return false
				}
				tc.event(w)
				return true
			})
			w := newWorld(t, map[string]string{"KUBECONFIG": proxy.Kubeconfig(t)})
			zombieReg := w.runner("acme-zombie", "offline", false)
			w.pod("acme-zombie", testenv.Running())
			terminalReg := w.runner("acme-done", "offline", false)
			w.pod("acme-done", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})

			w.sweep().requireCode(t, 0) // marks the zombie, reaps the terminal pod
			time.Sleep(pastConfirm)
			r := w.sweep()
			r.requireCode(t, 0)
			sum := r.summary(t)
			t.Logf("acting sweep: duration_ms=%v kube_requests=%v github_requests=%v", sum["duration_ms"], sum["kube_requests"], sum["github_requests"])

			assert.False(t, w.podExists("acme-zombie"), "the zombie's pod went after its registration")
			assert.False(t, w.runnerExists(zombieReg.ID))
			assert.False(t, w.podExists("acme-done"))
			assert.False(t, w.runnerExists(terminalReg.ID))
			actions := r.actions(t)
			a, ok := actions["acme-zombie"]
			require.True(t, ok, "an action line for the zombie: %v", r.Logs)
			assert.Equal(t, "deleted", a["result"])
			assert.Equal(t, "deleted", a["pod_result"])
			assert.Equal(t, "deleted", a["registration_result"])
			assert.NotEmpty(t, a["event_error"], "the Event that failed is reported")
			assert.Nil(t, a["error"], "the action did not fail")
			assert.Empty(t, w.reapedEvents(), "no Event got through")
		})
	}
}

// Where the object's delete itself fails once the
// registration is gone (the API server down for the whole budget), the
// sweep fails (exit 1) and says so; the next sweep finds the pod again, its
// registration gone from the complete list and its mark kept, and finishes
// it at once, with no new wait for confirmation.
func TestPodDeleteThatFailsAfterItsRegistrationIsFinishedNextSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, verdict string
		extra         map[string]string
		plant         func(w *world) (reg int64)
	}{
		{"zombie", "zombie", nil, func(w *world) int64 {
			w.pod("acme-leak", testenv.Running())
			return w.runner("acme-leak", "offline", false).ID
		}},
		{"orphan-stamped", "orphan-stamped", map[string]string{"REAPER_OWNER_STAMP_LABEL": stampLabel}, func(w *world) int64 {
			w.stampedPod("acme-leak", testenv.Running())
			return w.runner("acme-leak", "online", false).ID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The API server fails every pod delete once the registration
			// is gone (a delete's dry run is in its body, so the pre-flight
			// is told apart by when it comes: before the registration
			// delete).
			down := true
			var mu sync.Mutex
			var regGone func() bool
			proxy := env.Proxy(t, func(w http.ResponseWriter, r *http.Request) bool {
				mu.Lock()
				defer mu.Unlock()
				if !down || regGone == nil || !regGone() || r.Method != http.MethodDelete || !strings.Contains(r.URL.Path, "/pods/") {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd leader changed","code":503}`))
				return true
			})
			extra := map[string]string{"KUBECONFIG": proxy.Kubeconfig(t)}
			for k, v := range tc.extra {
				extra[k] = v
			}
			w := newWorld(t, extra)
			regID := tc.plant(w)
			mu.Lock()
			regGone = func() bool { return !w.runnerExists(regID) }
			mu.Unlock()
			w.sweep().requireCode(t, 0)
			time.Sleep(pastConfirm)

			failed := w.sweep()
			failed.requireCode(t, 1)
			a := failed.actions(t)["acme-leak"]
			require.NotNil(t, a, "an action line: %v", failed.Logs)
			assert.Equal(t, "error", a["result"])
			assert.Equal(t, "deleted", a["registration_result"])
			assert.Contains(t, a["error"], "etcd leader changed")
			assert.Nil(t, a["event_error"], "no Event was tried for a delete that did not happen")
			assert.Empty(t, w.reapedEvents(), "no Event says the pod was reaped")
			assert.True(t, w.podExists("acme-leak"))
			assert.False(t, w.runnerExists(regID))

			mu.Lock()
			down = false
			mu.Unlock()
			next := w.sweep()
			next.requireCode(t, 0)
			a = next.actions(t)["acme-leak"]
			require.NotNil(t, a, "the next sweep acts on the pod at once: %v", next.Logs)
			assert.Equal(t, tc.verdict, a["verdict"])
			assert.Equal(t, "delete-pod", a["action"], "its registration is gone: looked up by name, then the pod")
			assert.Equal(t, "deleted", a["result"])
			assert.False(t, w.podExists("acme-leak"))
			assert.Equal(t, map[string]int{"acme-leak": 1}, w.reapedEvents())
		})
	}
}
