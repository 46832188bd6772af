package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// erName is a name of ARC's form: scale set, EphemeralRunnerSet suffix,
// "runner", runner suffix.
const erName = "arc-runner-set-abcde-runner-x1y2z"

// createOwnedPod creates the runner pod of an ARC object, named like it and
// controlled by it, and returns its view.
func createOwnedPod(t *testing.T, owner *unstructured.Unstructured) fleet.Pod {
	t.Helper()
	env := plane.Env(t)
	created := env.RunnerPod(t, owner.GetNamespace(), testenv.RunnerPod{
		Owner:  testenv.ControllerRef(owner),
		Labels: map[string]string{"app": "runner", "actions-ephemeral-runner": "True"},
		Status: podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{})),
	})
	return Mapping{}.View(created)
}

// clearFinalizersAsAdmin does what a returning ARC controller would do to
// a deleting EphemeralRunner: drop its finalizer, so it goes away.
func clearFinalizersAsAdmin(t *testing.T, ns, name string) {
	t.Helper()
	env := plane.Env(t)
	_, err := env.Dynamic.Resource(ephemeralRunners).Namespace(ns).Patch(context.Background(), name,
		types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// ersByName indexes views by namespace/name.
func ersByName(ers []fleet.EphemeralRunner) map[string]fleet.EphemeralRunner {
	m := make(map[string]fleet.EphemeralRunner, len(ers))
	for _, er := range ers {
		m[er.Namespace+"/"+er.Name] = er
	}
	return m
}

// TestListEphemeralRunnersReadsFields creates EphemeralRunners as ARC
// does, in every state the classifier cares about, and checks what the
// view makes of each after a round trip through the API server.
func TestListEphemeralRunnersReadsFields(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "arc")
	tests := []struct {
		name      string
		url       string
		finalizer bool
		status    *testenv.EphemeralRunnerStatus
		// deleted: deleted after its status was written; with the
		// finalizer it stays, deleting.
		deleted     bool
		wantPhase   string
		wantReason  string
		wantMessage string
		wantID      int64
		wantScope   string
	}{
		{name: erName, url: "https://github.com/Acme/API",
			status:    &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234},
			wantPhase: "Running", wantID: 1234, wantScope: "repo:acme/api"},
		{name: "arc-runner-set-abcde-runner-f41l3", url: "https://github.com/acme",
			status:    &testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: 88, Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"},
			wantPhase: "Failed", wantReason: "TooManyPodFailures", wantMessage: "Pod has failed to start more than 5 times",
			wantID: 88, wantScope: "org:acme"},
		{name: "arc-runner-set-abcde-runner-n0st4", url: "https://github.com/enterprises/Big-Corp/",
			wantScope: "enterprise:big-corp"},
		{name: "arc-runner-set-abcde-runner-gh3s1", url: "https://ghes.example.com/platform/builds",
			status:    &testenv.EphemeralRunnerStatus{Phase: "Pending"},
			wantPhase: "Pending", wantScope: "repo:platform/builds"},
		{name: "arc-runner-set-abcde-runner-junk1", url: "https://github.com/acme/api/tree/main",
			status:    &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 5},
			wantPhase: "Running", wantID: 5, wantScope: ""},
		{name: "arc-runner-set-abcde-runner-dy1ng", url: "https://github.com/acme", finalizer: true, deleted: true,
			status:    &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 42},
			wantPhase: "Running", wantID: 42, wantScope: "org:acme"},
	}
	before := time.Now().Add(-time.Second)
	want := map[string]*unstructured.Unstructured{}
	for _, tc := range tests {
		var fin []string
		if tc.finalizer {
			fin = []string{testenv.EphemeralRunnerFinalizer}
		}
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: tc.name, ConfigURL: tc.url, Finalizers: fin, Status: tc.status})
		if tc.deleted {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, tc.name)
		}
		want[tc.name] = env.ARCObject(t, testenv.EphemeralRunners, ns, tc.name)
		require.NotNil(t, want[tc.name], "%s is still there", tc.name)
	}

	c := newClient(t, Options{})
	ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
	require.NoError(t, err)
	require.Len(t, ers, len(tests))
	assert.Equal(t, int64(1), c.Counts().Requests)
	got := ersByName(ers)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := got[ns+"/"+tc.name]
			require.True(t, ok)
			obj := want[tc.name]
			assert.Equal(t, ns, v.Namespace)
			assert.Equal(t, tc.name, v.Name)
			assert.Equal(t, string(obj.GetUID()), v.UID)
			assert.Equal(t, obj.GetResourceVersion(), v.ResourceVersion, "the view holds the latest resourceVersion")
			assert.Equal(t, tc.wantScope, v.ScopeKey)
			assert.Equal(t, tc.wantPhase, v.Phase)
			assert.Equal(t, tc.wantReason, v.Reason())
			assert.Equal(t, tc.wantMessage, v.Message())
			if tc.wantReason == "" && tc.wantMessage == "" {
				assert.Nil(t, v.Note, "a runner with no reason or message holds no note")
			}
			assert.Equal(t, tc.wantID, v.RunnerID)
			assert.WithinDuration(t, obj.GetCreationTimestamp().Time, v.CreatedAt.Time(), 0)
			if tc.deleted {
				require.NotNil(t, obj.GetDeletionTimestamp())
				assert.WithinDuration(t, obj.GetDeletionTimestamp().Time, v.DeletingSince.Time(), 0)
				assert.False(t, v.DeletingSince.Time().Before(before.Truncate(time.Second)), "deleting since the test deleted it")
				assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, v.Finalizers)
			} else {
				assert.True(t, v.DeletingSince.IsZero())
				assert.Empty(t, v.Finalizers)
			}
		})
	}
}

