package kube

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// sorted orders views by namespace/name and puts the runner's times in
// UTC, so that two reads of the same pods compare equal.
func sorted(pods []fleet.Pod) []fleet.Pod {
	out := append([]fleet.Pod(nil), pods...)
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	for i := range out {
		out[i].Runner = utc(out[i].Runner)
	}
	return out
}

// TestWatchListGivesWhatPagesGive: over realistic ARC runner pods and pods
// in every container state, one watch-list request gives exactly the views
// that a list in pages gives, and both (trimmed as they are read) give
// exactly the views of the whole pods as client-go's Clientset reads them, and a pod written just before the read is
// always in it (the watch-list is a consistent read, not a possibly stale
// cache).
func TestWatchListGivesWhatPagesGive(t *testing.T) {
	var none corev1.ContainerState
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kube")
	for i := 0; i < 12; i++ {
		_, err := testenv.ApplyARCPod(ctx, env.Client, ns, testenv.ARCPod{Name: fmt.Sprintf("arc-%02d", i), Org: "acme"})
		require.NoError(t, err)
	}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "failed", Labels: map[string]string{"app": "runner"},
		Status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), stateTerminated(1, 0, "Error")))})
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "pending", Labels: map[string]string{"app": "runner"}, Unscheduled: true})
	// Runners that never start, each way View reads why.
	// Scheduled: when the pod got its node, from which the start
	// deadline counts, is read through the trimming too.
	scheduledAt := finished.Add(-30 * time.Minute)
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduledAt)}
	pull := podStatus(corev1.PodPending, containerStatus("dind", stateRunning(), none),
		containerStatus("runner", stateWaiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/acme/runner:nope"`), none))
	pull.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}, scheduled}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "pull", Labels: map[string]string{"app": "runner"}, Sidecar: true, Status: pull})
	noRoom := podStatus(corev1.PodPending)
	noRoom.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		unschedulable("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "no-room", Labels: map[string]string{"app": "runner"}, Status: noRoom})
	initialising := podStatus(corev1.PodPending, containerStatus("runner", stateWaiting("PodInitializing", ""), none))
	initialising.Conditions = []corev1.PodCondition{scheduled}
	initialising.InitContainerStatuses = []corev1.ContainerStatus{containerStatus("dind", stateRunning(), none),
		containerStatus("setup", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "no config",
			StartedAt: started(), FinishedAt: metav1.NewTime(finished)}}, none)}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "init", Labels: map[string]string{"app": "runner"}, Status: initialising,
		InitContainers: []corev1.Container{{Name: "dind", Image: "docker:dind"}, {Name: "setup", Image: "busybox"}}})
	m := Mapping{Scopes: mustScopes(t, "org:acme"), StampLabel: "pool/claimed-by"}

	pages := newClient(t, Options{Pages: true, PageSize: 5})
	want, err := pages.ListPods(ctx, []string{ns}, "", m)
	require.NoError(t, err)
	require.Len(t, want, 17)
	assert.Equal(t, int64(4), pages.Counts().Requests, "17 pods in pages of 5")
	waits := map[string]*fleet.StartWait{}
	for _, p := range want {
		if p.StartWait != nil {
			waits[p.Name] = p.StartWait
		}
	}
	assert.Equal(t, map[string]*fleet.StartWait{
		"pull": {Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/acme/runner:nope"`, Container: "runner",
			ScheduledAt: fleet.StampOf(scheduledAt)},
		"no-room": {Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."},
		"init":    {Reason: "Error", Message: "exit code 3: no config", Container: "setup", Init: true, ScheduledAt: fleet.StampOf(scheduledAt)},
	}, waits, "what holds each runner back, read through the trimming pages")

	// The reference: the same pods as client-go's Clientset decodes them,
	// whole, without the reaper's trimming.
	whole, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, whole.Items, 17)
	assert.Equal(t, sorted(viewsOf(m, whole.Items)), sorted(want), "pages, trimmed, view as the whole pods")

	stream := newClient(t, Options{PageSize: 5})
	got, err := stream.ListPods(ctx, []string{ns}, "", m)
	require.NoError(t, err)
	assert.Equal(t, sorted(want), sorted(got))
	assert.Equal(t, int64(1), stream.Counts().Requests, "one watch-list, whatever the page size")

	t.Run("a pod written just before is always seen, a pod deleted never", func(t *testing.T) {
		c := newClient(t, Options{})
		for i := 0; i < 20; i++ {
			name := fmt.Sprintf("fresh-%02d", i)
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: name, Labels: map[string]string{"app": "fresh"}, Unscheduled: true})
			pods, err := c.ListPods(ctx, []string{ns}, "app=fresh", m)
			require.NoError(t, err)
			require.Contains(t, byName(pods), ns+"/"+name, "written before the read began")
			// An unscheduled pod goes at once, without a grace period.
			require.NoError(t, env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
			pods, err = c.ListPods(ctx, []string{ns}, "app=fresh", m)
			require.NoError(t, err)
			require.NotContains(t, byName(pods), ns+"/"+name, "deleted before the read began")
		}
		assert.Equal(t, int64(40), c.Counts().Requests)
	})
}

