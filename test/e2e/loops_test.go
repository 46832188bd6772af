package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// A scale set whose template runs a runner version GitHub refuses: each of
// its runners exits 7, and its replacement does the same. Through the
// compiled binary against a real API server, the third reap within the
// window is a reap loop: a warning naming the group, the count, the window,
// the fingerprint and the fix, an Event RunnerReapLoop on the
// AutoscalingRunnerSet, and the metric in the Pushgateway; not one reap
// before. While the loop stands the group's dead pods still go, and of its
// unregistered runners one a sweep (the other is loop-held, its mark
// kept); another scale set's unregistered runner, confirmed in the same
// sweep, is not delayed.
func TestReapLoopReportedThroughTheBinary(t *testing.T) {
	pgw := testenv.StartPushgateway(t)
	w := newWorld(t, map[string]string{"REAPER_LOOP_THRESHOLD": "3", "REAPER_PUSHGATEWAY_URL": pgw, "REAPER_METRICS_INSTANCE": "loops"})
	outdated := testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(7, 0, "Error")}
	broken := func(name string, st testenv.PodState) *corev1.Pod {
		return env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: name, Org: "acme", ScaleSet: "broken", PodState: st})
	}
	healthy := func(name string) *corev1.Pod {
		return env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: name, Org: "acme", ScaleSet: "healthy", PodState: testenv.Running()})
	}
	group := "AutoscalingRunnerSet " + w.ns + "/broken"

	// Sweep 1 and 2: one dead runner of the broken scale set each; no loop.
	broken("broken-0", outdated)
	healthy("healthy-0")
	time.Sleep(pastDeadline)
	r1 := w.sweep()
	r1.requireCode(t, 0)
	assert.Equal(t, "deleted", r1.actions(t)["broken-0"]["result"])
	assert.Empty(t, r1.msg("reap loop"), "one reap is no loop")

	broken("broken-1", outdated)
	r2 := w.sweep()
	r2.requireCode(t, 0)
	assert.Equal(t, "deleted", r2.actions(t)["broken-1"]["result"])
	assert.Empty(t, r2.msg("reap loop"), "two reaps are no loop")

	// Sweep 3: the third reap is the loop.
	broken("broken-2", outdated)
	brokenU1 := broken("broken-u1", testenv.Running())
	brokenU2 := broken("broken-u2", testenv.Running())
	healthyU := healthy("healthy-u")
	time.Sleep(pastConfirm)
	r3 := w.sweep()
	r3.requireCode(t, 0)
	assert.Equal(t, "deleted", r3.actions(t)["broken-2"]["result"])
	assert.Equal(t, "deleted", r3.actions(t)["healthy-0"]["result"], "the healthy scale set's runner goes once confirmed")
	loops := r3.msg("reap loop")
	require.Len(t, loops, 1, "stdout:\n%s", r3.Stdout)
	assert.Equal(t, "WARN", loops[0]["level"])
	assert.Equal(t, group, loops[0]["group"])
	assert.EqualValues(t, 3, loops[0]["count"])
	assert.EqualValues(t, 1800, loops[0]["window_seconds"])
	assert.Equal(t, "outdated", loops[0]["fingerprint"])
	assert.Equal(t, "runner version deprecated: update the runner image", loops[0]["fix"])

	evs, err := env.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "RunnerReapLoop").String()})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	ev := evs.Items[0]
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, corev1.ObjectReference{APIVersion: "actions.github.com/v1alpha1", Kind: "AutoscalingRunnerSet", Namespace: w.ns, Name: "broken"}, ev.InvolvedObject)
	assert.Equal(t, "runner-reaper: reap loop: 3 runners of "+group+" reaped within 30m0s, each outdated: runner version deprecated: update the runner image", ev.Message)

	series := pushed(t, pgw, metrics.PromReapLoopActions)
	require.Len(t, series, 1, "one group loops")
	assert.Contains(t, series[0], `group="`+group+`"`)
	assert.Contains(t, series[0], `fingerprint="outdated"`)
	assert.True(t, strings.HasSuffix(series[0], " 3"), series[0])
	loopsNow := pushed(t, pgw, metrics.PromReapLoops)
	require.Len(t, loopsNow, 1)
	assert.True(t, strings.HasSuffix(loopsNow[0], " 1"), loopsNow[0])

	// Sweep 4: the loop stands. Its dead runner goes; of its two confirmed
	// unregistered runners one acts, the older, and the other waits; the
	// other scale set's confirmed runner is not delayed.
	broken("broken-3", outdated)
	time.Sleep(pastConfirm)
	r4 := w.sweep()
	r4.requireCode(t, 0)
	acts := r4.actions(t)
	assert.Equal(t, "deleted", acts["broken-3"]["result"], "a looping group's dead pods still go")
	assert.Equal(t, "deleted", acts["healthy-u"]["result"], "another group is not delayed")
	results := []string{acts["broken-u1"]["result"].(string), acts["broken-u2"]["result"].(string)}
	assert.ElementsMatch(t, []string{"deleted", "loop-held"}, results, "one of the looping group's confirmed runners a sweep")
	held := brokenU2
	if results[0] == "loop-held" {
		held = brokenU1
	}
	assert.True(t, w.podExists(held.Name), "the loop-held runner is left")
	assert.Contains(t, w.marks(), podMarkKey(held), "with its mark")
	assert.False(t, w.podExists(healthyU.Name))
	assert.Len(t, r4.msg("reap loop"), 1)
	assert.EqualValues(t, 4, r4.msg("reap loop")[0]["count"])
}