// TestScopeKeyOfConfigURL: spec.githubConfigUrl read as ARC reads it.
func TestScopeKeyOfConfigURL(t *testing.T) {
	tests := []struct {
		url  string
		want string
	}{
		{"https://github.com/acme", "org:acme"},
		{"https://github.com/Acme/", "org:acme"},
		{"https://github.com/acme///", "org:acme"},
		{"https://github.com/acme/api", "repo:acme/api"},
		{"https://github.com/Acme/API/", "repo:acme/api"},
		{"https://github.com/enterprises/big-corp", "enterprise:big-corp"},
		{"https://github.com/Enterprises/Big-Corp/", "enterprise:big-corp"},
		{"https://www.github.com/acme/api", "repo:acme/api"},
		{"https://ghes.example.com/platform", "org:platform"},
		{"https://ghes.example.com:8443/platform/builds", "repo:platform/builds"},
		{"http://ghes.internal/enterprises/corp", "enterprise:corp"},
		{"https://github.com/acme/api?tab=settings", "repo:acme/api"},
		{"https://github.com/acme/api#runners", "repo:acme/api"},
		// Not a scope.
		{"", ""},
		{"https://github.com", ""},
		{"https://github.com/", ""},
		{"https://github.com/acme/api/tree/main", ""},
		{"https://github.com/enterprises/big-corp/extra", ""},
		{"https://github.com/acme//api", ""},
		{"https://github.com/acme%20corp", ""},
		{"github.com/acme/api", ""},
		{"/acme/api", ""},
		{"acme", ""},
		{"ftp://github.com/acme", ""},
		{"https://%zz/acme", ""},
		{"not a url at all", ""},
		// Dot segments and other names GitHub never gives.
		{"https://github.com/..", ""},
		{"https://github.com/acme/..", ""},
		{"https://github.com/../..", ""},
		{"https://github.com/enterprises/..", ""},
		{"https://github.com/-acme", ""},
		{"https://github.com/enterprises/big_corp", ""},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			assert.Equal(t, tc.want, scopeKeyOfConfigURL(tc.url, ""))
		})
	}
	// Held to the GitHub the reaper lists: an org of the same name on
	// another server is another org, its runner ids other runners.
	for _, tc := range []struct{ url, host, want string }{
		{"https://github.com/acme", "github.com", "org:acme"},
		{"https://www.github.com/acme", "github.com", "org:acme"},
		{"https://GitHub.com/acme", "github.com", "org:acme"},
		{"https://ghes.example.com/acme", "github.com", ""},
		{"https://github.com/acme", "ghes.example.com", ""},
		{"https://ghes.example.com:8443/acme", "ghes.example.com:8443", "org:acme"},
		{"https://ghes.example.com/acme", "ghes.example.com:8443", ""},
		// The scheme's default port is no other server.
		{"https://github.com:443/acme", "github.com", "org:acme"},
		{"https://ghes.example.com/acme", "ghes.example.com:443", "org:acme"},
		{"http://ghes.example.com:80/acme", "ghes.example.com", "org:acme"},
		{"https://ghes.example.com:80/acme", "ghes.example.com", ""},
	} {
		t.Run(tc.url+" on "+tc.host, func(t *testing.T) {
			assert.Equal(t, tc.want, scopeKeyOfConfigURL(tc.url, tc.host))
		})
	}
}