// TestWatchListRefusedFallsBackToPages: two real API servers that give no
// watch-list, for the two reasons a user's would: the reaper may list pods
// but not watch them (a Role from before the watch right), and a server
// with the WatchList feature off. Each read costs the refused request and
// the pages, gives the same pods, and warns once.
func TestWatchListRefusedFallsBackToPages(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	cases := []struct {
		name     string
		client   func(t *testing.T, namespaces ...string) (*Client, *bytes.Buffer)
		wantWarn string
	}{
		{
			name: "no watch right",
			client: func(t *testing.T, namespaces ...string) (*Client, *bytes.Buffer) {
				user := "list-only-" + namespaces[0]
				for _, ns := range namespaces {
					env.Grant(t, ns, "list-only", user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
				}
				cfg, err := env.AddUser(user)
				require.NoError(t, err)
				return logged(t, cfg)
			},
			wantWarn: `cannot watch resource \"pods\"`,
		},
		{
			name: "WatchList feature off",
			client: func(t *testing.T, namespaces ...string) (*Client, *bytes.Buffer) {
				off := startedWithFlags(t, map[string]string{"feature-gates": "WatchList=false"})
				for _, ns := range namespaces {
					_, err := off.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
					require.NoError(t, err)
				}
				for i := 0; i < 3; i++ {
					off.RunnerPod(t, namespaces[0], testenv.RunnerPod{Name: fmt.Sprintf("runner-%d", i), Unscheduled: true})
				}
				return logged(t, off.Config)
			},
			wantWarn: `sendInitialEvents is forbidden`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, second := env.Namespace(t, "kube"), env.Namespace(t, "kube")
			for i := 0; i < 3; i++ {
				env.RunnerPod(t, ns, testenv.RunnerPod{Name: fmt.Sprintf("runner-%d", i), Unscheduled: true})
			}
			c, logs := tc.client(t, ns, second)
			pods, err := c.ListPods(ctx, []string{ns, second}, "", Mapping{})
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{ns + "/runner-0", ns + "/runner-1", ns + "/runner-2"}, names(pods))
			assert.Equal(t, int64(3), c.Counts().Requests, "the refused watch-list, then one page in each namespace")
			assert.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("pods listed in pages")), "warned once: %s", logs)
			assert.Contains(t, logs.String(), tc.wantWarn)
		})
	}
}

// startedWithFlags starts a control plane of the test's own, stopped when
// the test ends.
func startedWithFlags(t *testing.T, flags map[string]string) *testenv.Env {
	t.Helper()
	env, err := testenv.StartWithFlags(flags)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// logged is a Client for cfg whose warnings land in the returned buffer.
func logged(t *testing.T, cfg *rest.Config) (*Client, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	c, err := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	return c, &logs
}

func names(pods []fleet.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// marshaler is a generated Kubernetes type's protobuf encoding.
type marshaler interface{ Marshal() ([]byte, error) }

// rawMessage is bytes that marshal as themselves, for a hostile object.
type rawMessage []byte

func (r rawMessage) Marshal() ([]byte, error) { return r, nil }

// enveloped is obj in the Kubernetes protobuf envelope, as a v1 kind.
func enveloped(t *testing.T, kind string, obj marshaler) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	require.NoError(t, err)
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: kind}, Raw: raw}
	b, err := unk.Marshal()
	require.NoError(t, err)
	return append([]byte("k8s\x00"), b...)
}