// pushed are the Pushgateway's exposition lines of the family name.
func pushed(t *testing.T, pgw, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pgw+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			out = append(out, l)
		}
	}
	return out
}

// A bare pool's ReplicaSet whose runners exit 7: its loop's Event goes on
// the ReplicaSet with its UID, so that `kubectl describe replicaset`,
// which selects Events by the object's kind, name, namespace and UID,
// shows it.
func TestReapLoopEventOnTheReplicaSetAsDescribeFindsIt(t *testing.T) {
	w := newWorld(t, map[string]string{"REAPER_LOOP_THRESHOLD": "2"})
	labels := map[string]string{"app": "broken-pool"}
	rs, err := env.Client.AppsV1().ReplicaSets(w.ns).Create(context.Background(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "broken-pool"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "runner:outdated"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}
	outdated := testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(7, 0, "Error")}
	for i, name := range []string{"broken-pool-a", "broken-pool-b"} {
		env.RunnerPod(t, w.ns, testenv.RunnerPod{Name: name, Org: "acme", Owner: owner, PodState: outdated})
		r := w.sweep()
		r.requireCode(t, 0)
		require.Equal(t, "deleted", r.actions(t)[name]["result"], "stdout:\n%s", r.Stdout)
		assert.Len(t, r.msg("reap loop"), i, "sweep %d", i+1)
	}

	// As kubectl describe selects them (describe.SearchEvents).
	sel := fields.Set{
		"involvedObject.kind": "ReplicaSet", "involvedObject.name": rs.Name,
		"involvedObject.namespace": w.ns, "involvedObject.uid": string(rs.UID),
	}.AsSelector().String()
	evs, err := env.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	require.NoError(t, err)
	var loops []corev1.Event
	for _, e := range evs.Items {
		if e.Reason == "RunnerReapLoop" {
			loops = append(loops, e)
		}
	}
	require.Len(t, loops, 1, "the loop's Event is found as describe finds the ReplicaSet's")
	assert.Equal(t, "runner-reaper: reap loop: 2 runners of ReplicaSet "+w.ns+"/broken-pool reaped within 30m0s, each outdated: runner version deprecated: update the runner image", loops[0].Message)
}