// TestListEphemeralRunners checks which EphemeralRunners each list returns
// and that it costs exactly one request per namespace as a watch-list, and
// one per page per namespace in pages.
func TestListEphemeralRunners(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nsA := env.Namespace(t, "arc")
	nsB := env.Namespace(t, "arc")
	nsP := env.Namespace(t, "arc")
	nsEmpty := env.Namespace(t, "arc")
	const url = "https://github.com/acme"
	running := &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 7}

	var mine []string
	add := func(ns, name string) {
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name, ConfigURL: url, Status: running})
		mine = append(mine, ns+"/"+name)
	}
	for i := 1; i <= 2; i++ {
		add(nsA, fmt.Sprintf("arc-runner-set-aaaaa-runner-a%d", i))
	}
	add(nsB, "arc-runner-set-bbbbb-runner-b1")
	for i := 1; i <= 5; i++ {
		add(nsP, fmt.Sprintf("arc-runner-set-ppppp-runner-p%d", i))
	}
	names := func(ns, prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s/arc-runner-set-%s-runner-%c%d", ns, prefix, prefix[0], i+1)
		}
		return out
	}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	aERs, bERs, pERs := names(nsA, "aaaaa", 2), names(nsB, "bbbbb", 1), names(nsP, "ppppp", 5)

	// The all-namespaces list sees every test's EphemeralRunners; its
	// page count follows from how many there are in the cluster.
	all, err := env.Dynamic.Resource(ephemeralRunners).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	total := int64(len(all.Items))
	require.GreaterOrEqual(t, total, int64(len(mine)))

	tests := []struct {
		name         string
		namespaces   []string
		pageSize     int64
		want         []string
		wantPages    int64 // requests in pages
		wantWatchers int64 // requests as watch-lists
		// mineOnly: the list spans all namespaces; only this test's
		// EphemeralRunners are compared.
		mineOnly bool
	}{
		{"one namespace", []string{nsA}, 0, aERs, 1, 1, false},
		{"two namespaces", []string{nsA, nsB}, 0, cat(aERs, bERs), 2, 2, false},
		{"a namespace named twice is listed once", []string{nsA, nsB, nsA}, 0, cat(aERs, bERs), 2, 2, false},
		{"none is an empty list, one request", []string{nsEmpty}, 0, nil, 1, 1, false},
		{"five in pages of two", []string{nsP}, 2, pERs, 3, 1, false},
		{"pages per namespace", []string{nsP, nsB}, 2, cat(pERs, bERs), 4, 2, false},
		{"one per page", []string{nsP}, 1, pERs, 5, 1, false},
		{"all namespaces, one list", nil, 0, mine, 1, 1, true},
		{"all namespaces in pages of two", nil, 2, mine, (total + 1) / 2, 1, true},
	}
	for _, tc := range tests {
		for _, pages := range []bool{false, true} {
			mode, wantRequests := "watch-list", tc.wantWatchers
			if pages {
				mode, wantRequests = "pages", tc.wantPages
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				c := newClient(t, Options{PageSize: tc.pageSize, Pages: pages})
				ers, err := c.ListEphemeralRunners(ctx, tc.namespaces, nil)
				require.NoError(t, err)
				seen := map[string]int{}
				got := make([]string, 0, len(ers))
				for _, er := range ers {
					key := er.Namespace + "/" + er.Name
					seen[key]++
					if tc.mineOnly && er.Namespace != nsA && er.Namespace != nsB && er.Namespace != nsP && er.Namespace != nsEmpty {
						continue
					}
					got = append(got, key)
				}
				for key, n := range seen {
					assert.Equal(t, 1, n, "%s listed once", key)
				}
				if tc.mineOnly {
					assert.Len(t, ers, int(total), "every EphemeralRunner in the cluster")
				}
				want := append([]string(nil), tc.want...)
				sort.Strings(got)
				sort.Strings(want)
				if want == nil {
					want = []string{}
				}
				assert.Equal(t, want, got, "none missing, none twice")
				assert.Equal(t, wantRequests, c.Counts().Requests, "requests")
				for _, er := range ers {
					if er.Namespace == nsA || er.Namespace == nsB || er.Namespace == nsP {
						assert.Equal(t, "Running", er.Phase, "%s converted", er.Name)
						assert.Equal(t, int64(7), er.RunnerID)
						assert.Equal(t, "org:acme", er.ScopeKey)
					}
				}
			})
		}
	}

	t.Run("an empty namespace name among named ones is refused", func(t *testing.T) {
		c := newClient(t, Options{})
		ers, err := c.ListEphemeralRunners(ctx, []string{nsA, ""}, nil)
		require.Error(t, err)
		assert.Nil(t, ers)
		assert.Zero(t, c.Counts().Requests)
	})
	t.Run("a namespace that does not exist is an empty list", func(t *testing.T) {
		c := newClient(t, Options{})
		ers, err := c.ListEphemeralRunners(ctx, []string{nsA + "-missing"}, nil)
		require.NoError(t, err)
		assert.Empty(t, ers)
	})
}

