package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/consistencydetector"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// FuzzWatchViewAgreesWithLeanDecoder: whatever EphemeralRunners a page
// holds, the view the watch's store keeps of each (the dynamic client's
// Unstructured, read by readUnstructuredER into erObject.view) is exactly
// the one ListEphemeralRunners' own decoder reads from the same bytes: the
// two read paths see every runner alike. A page only one of them accepts
// is not compared: FuzzReadPageAgreesWithUnstructured holds the decoders
// to accepting the same pages.
func FuzzWatchViewAgreesWithLeanDecoder(f *testing.F) {
	arc, err := json.Marshal(arcRunnerObject(3))
	require.NoError(f, err)
	for _, page := range []string{
		string(erPage(string(arc))),
		string(erPage(rawER{name: "a", meta: `"deletionTimestamp":"2026-03-14T10:00:00Z","finalizers":["x","y"]`, status: `{"phase":"Running","runnerId":7}`}.json())),
		string(erPage(rawER{name: "b", status: `{"phase":"Failed","reason":"TooManyPodFailures","message":"5 failures","jobRequestId":991,"jobRepositoryName":"acme/api","workflowRunId":4242,"jobDisplayName":"build","jobId":"77","runnerId":1e3}`}.json())),
		string(erPage(rawER{name: "c", spec: `{"githubConfigUrl":"https://github.com/enterprises/big"}`, meta: `"name":"c2","finalizers":["a",5]`}.json())),
		string(erPage(rawER{name: "d", spec: `{"githubConfigUrl":"https://ghes.example/acme"}`, status: `{"phase":5,"runnerId":-4,"jobId":"x1"}`}.json())),
		string(erPage(rawER{name: "e", meta: `"creationTimestamp":"0001-01-01T00:00:00Z","deletionTimestamp":"not a time"`, status: `"a string"`}.json())),
		`{"kind":"EphemeralRunnerList","items":[{"metadata":{"name":"n\u0061me","uid":"u"},"status":{"phase":"Running"},"status":{"runnerId":5}}],"metadata":{"continue":"c"}}`,
		`{"kind":"EphemeralRunnerList","items":[{"Metadata":{"name":"x"},"metadata":5,"spec":{"GithubConfigUrl":"https://github.com/a"}}]}`,
		`{"kind":"EphemeralRunnerList","items":[{},{"metadata":{"creationTimestamp":"0001-01-01T00:00:00Z","finalizers":null}}]}`,
	} {
		f.Add(page)
	}
	dec := dynamicDecoder(f)
	f.Fuzz(func(t *testing.T, page string) {
		lean, _, err := readEphemeralRunnerPage(bytes.NewReader([]byte(page)), newListMemo("github.com", nil), nil)
		if err != nil {
			return
		}
		var list unstructured.UnstructuredList
		if _, _, err := dec.Decode([]byte(page), nil, &list); err != nil {
			return
		}
		k := erKind(newERMemo("github.com"))
		require.Len(t, list.Items, len(lean))
		for i := range list.Items {
			it, err := k.transform(&list.Items[i])
			require.NoError(t, err)
			got, ok := k.view(it)
			require.True(t, ok)
			assert.Equal(t, lean[i], *got, "item %d", i)
		}
	})
}

// TestItemsAreTheirOwnTransform: the reflector's watch-list hands the
// store the items its temporary store made, and its list the objects as
// they came: an item's transform is itself, and either way the store
// keeps the same view. An item gives the reflector's stores the metadata
// they key by.
func TestItemsAreTheirOwnTransform(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r-1", UID: "u-1", ResourceVersion: "7"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion, "kind": fleet.EphemeralRunnerKind,
		"metadata": map[string]any{"namespace": "ci", "name": "r-1", "uid": "u-1", "resourceVersion": "8", "finalizers": []any{"a", "b"}},
		"spec":     map[string]any{"githubConfigUrl": "https://github.com/acme"},
		"status":   map[string]any{"phase": "Running", "runnerId": int64(42)},
	}}
	for _, tc := range []struct {
		name string
		obj  any
		k    transformer
		want string
	}{
		{"pod", pod, kindOf(podKind(Mapping{})), "ci/r-1@7"},
		{"ephemeralrunner", u, kindOf(erKind(newERMemo("github.com"))), "ci/r-1@8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, err := tc.k.item(tc.obj)
			require.NoError(t, err)
			again, err := tc.k.item(it)
			require.NoError(t, err)
			assert.Same(t, it, again)
			m, err := meta.Accessor(it)
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.GetNamespace()+"/"+m.GetName()+"@"+m.GetResourceVersion())
			_, err = tc.k.item(&corev1.ConfigMap{})
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), "ConfigMap"), err.Error())
		})
	}
	v, ok := erKind(newERMemo("github.com")).view(mustItem(t, erKind(newERMemo("github.com")).transform, u))
	require.True(t, ok)
	assert.Equal(t, fleet.EphemeralRunner{Namespace: "ci", Name: "r-1", UID: "u-1", ResourceVersion: "8", ScopeKey: "org:acme",
		Phase: "Running", RunnerID: 42, Finalizers: []string{"a", "b"}}, *v)
}

// TestItemsPassClientGosConsistencyCheck: the check client-go runs after a
// watch-list when KUBE_WATCHLIST_INCONSISTENCY_DETECTOR is set (it panics
// on what it cannot read, and on a difference) reads the stores' items, and
// a list's objects transformed, as the same objects.
func TestItemsPassClientGosConsistencyCheck(t *testing.T) {
	pods := []corev1.Pod{*testPod("ci", "a"), *testPod("ci", "b")}
	k := podKind(Mapping{})
	var held []any
	for i := range pods {
		held = append(held, mustItem(t, k.transform, &pods[i]))
	}
	list := func(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
		return &corev1.PodList{Items: pods}, nil
	}
	// Its words go to klog's logger in the context: none.
	ctx := logr.NewContext(context.Background(), logr.Discard())
	assert.NotPanics(t, func() {
		consistencydetector.CheckDataConsistency(ctx, "pods in ci", "10", list, consistencydetector.TransformFunc(k.transform), metav1.ListOptions{},
			func() []any { return held })
	})
	changed := []corev1.Pod{*testPod("ci", "a"), *testPod("ci", "b")}
	changed[1].ResourceVersion = "2"
	assert.Panics(t, func() {
		consistencydetector.CheckDataConsistency(ctx, "pods in ci", "10",
			func(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
				return &corev1.PodList{Items: changed}, nil
			},
			consistencydetector.TransformFunc(k.transform), metav1.ListOptions{}, func() []any { return held })
	}, "a difference is seen")
}

type transformer interface{ item(any) (any, error) }

type kindTransform struct{ f func(any) (any, error) }

func (k kindTransform) item(obj any) (any, error) { return k.f(obj) }

func kindOf[V any](k kind[V]) transformer { return kindTransform{k.transform} }

func mustItem(t *testing.T, f func(any) (any, error), obj any) any {
	t.Helper()
	it, err := f(obj)
	require.NoError(t, err)
	return it
}