// frame is one event of a protobuf watch stream: a 4-byte big-endian length
// and a WatchEvent.
func frame(t *testing.T, typ string, object []byte) []byte {
	t.Helper()
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: object}}
	b, err := ev.Marshal()
	require.NoError(t, err)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// TestWatchListContract: a server (or a proxy in front of one) that breaks
// the watch-list contract must cost a list in pages, never a partial or
// invented list. The stand-in server streams what each case says, then
// answers the page list with the pods that are really there.
func TestWatchListContract(t *testing.T) {
	pod := func(name string) []byte {
		return enveloped(t, "Pod", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "ACTIONS_RUNNER_INPUT_JITCONFIG", Value: "secret"}}}}},
		})
	}
	bookmark := func(end bool) []byte {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}}
		if end {
			p.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		}
		return enveloped(t, "Pod", p)
	}
	status := func(code int32, reason metav1.StatusReason, msg string) []byte {
		return enveloped(t, "Status", &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg})
	}
	added := func(name string) []byte { return frame(t, "ADDED", pod(name)) }
	end := frame(t, "BOOKMARK", bookmark(true))
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	cases := []struct {
		name      string
		refuse    int    // answer the watch with this status code instead
		stream    []byte // the watch's answer
		want      []string
		wantPages bool // the page list was read
		wantWarn  string
	}{
		{name: "complete at the end bookmark",
			stream: cat(added("from-stream-1"), frame(t, "BOOKMARK", bookmark(false)), added("from-stream-2"), end, added("after-the-end")),
			want:   []string{"ci/from-stream-1", "ci/from-stream-2"}},
		{name: "the stream ends before the end bookmark",
			stream: cat(added("from-stream-1"), frame(t, "BOOKMARK", bookmark(false))),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "the stream ended before its initial-events-end bookmark"},
		{name: "the stream ends inside an event",
			stream: cat(added("from-stream-1"), added("from-stream-2")[:40]),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "unexpected EOF"},
		{name: "a change event before the end bookmark",
			stream: cat(added("from-stream-1"), frame(t, "MODIFIED", pod("from-stream-1")), end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "a MODIFIED event before the initial-events-end bookmark"},
		{name: "a deletion before the end bookmark",
			stream: cat(added("from-stream-1"), frame(t, "DELETED", pod("from-stream-1")), end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "a DELETED event before the initial-events-end bookmark"},
		{name: "an error event",
			stream: cat(added("from-stream-1"), frame(t, "ERROR", status(500, metav1.StatusReasonInternalError, "storage feature RequestWatchProgress is disabled"))),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "RequestWatchProgress is disabled"},
		{name: "an ADDED event that is not a pod",
			stream: cat(added("from-stream-1"), frame(t, "ADDED", enveloped(t, "ConfigMap", &corev1.ConfigMap{})), end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "a v1 ConfigMap where a v1 Pod belongs"},
		{name: "an event that is not protobuf",
			stream: cat(added("from-stream-1"), frame(t, "ADDED", []byte(`{"kind":"Pod","apiVersion":"v1"}`)), end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "not a protobuf-enveloped object"},
		{name: "a JSON watch stream",
			stream: []byte(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"from-stream-1"}}}` + "\n"),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "the answer is JSON, not a protobuf watch stream"},
		{name: "a frame that is not a watch event",
			stream: cat(added("from-stream-1"), binary.BigEndian.AppendUint32(nil, 3), []byte{0xff, 0xff, 0xff}, end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "malformed protobuf"},
		{name: "an error event that holds no status",
			stream: cat(added("from-stream-1"), frame(t, "ERROR", pod("not-a-status"))),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "a v1 Pod where a v1 Status belongs"},
		{name: "a pod whose metadata is not a message",
			stream: cat(added("from-stream-1"), frame(t, "ADDED", enveloped(t, "Pod", rawMessage(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7)))), end),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "pod field 1 of wire type 0"},
		{name: "a frame longer than any pod",
			stream: cat(added("from-stream-1"), binary.BigEndian.AppendUint32(nil, 64<<20)),
			want:   []string{"ci/from-pages"}, wantPages: true, wantWarn: "a watch event of 67108864 bytes"},
		{name: "the watch refused as invalid", refuse: http.StatusUnprocessableEntity,
			want: []string{"ci/from-pages"}, wantPages: true, wantWarn: "sendInitialEvents is forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var watches, lists int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if r.URL.Path != "/api/v1/namespaces/ci/pods" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if q.Get("watch") != "true" {
					lists++
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
						ListMeta: metav1.ListMeta{ResourceVersion: "9"},
						Items:    []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "from-pages", UID: "uid-p", ResourceVersion: "7"}}}})
					return
				}
				watches++
				// The request is a consistent watch-list.
				assert.Equal(t, "true", q.Get("sendInitialEvents"))
				assert.Equal(t, "NotOlderThan", q.Get("resourceVersionMatch"))
				assert.Empty(t, q.Get("resourceVersion"), "no resourceVersion: a consistent read")
				assert.Equal(t, "true", q.Get("allowWatchBookmarks"))
				assert.Equal(t, "app=runner", q.Get("labelSelector"))
				assert.Equal(t, "30", q.Get("timeoutSeconds"))
				assert.Equal(t, "application/vnd.kubernetes.protobuf;stream=watch", r.Header.Get("Accept"))
				if tc.refuse != 0 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.refuse)
					_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
						Status: metav1.StatusFailure, Code: int32(tc.refuse), Reason: metav1.StatusReasonInvalid, Message: "sendInitialEvents is forbidden"})
					return
				}
				w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
				_, _ = w.Write(tc.stream)
			}))
			defer srv.Close()

			var logs bytes.Buffer
			c, err := New(&rest.Config{Host: srv.URL}, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
			require.NoError(t, err)
			pods, err := c.ListPods(context.Background(), []string{"ci"}, "app=runner", Mapping{})
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.want, names(pods), "nothing the broken stream sent is kept")
			mu.Lock()
			assert.Equal(t, 1, watches)
			assert.Equal(t, tc.wantPages, lists == 1, "read in pages")
			mu.Unlock()
			if tc.wantWarn != "" {
				assert.Contains(t, logs.String(), tc.wantWarn)
			} else {
				assert.Empty(t, logs.String())
			}
		})
	}

	t.Run("a stream cut short in a later namespace gives back its own pods only", func(t *testing.T) {
		// Namespace a streams more pods than a block holds; b's stream
		// breaks after some, in the middle of a block, and b is read in
		// pages: every pod of a stays, none of b's stream does.
		podIn := func(ns, name string) []byte {
			return frame(t, "ADDED", enveloped(t, "Pod", &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), ResourceVersion: "7"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner"}}},
			}))
		}
		var streamA, streamB [][]byte
		var want []string
		for i := range viewBlock + 300 {
			name := fmt.Sprintf("a-%d", i)
			streamA = append(streamA, podIn("a", name))
			want = append(want, "a/"+name)
		}
		streamA = append(streamA, end)
		for i := range 500 {
			streamB = append(streamB, podIn("b", fmt.Sprintf("b-%d", i)))
		}
		want = append(want, "b/from-pages")
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ns := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/pods")
			if r.URL.Query().Get("watch") != "true" {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
					Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-pages", UID: types.UID(ns + "-p"), ResourceVersion: "7"}}}})
				return
			}
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
			switch ns {
			case "a":
				_, _ = w.Write(cat(streamA...))
			default:
				_, _ = w.Write(cat(streamB...)) // no end bookmark
			}
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{Log: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		pods, err := c.ListPods(context.Background(), []string{"a", "b"}, "", Mapping{})
		require.NoError(t, err)
		assert.Equal(t, want, names(pods), "a's pods in order, then b's from its pages")
		assert.Equal(t, len(want), cap(pods), "one slice of their number")
	})

	t.Run("a stream cut short costs one sweep its watch-list, not the next", func(t *testing.T) {
		var mu sync.Mutex
		var watches, lists int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.URL.Query().Get("watch") != "true" {
				lists++
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}})
				return
			}
			watches++
			if watches == 1 {
				_, _ = w.Write(added("from-stream-1")) // and no end
				return
			}
			_, _ = w.Write(cat(added("from-stream-1"), end))
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		first, err := c.ListPods(context.Background(), []string{"ci"}, "", Mapping{})
		require.NoError(t, err)
		assert.Empty(t, first, "the pages, not the stream cut short")
		second, err := c.ListPods(context.Background(), []string{"ci"}, "", Mapping{})
		require.NoError(t, err)
		assert.Equal(t, []string{"ci/from-stream-1"}, names(second))
		mu.Lock()
		assert.Equal(t, 2, watches)
		assert.Equal(t, 1, lists)
		mu.Unlock()
	})

	t.Run("a stream that stalls before its end is given up for pages at the timeout", func(t *testing.T) {
		var mu sync.Mutex
		var lists int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "true" {
				mu.Lock()
				lists++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
					Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "from-pages", UID: "uid-p", ResourceVersion: "7"}}}})
				return
			}
			assert.Equal(t, "1", r.URL.Query().Get("timeoutSeconds"), "never after the client's own timeout")
			_, _ = w.Write(added("from-stream-1"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		defer srv.Close()
		var logs bytes.Buffer
		c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 300 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		require.NoError(t, err)
		pods, err := c.ListPods(context.Background(), []string{"ci"}, "", Mapping{})
		require.NoError(t, err)
		assert.Equal(t, []string{"ci/from-pages"}, names(pods), "nothing of the stalled stream")
		assert.Contains(t, logs.String(), "no answer from the Kubernetes API within 300ms")
		mu.Lock()
		assert.Equal(t, 1, lists)
		mu.Unlock()
	})

	t.Run("one namespace streams, the next falls back, the rest read pages", func(t *testing.T) {
		var mu sync.Mutex
		requests := map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ns := strings.Split(r.URL.Path, "/")[4]
			kind := "list"
			if r.URL.Query().Get("watch") == "true" {
				kind = "watch"
			}
			mu.Lock()
			requests[ns+" "+kind]++
			mu.Unlock()
			if kind == "list" {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
					Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-pages", UID: types.UID("uid-" + ns), ResourceVersion: "7"}}}})
				return
			}
			if ns == "a" {
				_, _ = w.Write(cat(added("from-stream-1"), end))
				return
			}
			_, _ = w.Write(added("from-stream-1")) // cut short
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		pods, err := c.ListPods(context.Background(), []string{"a", "b", "c"}, "", Mapping{})
		require.NoError(t, err)
		// added() names its pods in namespace ci, as the API server
		// would never; what matters is where each came from.
		assert.Equal(t, []string{"ci/from-stream-1", "b/from-pages", "c/from-pages"}, names(pods))
		mu.Lock()
		assert.Equal(t, map[string]int{"a watch": 1, "b watch": 1, "b list": 1, "c list": 1}, requests)
		mu.Unlock()
	})

	t.Run("a sweep that is cancelled mid-stream reads no pages", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var lists int
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "true" {
				mu.Lock()
				lists++
				mu.Unlock()
				return
			}
			_, _ = w.Write(added("from-stream-1"))
			w.(http.Flusher).Flush()
			cancel()
			<-r.Context().Done()
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		pods, err := c.ListPods(ctx, []string{"ci"}, "", Mapping{})
		require.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, pods)
		mu.Lock()
		assert.Zero(t, lists)
		mu.Unlock()
	})
}