// TestListEphemeralRunnersPageFails: a real API server expires a continue
// token only after etcd compaction, so a small server stands in for it.
// The first page arrives, the second fails: the list must fail, never
// return the first page alone.
func TestListEphemeralRunnersPageFails(t *testing.T) {
	const path = "/apis/actions.github.com/v1alpha1/namespaces/ci/ephemeralrunners"
	item := func(name, uid string) map[string]any {
		return map[string]any{
			"apiVersion": fleet.EphemeralRunnerAPIVersion,
			"kind":       fleet.EphemeralRunnerKind,
			"metadata":   map[string]any{"namespace": "ci", "name": name, "uid": uid, "resourceVersion": "9"},
			"spec":       map[string]any{"githubConfigUrl": "https://github.com/acme"},
		}
	}
	tests := []struct {
		name       string
		second     metav1.Status
		wantErr    string
		wantExpiry bool
	}{
		{"continue token expired", metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: http.StatusGone,
			Message: "The provided continue parameter is too old to display a consistent list result.",
		}, "list ephemeralrunners in ci: continue token of page 2 expired, refusing a partial list", true},
		{"second page fails otherwise", metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Code: http.StatusInternalServerError,
			Message: "etcdserver: request timed out",
		}, "list ephemeralrunners in ci: ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path != path {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				if r.URL.Query().Get("continue") == "" {
					assert.Equal(t, "2", r.URL.Query().Get("limit"))
					_ = json.NewEncoder(w).Encode(map[string]any{
						"apiVersion": fleet.EphemeralRunnerAPIVersion,
						"kind":       "EphemeralRunnerList",
						"metadata":   map[string]any{"continue": "page-2", "resourceVersion": "10"},
						"items":      []any{item("runner-1", "u1"), item("runner-2", "u2")},
					})
					return
				}
				assert.Equal(t, "page-2", r.URL.Query().Get("continue"))
				w.WriteHeader(int(tc.second.Code))
				_ = json.NewEncoder(w).Encode(tc.second)
			}))
			defer srv.Close()

			c, err := New(&rest.Config{Host: srv.URL}, Options{PageSize: 2, Pages: true})
			require.NoError(t, err)
			ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
			require.ErrorContains(t, err, tc.wantErr)
			assert.Nil(t, ers, "no partial list")
			assert.Equal(t, tc.wantExpiry, apierrors.IsResourceExpired(err))
			assert.Equal(t, int64(2), c.Counts().Requests)
			assert.Equal(t, int64(2), calls.Load())
		})
	}
}

// TestDeleteOwner deletes a runner pod's ARC owner as the act step does:
// from the owner reference in the pod's view.
func TestDeleteOwner(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const legacyName = "acme-api-runner-7xk2p"
	tests := []struct {
		name string
		// legacy: the pod's owner is a summerwind Runner.
		legacy    bool
		finalizer bool
		// after runs between the view and the delete.
		after func(t *testing.T, ns, name string)
		want  fleet.Result
		// wantLeft: what is left under the name afterwards: "" nothing,
		// "deleting" the judged object, deleting, "new" another object.
		wantLeft string
	}{
		{name: "deletes the EphemeralRunner", want: fleet.Deleted},
		{name: "an EphemeralRunner with ARC's finalizer is left deleting", finalizer: true,
			want: fleet.Deleted, wantLeft: "deleting"},
		{name: "deletes the legacy Runner", legacy: true, want: fleet.Deleted},
		{name: "already deleted by someone else", after: func(t *testing.T, ns, name string) {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
		}, want: fleet.AlreadyGone},
		{name: "legacy Runner already deleted", legacy: true, after: func(t *testing.T, ns, name string) {
			require.NoError(t, env.Dynamic.Resource(legacyRunners).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		}, want: fleet.AlreadyGone},
		{name: "replaced by a new EphemeralRunner of the same name", after: func(t *testing.T, ns, name string) {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
			env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 99}})
		}, want: fleet.Changed, wantLeft: "new"},
		{name: "legacy Runner replaced", legacy: true, after: func(t *testing.T, ns, name string) {
			require.NoError(t, env.Dynamic.Resource(legacyRunners).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
			env.LegacyRunner(t, ns, testenv.LegacyRunner{Name: name, Repository: "acme/api"})
		}, want: fleet.Changed, wantLeft: "new"},
		{name: "status written after the view still deletes: only the UID is held", after: func(t *testing.T, ns, name string) {
			env.WriteEphemeralRunnerStatus(t, ns, name, testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: 1, Reason: "TooManyPodFailures", Message: "failed"})
		}, want: fleet.Deleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "arc")
			var owner *unstructured.Unstructured
			resource := testenv.EphemeralRunners
			if tc.legacy {
				resource = testenv.LegacyRunners
				owner = env.LegacyRunner(t, ns, testenv.LegacyRunner{Name: legacyName, Repository: "acme/api"})
			} else {
				var fin []string
				if tc.finalizer {
					fin = []string{testenv.EphemeralRunnerFinalizer}
				}
				owner = env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName, Finalizers: fin, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234}})
			}
			createOwnedPod(t, owner)
			c := newClient(t, Options{})
			pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{})
			require.NoError(t, err)
			require.Len(t, pods, 1)
			require.NotNil(t, pods[0].Owner)
			require.True(t, pods[0].Owner.ARCOwned())
			if tc.after != nil {
				tc.after(t, ns, owner.GetName())
			}

			checkThenWrite(t, c, tc.want,
				func() (fleet.Result, error) { return c.DryRun().DeleteOwner(ctx, ns, *pods[0].Owner) },
				func() (fleet.Result, error) { return c.DeleteOwner(ctx, ns, *pods[0].Owner) })

			left := env.ARCObject(t, resource, ns, owner.GetName())
			switch tc.wantLeft {
			case "":
				assert.Nil(t, left, "the owner is gone")
			case "deleting":
				require.NotNil(t, left)
				assert.Equal(t, owner.GetUID(), left.GetUID())
				assert.NotNil(t, left.GetDeletionTimestamp(), "deleting, waiting on its finalizer")
			case "new":
				require.NotNil(t, left, "the new object survives")
				assert.NotEqual(t, owner.GetUID(), left.GetUID())
				assert.Nil(t, left.GetDeletionTimestamp())
			}
		})
	}

	t.Run("refused without a request", func(t *testing.T) {
		ns := env.Namespace(t, "arc")
		owner := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName})
		uid := string(owner.GetUID())
		refused := []struct {
			name  string
			ns    string
			owner fleet.Owner
		}{
			{"a ReplicaSet", ns, fleet.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: erName, UID: uid}},
			{"a StatefulSet", ns, fleet.Owner{APIVersion: "apps/v1", Kind: "StatefulSet", Name: erName, UID: uid}},
			{"an EphemeralRunner of another API version", ns, fleet.Owner{APIVersion: "actions.github.com/v1beta1", Kind: fleet.EphemeralRunnerKind, Name: erName, UID: uid}},
			{"a Runner of ARC's new group", ns, fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: erName, UID: uid}},
			{"no owner at all", ns, fleet.Owner{}},
			{"no UID", ns, fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: erName}},
			{"no namespace", "", fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: erName, UID: uid}},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				c := newClient(t, Options{})
				got, err := c.DeleteOwner(ctx, tc.ns, tc.owner)
				require.Error(t, err)
				assert.Empty(t, got)
				assert.Zero(t, c.Counts().Requests)
			})
		}
		assert.NotNil(t, env.ARCObject(t, testenv.EphemeralRunners, ns, erName), "the EphemeralRunner is untouched")
	})
}

// TestDeleteEphemeralRunner deletes an EphemeralRunner judged from its own
// view (a failed or podless one), held to its UID and resourceVersion.
func TestDeleteEphemeralRunner(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	tests := []struct {
		name         string
		after        func(t *testing.T, ns, name string)
		want         fleet.Result
		wantSurvivor bool
	}{
		{"deletes the EphemeralRunner that was judged", nil, fleet.Deleted, false},
		{"already deleted by someone else", func(t *testing.T, ns, name string) {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
		}, fleet.AlreadyGone, false},
		{"status written after it was observed", func(t *testing.T, ns, name string) {
			env.WriteEphemeralRunnerStatus(t, ns, name, testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234})
		}, fleet.Changed, true},
		{"replaced by a new EphemeralRunner of the same name", func(t *testing.T, ns, name string) {
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
			env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name})
		}, fleet.Changed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "arc")
			env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName, Status: &testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: 1234, Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"}})
			c := newClient(t, Options{})
			ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
			require.NoError(t, err)
			require.Len(t, ers, 1)
			view := ers[0]
			if tc.after != nil {
				tc.after(t, ns, view.Name)
			}

			checkThenWrite(t, c, tc.want,
				func() (fleet.Result, error) { return c.DryRun().DeleteEphemeralRunner(ctx, view) },
				func() (fleet.Result, error) { return c.DeleteEphemeralRunner(ctx, view) })
			left := env.ARCObject(t, testenv.EphemeralRunners, ns, view.Name)
			if tc.wantSurvivor {
				require.NotNil(t, left, "the changed EphemeralRunner survives")
				assert.Nil(t, left.GetDeletionTimestamp())
			} else {
				assert.Nil(t, left)
			}
		})
	}

	t.Run("a view without UID or resourceVersion is refused without a request", func(t *testing.T) {
		c := newClient(t, Options{})
		for _, er := range []fleet.EphemeralRunner{
			{Namespace: "ci", Name: erName, ResourceVersion: "5"},
			{Namespace: "ci", Name: erName, UID: "u1"},
		} {
			got, err := c.DeleteEphemeralRunner(ctx, er)
			require.Error(t, err)
			assert.Empty(t, got)
		}
		assert.Zero(t, c.Counts().Requests)
	})
}

// TestRemoveFinalizers: an EphemeralRunner stuck deleting, its finalizer
// waiting on an ARC controller that is gone, is let go, but only as it was
// observed.
func TestRemoveFinalizers(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		after func(t *testing.T, ns, name string)
		want  fleet.Result
		// wantLeft: "" gone, "same" the judged object still deleting
		// with its finalizer, "new" another object.
		wantLeft string
	}{
		{name: "stuck deleting: the finalizer is removed and it is gone", want: fleet.Deleted},
		{name: "status written after it was observed", after: func(t *testing.T, ns, name string) {
			env.WriteEphemeralRunnerStatus(t, ns, name, testenv.EphemeralRunnerStatus{Phase: "Succeeded", RunnerID: 1234})
		}, want: fleet.Changed, wantLeft: "same"},
		{name: "finished by someone else", after: func(t *testing.T, ns, name string) {
			clearFinalizersAsAdmin(t, ns, name)
		}, want: fleet.AlreadyGone},
		{name: "replaced by a new stuck EphemeralRunner of the same name", after: func(t *testing.T, ns, name string) {
			clearFinalizersAsAdmin(t, ns, name)
			env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name, Finalizers: []string{testenv.EphemeralRunnerFinalizer}})
			env.DeleteARC(t, testenv.EphemeralRunners, ns, name)
		}, want: fleet.Changed, wantLeft: "new"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "arc")
			created := env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName, Finalizers: []string{testenv.EphemeralRunnerFinalizer}, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234}})
			env.DeleteARC(t, testenv.EphemeralRunners, ns, erName)
			c := newClient(t, Options{})
			ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
			require.NoError(t, err)
			require.Len(t, ers, 1)
			view := ers[0]
			require.False(t, view.DeletingSince.IsZero(), "observed stuck deleting")
			require.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, view.Finalizers)
			if tc.after != nil {
				tc.after(t, ns, view.Name)
			}

			checkThenWrite(t, c, tc.want,
				func() (fleet.Result, error) { return c.DryRun().RemoveFinalizers(ctx, view) },
				func() (fleet.Result, error) { return c.RemoveFinalizers(ctx, view) })

			left := env.ARCObject(t, testenv.EphemeralRunners, ns, erName)
			switch tc.wantLeft {
			case "":
				assert.Nil(t, left, "gone")
			case "same", "new":
				require.NotNil(t, left)
				assert.Equal(t, tc.wantLeft == "same", left.GetUID() == created.GetUID())
				assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, left.GetFinalizers(), "the finalizer stays")
				assert.NotNil(t, left.GetDeletionTimestamp())
			}
		})
	}

	t.Run("another controller's finalizer stays, and the object with it", func(t *testing.T) {
		ns := env.Namespace(t, "arc")
		fins := []string{fleet.ARCFinalizer, "example.com/keep", fleet.ARCRegistrationFinalizer}
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName, Finalizers: fins, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234}})
		env.DeleteARC(t, testenv.EphemeralRunners, ns, erName)
		c := newClient(t, Options{})
		ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
		require.NoError(t, err)
		require.Len(t, ers, 1)
		require.Equal(t, fins, ers[0].Finalizers)
		checkThenWrite(t, c, fleet.Deleted,
			func() (fleet.Result, error) { return c.DryRun().RemoveFinalizers(ctx, ers[0]) },
			func() (fleet.Result, error) { return c.RemoveFinalizers(ctx, ers[0]) })
		left := env.ARCObject(t, testenv.EphemeralRunners, ns, erName)
		require.NotNil(t, left, "held by the other controller's finalizer")
		assert.Equal(t, []string{"example.com/keep"}, left.GetFinalizers(), "only ARC's finalizers went")
		assert.NotNil(t, left.GetDeletionTimestamp())

		// Nothing of ARC's is left: nothing is written, nothing sent.
		ers, err = c.ListEphemeralRunners(ctx, []string{ns}, nil)
		require.NoError(t, err)
		before := c.Counts()
		got, err := c.RemoveFinalizers(ctx, ers[0])
		require.NoError(t, err)
		assert.Equal(t, fleet.AlreadyGone, got)
		assert.Zero(t, c.Counts().Sub(before).Requests)
		clearFinalizersAsAdmin(t, ns, erName)
	})

	t.Run("refused without a request", func(t *testing.T) {
		ns := env.Namespace(t, "arc")
		env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: erName, Finalizers: []string{testenv.EphemeralRunnerFinalizer}, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234}})
		c := newClient(t, Options{})
		ers, err := c.ListEphemeralRunners(ctx, []string{ns}, nil)
		require.NoError(t, err)
		require.Len(t, ers, 1)
		live := ers[0]
		require.True(t, live.DeletingSince.IsZero())
		noRV := live
		noRV.ResourceVersion = ""
		noRV.DeletingSince = fleet.StampOf(time.Now())

		before := c.Counts()
		for name, er := range map[string]fleet.EphemeralRunner{"not deleting": live, "no resourceVersion": noRV} {
			got, err := c.RemoveFinalizers(ctx, er)
			require.Error(t, err, name)
			assert.Empty(t, got, name)
		}
		assert.Zero(t, c.Counts().Sub(before).Requests)
		left := env.ARCObject(t, testenv.EphemeralRunners, ns, erName)
		require.NotNil(t, left)
		assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, left.GetFinalizers(), "the live EphemeralRunner keeps ARC's finalizer")
	})
}

func TestARCForbidden(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nsA := env.Namespace(t, "arc")
	nsB := env.Namespace(t, "arc")
	er := env.EphemeralRunner(t, nsA, testenv.EphemeralRunner{Name: erName, Finalizers: []string{testenv.EphemeralRunnerFinalizer}, Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: 1234}})
	env.EphemeralRunner(t, nsB, testenv.EphemeralRunner{Name: erName})
	legacy := env.LegacyRunner(t, nsA, testenv.LegacyRunner{Name: "acme-api-runner-7xk2p", Repository: "acme/api"})
	erPod := createOwnedPod(t, er)
	legacyPod := createOwnedPod(t, legacy)

	// lister may list EphemeralRunners in nsA and nothing else.
	env.Grant(t, nsA, "list-ephemeralrunners", "arc-lister-"+nsA, rbacv1.PolicyRule{APIGroups: []string{ephemeralRunners.Group},
		Resources: []string{ephemeralRunners.Resource}, Verbs: []string{"list"}})

	nobody := userClient(t, "arc-nobody-"+nsA)
	lister := userClient(t, "arc-lister-"+nsA)

	admin := newClient(t, Options{})
	ers, err := admin.ListEphemeralRunners(ctx, []string{nsA}, nil)
	require.NoError(t, err)
	require.Len(t, ers, 1)
	view := ers[0]
	stuck := view
	stuck.DeletingSince = fleet.StampOf(time.Now())

	listIn := func(c *Client, ns ...string) func() error {
		return func() error {
			ers, err := c.ListEphemeralRunners(ctx, ns, nil)
			assert.Nil(t, ers, "no partial list")
			return err
		}
	}
	assertForbidden(t, []forbiddenCase{
		{"no rights: list one namespace", listIn(nobody, nsA)},
		{"no rights: list all namespaces", listIn(nobody)},
		{"no rights: delete EphemeralRunner owner", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.DeleteOwner(ctx, nsA, *erPod.Owner)
		})},
		{"no rights: delete legacy Runner owner", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.DeleteOwner(ctx, nsA, *legacyPod.Owner)
		})},
		{"no rights: delete EphemeralRunner", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.DeleteEphemeralRunner(ctx, view)
		})},
		{"no rights: remove finalizers", refusedWrite(t, func() (fleet.Result, error) {
			return nobody.RemoveFinalizers(ctx, stuck)
		})},
		{"list rights in one namespace: listing two fails whole", listIn(lister, nsA, nsB)},
		{"list rights in one namespace: all namespaces", listIn(lister)},
		{"list rights: delete owner", refusedWrite(t, func() (fleet.Result, error) {
			return lister.DeleteOwner(ctx, nsA, *erPod.Owner)
		})},
		{"list rights: dry-run delete owner", refusedWrite(t, func() (fleet.Result, error) {
			return lister.DryRun().DeleteOwner(ctx, nsA, *erPod.Owner)
		})},
		{"list rights: dry-run delete legacy Runner owner", refusedWrite(t, func() (fleet.Result, error) {
			return lister.DryRun().DeleteOwner(ctx, nsA, *legacyPod.Owner)
		})},
		{"list rights: dry-run delete EphemeralRunner", refusedWrite(t, func() (fleet.Result, error) {
			return lister.DryRun().DeleteEphemeralRunner(ctx, view)
		})},
		{"list rights: dry-run remove finalizers", refusedWrite(t, func() (fleet.Result, error) {
			return lister.DryRun().RemoveFinalizers(ctx, stuck)
		})},
	})

	t.Run("list rights in one namespace: that namespace lists", func(t *testing.T) {
		ers, err := lister.ListEphemeralRunners(ctx, []string{nsA}, nil)
		require.NoError(t, err)
		assert.Len(t, ers, 1)
	})
	t.Run("the refused calls left everything", func(t *testing.T) {
		left := env.ARCObject(t, testenv.EphemeralRunners, nsA, erName)
		require.NotNil(t, left)
		assert.Nil(t, left.GetDeletionTimestamp())
		assert.Equal(t, []string{testenv.EphemeralRunnerFinalizer}, left.GetFinalizers())
		assert.NotNil(t, env.ARCObject(t, testenv.LegacyRunners, nsA, legacy.GetName()))
	})
}

func TestDuplicateUID(t *testing.T) {
	er := func(ns, name, uid string) fleet.EphemeralRunner {
		return fleet.EphemeralRunner{Namespace: ns, Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name string
		ers  []fleet.EphemeralRunner
		i, j int
		dup  bool
	}{
		{"none", nil, 0, 0, false},
		{"one", []fleet.EphemeralRunner{er("a", "r1", "u1")}, 0, 0, false},
		{"distinct", []fleet.EphemeralRunner{er("a", "r1", "u2"), er("a", "r2", "u1"), er("b", "r1", "u3")}, 0, 0, false},
		{"adjacent", []fleet.EphemeralRunner{er("a", "r1", "u1"), er("b", "r1", "u1")}, 0, 1, true},
		{"apart, in list order", []fleet.EphemeralRunner{er("a", "r1", "u9"), er("a", "r2", "u1"), er("b", "r3", "u9")}, 0, 2, true},
		{"the empty UID twice", []fleet.EphemeralRunner{er("a", "r1", ""), er("a", "r2", "")}, 0, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, j, dup := duplicateUID(tc.ers)
			assert.Equal(t, tc.dup, dup)
			if tc.dup {
				assert.Equal(t, []int{tc.i, tc.j}, []int{i, j})
			}
		})
	}
}
