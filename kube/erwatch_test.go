package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// sortedERs orders views by namespace/name, so that a watch-list and pages
// of the same runners compare equal whatever order each gave them in.
func sortedERs(ers []fleet.EphemeralRunner) []fleet.EphemeralRunner {
	out := append([]fleet.EphemeralRunner(nil), ers...)
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// erPages lists EphemeralRunners the way ListEphemeralRunners did before
// the watch-list, and does after it falls back: page by page.
func erPages(ctx context.Context, c *Client, namespaces []string, pageSize int64) ([]fleet.EphemeralRunner, error) {
	scopes := newListMemo(c.githubHost, nil)
	return listNamespaces(ctx, "ephemeralrunners", namespaces, metav1.ListOptions{Limit: pageSize},
		func(ctx context.Context, ns string, opts metav1.ListOptions, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
			return c.ephemeralRunnerPage(ctx, ns, opts, scopes, out)
		}, nil)
}

// createARCRunners creates n EphemeralRunners as ARC writes them
// (arcRunnerObject) in ns, in parallel, and writes the status of most of
// them: every fourth is running a job, pending before registration,
// failed, or has no status yet. The first is then deleted: ARC's
// finalizers keep it, deleting.
func createARCRunners(t *testing.T, env *testenv.Env, ns string, n int) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // no client-side limit: this is set-up, not the subject
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	res := dyn.Resource(ephemeralRunners).Namespace(ns)
	ctx := context.Background()
	create := func(i int) error {
		obj := arcRunnerObject(i)
		meta := obj["metadata"].(map[string]any)
		for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
			delete(meta, k)
		}
		meta["namespace"] = ns
		status := obj["status"].(map[string]any)
		delete(obj, "status")
		created, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		switch i % 4 {
		case 0: // running a job, as built
		case 1:
			status = map[string]any{"phase": "Pending"}
		case 2:
			status = map[string]any{"phase": "Failed", "runnerId": status["runnerId"], "reason": "TooManyPodFailures",
				"message": "Pod has failed to start more than 5 times"}
		case 3:
			return nil
		}
		created.Object["status"] = status
		_, err = res.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i); err != nil {
					errs <- fmt.Errorf("ephemeralrunner %d in %s: %w", i, ns, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	env.DeleteARC(t, ephemeralRunners, ns, fmt.Sprintf("arc-runner-set-abcde-runner-%05d", 0))
}

// TestEphemeralRunnerWatchListGivesWhatPagesGive: over a few hundred
// EphemeralRunners as ARC writes them, in two namespaces, one of them
// deleting, a watch-list per namespace (one request each) gives exactly
// the views that pages give, and both the views of the objects as the
// dynamic client reads them whole.
func TestEphemeralRunnerWatchListGivesWhatPagesGive(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	const perNamespace = 150
	nsA, nsB := env.Namespace(t, "erwatch"), env.Namespace(t, "erwatch")
	createARCRunners(t, env, nsA, perNamespace)
	createARCRunners(t, env, nsB, perNamespace)
	namespaces := []string{nsA, nsB}

	pager := newClient(t, Options{GitHubHost: "github.com"})
	want, err := erPages(ctx, pager, namespaces, 50)
	require.NoError(t, err)
	require.Len(t, want, 2*perNamespace)
	assert.Equal(t, int64(6), pager.Counts().Requests, "three pages of 50 in each namespace")

	// The reference: the same objects read whole, as Unstructured.
	var whole []fleet.EphemeralRunner
	for _, ns := range namespaces {
		list, err := env.Dynamic.Resource(ephemeralRunners).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for i := range list.Items {
			whole = append(whole, unstructuredERView(&list.Items[i], "github.com"))
		}
	}
	assert.Equal(t, sortedERs(whole), sortedERs(want), "pages view as the whole objects")

	c := newClient(t, Options{GitHubHost: "github.com", PageSize: 50})
	got, err := c.ListEphemeralRunners(ctx, namespaces, nil)
	require.NoError(t, err)
	assert.Equal(t, sortedERs(want), sortedERs(got))
	assert.Equal(t, int64(2), c.Counts().Requests, "one watch-list per namespace, whatever the page size")

	views := ersByName(got)
	deleting := views[nsA+"/arc-runner-set-abcde-runner-00000"]
	assert.False(t, deleting.DeletingSince.IsZero(), "deleting")
	assert.Equal(t, testenv.ARCFinalizers(), deleting.Finalizers)
	running := views[nsB+"/arc-runner-set-abcde-runner-00004"]
	assert.Equal(t, "Running", running.Phase)
	assert.Equal(t, int64(100004), running.RunnerID)
	assert.Equal(t, "org:acme", running.ScopeKey)
	assert.Equal(t, &fleet.Job{Owner: "acme", Repo: "api", RunID: 9000004, Name: "build (linux, amd64)", RequestID: 7000004}, running.Job)
	failed := views[nsB+"/arc-runner-set-abcde-runner-00006"]
	assert.Equal(t, "Failed", failed.Phase)
	assert.Equal(t, "TooManyPodFailures", failed.Reason())
	assert.Equal(t, int64(100006), failed.RunnerID)

	t.Run("all namespaces, one watch-list", func(t *testing.T) {
		c := newClient(t, Options{GitHubHost: "github.com"})
		all, err := c.ListEphemeralRunners(ctx, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, int64(1), c.Counts().Requests)
		var mine []fleet.EphemeralRunner
		for _, er := range all {
			if er.Namespace == nsA || er.Namespace == nsB {
				mine = append(mine, er)
			}
		}
		assert.Equal(t, sortedERs(want), sortedERs(mine))
	})

	t.Run("a runner written just before is always seen, one deleted never", func(t *testing.T) {
		c := newClient(t, Options{})
		for i := 0; i < 10; i++ {
			name := fmt.Sprintf("fresh-%02d", i)
			env.EphemeralRunner(t, nsB, testenv.EphemeralRunner{Name: name})
			ers, err := c.ListEphemeralRunners(ctx, []string{nsB}, nil)
			require.NoError(t, err)
			require.Contains(t, ersByName(ers), nsB+"/"+name, "written before the read began")
			env.DeleteARC(t, ephemeralRunners, nsB, name) // no finalizer: gone at once
			ers, err = c.ListEphemeralRunners(ctx, []string{nsB}, nil)
			require.NoError(t, err)
			require.NotContains(t, ersByName(ers), nsB+"/"+name, "deleted before the read began")
		}
		assert.Equal(t, int64(20), c.Counts().Requests)
	})

	t.Run("no watch right: the pages, one refused request later", func(t *testing.T) {
		user := "er-list-only-" + nsA
		env.Grant(t, nsA, "er-list-only", user, rbacv1.PolicyRule{APIGroups: []string{ephemeralRunners.Group},
			Resources: []string{ephemeralRunners.Resource}, Verbs: []string{"list"}})
		cfg, err := env.AddUser(user)
		require.NoError(t, err)
		var logs bytes.Buffer
		c, err := New(cfg, Options{GitHubHost: "github.com", Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		require.NoError(t, err)
		got, err := c.ListEphemeralRunners(ctx, []string{nsA}, nil)
		require.NoError(t, err)
		assert.Len(t, got, perNamespace)
		assert.Equal(t, int64(2), c.Counts().Requests, "the refused watch, one page")
		assert.Contains(t, logs.String(), "ephemeralrunners listed in pages")
		assert.Contains(t, logs.String(), `cannot watch resource \"ephemeralrunners\"`)

		t.Run("no list right either: the pages' Forbidden", func(t *testing.T) {
			_, err := c.ListEphemeralRunners(ctx, []string{nsB}, nil)
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "%v", err)
			assert.Contains(t, err.Error(), `cannot list resource "ephemeralrunners"`)
			assert.Equal(t, int64(4), c.Counts().Requests)
		})
	})
}

// TestEphemeralRunnerWatchListRequest: the watch-list is the request a
// consistent watch-list is, over the ARC client, counted; where no
// namespace is configured it is one request for all of them.
func TestEphemeralRunnerWatchListRequest(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Accept"))
		mu.Unlock()
		name := strings.ReplaceAll(strings.Trim(r.URL.Path, "/"), "/", "-")
		_, _ = w.Write([]byte(erEvent("ADDED", rawER{name: name}.json()) + erEvent("BOOKMARK", erBookmarkJSON(true))))
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 45 * time.Second, PageSize: 7})
	require.NoError(t, err)
	for _, namespaces := range [][]string{{"ci", "cd"}, nil} {
		ers, err := c.ListEphemeralRunners(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.Len(t, ers, max(len(namespaces), 1), "one runner from each watch-list")
	}
	const q = "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=45&watch=true application/json"
	assert.Equal(t, []string{
		"/apis/actions.github.com/v1alpha1/namespaces/ci/ephemeralrunners" + q,
		"/apis/actions.github.com/v1alpha1/namespaces/cd/ephemeralrunners" + q,
		"/apis/actions.github.com/v1alpha1/ephemeralrunners" + q,
	}, got)
	assert.Equal(t, int64(3), c.Counts().Requests)

	t.Run("a namespace that is no path segment is refused", func(t *testing.T) {
		_, err := c.ListEphemeralRunners(context.Background(), []string{"ci/../kube-system"}, nil)
		require.ErrorContains(t, err, `list ephemeralrunners in ci/../kube-system: invalid namespace "ci/../kube-system"`)
		assert.Equal(t, int64(3), c.Counts().Requests)
	})
}

// erEvent is one event of a JSON watch stream, as the API server writes
// it: the type, then the object, and a newline.
func erEvent(typ, object string) string {
	return `{"type":"` + typ + `","object":` + object + "}\n"
}

// erBookmarkJSON is a bookmark of an EphemeralRunner watch as the API
// server writes it; end marks the end of the initial events.
func erBookmarkJSON(end bool) string {
	meta := `"resourceVersion":"4242","creationTimestamp":null`
	if end {
		meta += `,"annotations":{"k8s.io/initial-events-end":"true"}`
	}
	return `{"kind":"EphemeralRunner","apiVersion":"actions.github.com/v1alpha1","metadata":{` + meta + `}}`
}

// erStatusJSON is a failure Status as the API server writes one.
func erStatusJSON(code int, reason metav1.StatusReason, msg string) string {
	b, err := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// erNames is namespace/name of each view.
func erNames(ers []fleet.EphemeralRunner) []string {
	out := make([]string, 0, len(ers))
	for _, er := range ers {
		out = append(out, er.Namespace+"/"+er.Name)
	}
	return out
}

// TestEphemeralRunnerWatchListContract: a server (or a proxy in front of
// one) that breaks the watch-list contract costs a list in pages, never a
// partial or invented list. The stand-in streams what each case says to
// the watch, then answers the page list with the runner that is really
// there.
func TestEphemeralRunnerWatchListContract(t *testing.T) {
	added := func(name string) string {
		return erEvent("ADDED", rawER{name: name, status: `{"phase":"Running","runnerId":7}`}.json())
	}
	end := erEvent("BOOKMARK", erBookmarkJSON(true))
	gone := erStatusJSON(http.StatusGone, metav1.StatusReasonExpired, "too old resource version: 12 (4242)")
	cases := []struct {
		name     string
		refuse   int    // answer the watch with this status code instead
		stream   string // the watch's answer
		want     []string
		wantWarn string // "": no fallback, no warning
	}{
		{name: "complete at the end bookmark",
			stream: added("s-1") + erEvent("BOOKMARK", erBookmarkJSON(false)) + added("s-2") + end + added("after-the-end") + "garbage",
			want:   []string{"ci/s-1", "ci/s-2"}},
		{name: "events with no newline between them, and spaces",
			stream: strings.ReplaceAll(added("s-1")+added("s-2"), "\n", "") + " \n\t " + strings.TrimSuffix(end, "\n"),
			want:   []string{"ci/s-1", "ci/s-2"}},
		{name: "an empty watch-list",
			stream: end,
			want:   []string{}},
		{name: "an odd field is read as zero, as in pages",
			stream: erEvent("ADDED", rawER{name: "s-1", status: `{"phase":"Running","runnerId":"seven"}`}.json()) + end,
			want:   []string{"ci/s-1"}},
		{name: "an ERROR event: 410 Gone",
			stream: added("s-1") + erEvent("ERROR", gone),
			want:   []string{"ci/from-pages"}, wantWarn: "too old resource version"},
		{name: "the stream ends before the end bookmark",
			stream: added("s-1") + erEvent("BOOKMARK", erBookmarkJSON(false)),
			want:   []string{"ci/from-pages"}, wantWarn: "the stream ended before its initial-events-end bookmark"},
		{name: "an end bookmark whose annotations are not all strings is none, as GetAnnotations reads them",
			stream: added("s-1") + erEvent("BOOKMARK", strings.Replace(erBookmarkJSON(true), `"true"}`, `"true","x":5}`, 1)),
			want:   []string{"ci/from-pages"}, wantWarn: "the stream ended before its initial-events-end bookmark"},
		{name: "the stream ends inside an event",
			stream: added("s-1") + added("s-2")[:60],
			want:   []string{"ci/from-pages"}, wantWarn: "unexpected EOF"},
		{name: "an empty answer",
			stream: "",
			want:   []string{"ci/from-pages"}, wantWarn: "the stream ended before its initial-events-end bookmark"},
		{name: "a MODIFIED event before the end bookmark",
			stream: added("s-1") + erEvent("MODIFIED", rawER{name: "s-1"}.json()) + end,
			want:   []string{"ci/from-pages"}, wantWarn: "a MODIFIED event before the initial-events-end bookmark"},
		{name: "a DELETED event before the end bookmark",
			stream: added("s-1") + erEvent("DELETED", rawER{name: "s-1"}.json()) + end,
			want:   []string{"ci/from-pages"}, wantWarn: "a DELETED event before the initial-events-end bookmark"},
		{name: "an ADDED object of another kind",
			stream: added("s-1") + erEvent("ADDED", `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ci","uid":"u-cm"}}`) + end,
			want:   []string{"ci/from-pages"}, wantWarn: `a \"v1\" \"ConfigMap\" where a actions.github.com/v1alpha1 EphemeralRunner belongs`},
		{name: "an ADDED object of another version",
			stream: erEvent("ADDED", strings.Replace(rawER{name: "s-1"}.json(), "v1alpha1", "v1beta1", 1)) + end,
			want:   []string{"ci/from-pages"}, wantWarn: `a \"actions.github.com/v1beta1\" \"EphemeralRunner\" where`},
		{name: "an ADDED object that does not say its kind",
			stream: erEvent("ADDED", `{"metadata":{"name":"s-1","namespace":"ci","uid":"u-s-1"}}`) + end,
			want:   []string{"ci/from-pages"}, wantWarn: `a \"\" \"\" where`},
		{name: "an ADDED object null",
			stream: erEvent("ADDED", `null`) + end,
			want:   []string{"ci/from-pages"}, wantWarn: `an ADDED event: a \"\" \"\" where`},
		{name: "an ADDED object that is not an object",
			stream: erEvent("ADDED", `"s-1"`) + end,
			want:   []string{"ci/from-pages"}, wantWarn: "an ADDED event: an EphemeralRunner that is not an object"},
		{name: "the end bookmark of another kind",
			stream: added("s-1") + erEvent("BOOKMARK", strings.Replace(erBookmarkJSON(true), "EphemeralRunner", "Pod", 1)),
			want:   []string{"ci/from-pages"}, wantWarn: "a BOOKMARK event: "},
		{name: "garbage",
			stream: "\x00\x01\xffnot json at all",
			want:   []string{"ci/from-pages"}, wantWarn: "invalid character"},
		{name: "garbage after an event",
			stream: added("s-1") + "}{" + end,
			want:   []string{"ci/from-pages"}, wantWarn: "invalid character"},
		{name: "a list, not a stream of events",
			stream: string(erPage(rawER{name: "s-1"}.json())),
			want:   []string{"ci/from-pages"}, wantWarn: "a watch event without a type and an object"},
		{name: "an array",
			stream: "[" + strings.TrimSuffix(added("s-1"), "\n") + "]",
			want:   []string{"ci/from-pages"}, wantWarn: "the answer is not a stream of JSON watch events ([)"},
		{name: "a protobuf watch stream",
			stream: "\x00\x00\x00\x10k8s\x00\n\x02v1\x12\x03Pod",
			want:   []string{"ci/from-pages"}, wantWarn: "invalid character"},
		{name: "each object before its type, as an encoder that sorts keys writes it",
			stream: `{"object":` + rawER{name: "s-1"}.json() + `,"type":"ADDED"}` + `{"object":` + rawER{name: "s-2"}.json() + `,"type":"ADDED"}` +
				`{"object":` + erBookmarkJSON(true) + `,"type":"BOOKMARK"}`,
			want: []string{"ci/s-1", "ci/s-2"}},
		{name: "an object before its type, of another kind",
			stream: `{"object":{"kind":"Pod","apiVersion":"v1"},"type":"ADDED"}` + end,
			want:   []string{"ci/from-pages"}, wantWarn: `an ADDED event: a \"v1\" \"Pod\" where`},
		{name: "two objects in one event",
			stream: strings.TrimSuffix(strings.TrimSuffix(added("s-1"), "\n"), "}") + `,"object":` + rawER{name: "s-2"}.json() + "}" + end,
			want:   []string{"ci/from-pages"}, wantWarn: "a watch event with two of its object"},
		{name: "two types in one event",
			stream: `{"type":"ADDED","type":"BOOKMARK","object":` + erBookmarkJSON(true) + "}",
			want:   []string{"ci/from-pages"}, wantWarn: "a watch event with two of its type"},
		{name: "an event with more than a type and an object",
			stream: `{"type":"ADDED","object":` + rawER{name: "s-1"}.json() + `,"extra":{"a":[1,2]}}` + end,
			want:   []string{"ci/s-1"}},
		{name: "an event without an object",
			stream: `{"type":"ADDED"}` + end,
			want:   []string{"ci/from-pages"}, wantWarn: "a watch event without a type and an object"},
		{name: "a type that is not a string",
			stream: `{"type":1,"object":{}}` + end,
			want:   []string{"ci/from-pages"}, wantWarn: "a watch event's type is a number, not a string"},
		{name: "an ERROR event that holds no Status",
			stream: added("s-1") + erEvent("ERROR", rawER{name: "s-2"}.json()),
			want:   []string{"ci/from-pages"}, wantWarn: `an ERROR event: a \"actions.github.com/v1alpha1\" \"EphemeralRunner\" where a v1 Status belongs`},
		{name: "the watch refused: 403",
			refuse: http.StatusForbidden,
			want:   []string{"ci/from-pages"}, wantWarn: `cannot watch resource \"ephemeralrunners\"`},
		{name: "the watch refused as invalid",
			refuse: http.StatusUnprocessableEntity,
			want:   []string{"ci/from-pages"}, wantWarn: "sendInitialEvents is forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.refuse != 0 {
					reason, msg := metav1.StatusReasonForbidden, `ephemeralrunners.actions.github.com is forbidden: User "reaper" cannot watch resource "ephemeralrunners"`
					if tc.refuse == http.StatusUnprocessableEntity {
						reason, msg = metav1.StatusReasonInvalid, "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.refuse)
					_, _ = w.Write([]byte(erStatusJSON(tc.refuse, reason, msg)))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.stream))
			})
			var logs bytes.Buffer
			c, err := New(&rest.Config{Host: srv.URL}, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
			require.NoError(t, err)
			ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, erNames(ers), "nothing the broken stream sent is kept")
			watches, lists := count()
			assert.Equal(t, 1, watches)
			if tc.wantWarn == "" {
				assert.Zero(t, lists)
				assert.Equal(t, int64(1), c.Counts().Requests)
				assert.Empty(t, logs.String())
				return
			}
			assert.Equal(t, 1, lists, "read in pages")
			assert.Equal(t, int64(2), c.Counts().Requests)
			assert.Equal(t, 1, strings.Count(logs.String(), "ephemeralrunners listed in pages: the API server gave no watch-list"))
			assert.Contains(t, logs.String(), "ephemeralrunner watch-list unavailable: ")
			assert.Contains(t, logs.String(), tc.wantWarn)
		})
	}

	t.Run("the ERROR event's Status is the error, as the API server's", func(t *testing.T) {
		srv, _ := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(added("s-1") + erEvent("ERROR", gone)))
		})
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.streamEphemeralRunners(context.Background(), "ci", newListMemo("", nil), []fleet.EphemeralRunner{{Name: "before"}})
		require.ErrorIs(t, err, errNoWatchList)
		assert.True(t, apierrors.IsResourceExpired(err), "%v", err)
		var st apierrors.APIStatus
		require.True(t, errors.As(err, &st))
		assert.Equal(t, int32(http.StatusGone), st.Status().Code)
		assert.Equal(t, []string{"/before"}, erNames(ers), "what was there before is kept, the stream's dropped")
	})

	t.Run("forbidden to watch and to list: the pages' Forbidden", func(t *testing.T) {
		var mu sync.Mutex
		var requests int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			mu.Unlock()
			verb := "list"
			if r.URL.Query().Get("watch") == "true" {
				verb = "watch"
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(erStatusJSON(http.StatusForbidden, metav1.StatusReasonForbidden, `User "reaper" cannot `+verb+` resource "ephemeralrunners"`)))
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci", "cd"}, nil)
		require.Error(t, err)
		assert.Nil(t, ers)
		assert.True(t, apierrors.IsForbidden(err))
		assert.ErrorContains(t, err, `list ephemeralrunners in ci: User "reaper" cannot list resource "ephemeralrunners"`)
		assert.Equal(t, int64(2), c.Counts().Requests)
		assert.Equal(t, 2, requests)
	})

	t.Run("a plain watch, sendInitialEvents ignored: the pages at the timeout", func(t *testing.T) {
		srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, "1", r.URL.Query().Get("timeoutSeconds"), "never after the client's own timeout")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(added("s-1") + added("s-2")))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		var logs bytes.Buffer
		c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 300 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		require.NoError(t, err)
		began := time.Now()
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond)
		assert.Equal(t, []string{"ci/from-pages"}, erNames(ers), "nothing of the stalled stream")
		assert.Contains(t, logs.String(), "no answer from the Kubernetes API within 300ms")
		watches, lists := count()
		assert.Equal(t, 1, watches)
		assert.Equal(t, 1, lists)
		assert.Equal(t, int64(2), c.Counts().Requests)
	})

	t.Run("a watch never answered: the timeout fails the list, no pages", func(t *testing.T) {
		srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		})
		c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
		require.ErrorIs(t, err, ErrTimeout)
		assert.NotErrorIs(t, err, errNoWatchList)
		assert.Nil(t, ers)
		watches, lists := count()
		assert.Equal(t, 1, watches)
		assert.Zero(t, lists)
		assert.Equal(t, int64(1), c.Counts().Requests)
	})

	t.Run("a sweep cancelled mid-stream reads no pages", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(added("s-1")))
			w.(http.Flusher).Flush()
			cancel()
			<-r.Context().Done()
		})
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(ctx, []string{"ci"}, nil)
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, errNoWatchList)
		assert.Nil(t, ers)
		_, lists := count()
		assert.Zero(t, lists)
		assert.Equal(t, int64(1), c.Counts().Requests)
	})

	t.Run("one UID twice in the stream fails the whole list", func(t *testing.T) {
		srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(added("s-1") + added("s-1") + end))
		})
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
		require.ErrorContains(t, err, `list ephemeralrunners: two runners under UID "u-s-1" (ci/s-1 and ci/s-1)`)
		assert.Nil(t, ers)
		_, lists := count()
		assert.Zero(t, lists)
		assert.Equal(t, int64(1), c.Counts().Requests)
	})

	t.Run("one UID in a stream and in the next namespace's pages fails the whole list", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Query().Get("watch") != "true" {
				_, _ = fmt.Fprintf(w, `{"kind":"EphemeralRunnerList","items":[%s]}`, rawER{name: "s-1"}.json())
				return
			}
			if strings.Contains(r.URL.Path, "/namespaces/a/") {
				_, _ = w.Write([]byte(added("s-1") + end))
				return
			}
			_, _ = w.Write([]byte(added("s-1"))) // cut short: pages
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"a", "b"}, nil)
		require.ErrorContains(t, err, `two runners under UID "u-s-1"`)
		assert.Nil(t, ers)
		assert.Equal(t, int64(3), c.Counts().Requests, "a's watch-list, b's and b's page")
	})

	t.Run("one namespace streams, the next falls back, the rest read pages", func(t *testing.T) {
		var mu sync.Mutex
		requests := map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ns := strings.Split(r.URL.Path, "/")[5]
			kind := "list"
			if r.URL.Query().Get("watch") == "true" {
				kind = "watch"
			}
			mu.Lock()
			requests[ns+" "+kind]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if kind == "list" {
				_, _ = fmt.Fprintf(w, `{"kind":"EphemeralRunnerList","items":[%s]}`, rawER{name: "from-pages-" + ns}.json())
				return
			}
			if ns == "a" {
				_, _ = w.Write([]byte(added("from-stream") + end))
				return
			}
			_, _ = w.Write([]byte(added("cut-short")))
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"a", "b", "c"}, nil)
		require.NoError(t, err)
		// rawER names every runner's namespace ci, as no API server
		// would; what matters is where each came from.
		assert.Equal(t, []string{"ci/from-stream", "ci/from-pages-b", "ci/from-pages-c"}, erNames(ers))
		mu.Lock()
		assert.Equal(t, map[string]int{"a watch": 1, "b watch": 1, "b list": 1, "c list": 1}, requests)
		mu.Unlock()
		assert.Equal(t, int64(4), c.Counts().Requests)

		// The next call tries the watch-list again.
		_, err = c.ListEphemeralRunners(context.Background(), []string{"a", "b", "c"}, nil)
		require.NoError(t, err)
		mu.Lock()
		assert.Equal(t, 2, requests["b watch"])
		mu.Unlock()
	})

	t.Run("pages only: no watch is sent", func(t *testing.T) {
		for _, opts := range []Options{{Pages: true}, {Compress: true}} {
			srv, count := erContractServer(t, func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("a watch with %+v", opts)
			})
			c, err := New(&rest.Config{Host: srv.URL}, opts)
			require.NoError(t, err)
			ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
			require.NoError(t, err)
			assert.Equal(t, []string{"ci/from-pages"}, erNames(ers))
			watches, lists := count()
			assert.Zero(t, watches)
			assert.Equal(t, 1, lists)
			assert.Equal(t, int64(1), c.Counts().Requests)
		}
	})
}

// erContractServer is a stand-in API server for the EphemeralRunners of
// namespace ci: it answers a watch with watch, after checking that it is
// the consistent watch-list, and a list with one page holding the runner
// from-pages. count says how many of each it was sent.
func erContractServer(t *testing.T, watch http.HandlerFunc) (*httptest.Server, func() (watches, lists int)) {
	t.Helper()
	var mu sync.Mutex
	var watches, lists int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/actions.github.com/v1alpha1/namespaces/ci/ephemeralrunners" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			mu.Lock()
			lists++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunnerList","metadata":{"resourceVersion":"4242"},"items":[%s]}`,
				rawER{name: "from-pages", status: `{"phase":"Failed"}`}.json())
			return
		}
		mu.Lock()
		watches++
		mu.Unlock()
		assert.Equal(t, "true", q.Get("sendInitialEvents"))
		assert.Equal(t, "NotOlderThan", q.Get("resourceVersionMatch"))
		assert.False(t, q.Has("resourceVersion"), "no resourceVersion: a consistent read")
		assert.Equal(t, "true", q.Get("allowWatchBookmarks"))
		assert.False(t, q.Has("limit"), "a watch-list has no pages")
		assert.Equal(t, "application/json", r.Header.Get("Accept"))
		watch(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return watches, lists
	}
}

// arcWatchList is a JSON watch-list of n realistic EphemeralRunners as the
// API server streams one: an ADDED event for each, type first, and the end
// bookmark. sorted writes each event's keys sorted instead, the object
// first, as an encoder of maps would.
func arcWatchList(tb testing.TB, n int, sorted bool) []byte {
	tb.Helper()
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		obj, err := json.Marshal(arcRunnerObject(i))
		require.NoError(tb, err)
		if sorted {
			b.WriteString(`{"object":` + string(obj) + `,"type":"ADDED"}` + "\n")
		} else {
			b.WriteString(erEvent("ADDED", string(obj)))
		}
	}
	b.WriteString(erEvent("BOOKMARK", erBookmarkJSON(true)))
	return b.Bytes()
}

// TestWatchDecodesAsPagesDo: the same objects read as a watch-list and as
// a page give the same views, with every odd field read the same lenient
// way.
func TestWatchDecodesAsPagesDo(t *testing.T) {
	objs := []string{
		rawER{name: "a", status: `{"phase":"Running","runnerId":"abc"}`}.json(),
		rawER{name: "b", status: `"broken"`}.json(),
		rawER{name: "c", spec: `5`, status: `{"phase":"Pending","runnerId":7.0}`}.json(),
		rawER{name: "d", meta: `"deletionTimestamp":"2026-03-14T10:00:00Z","finalizers":["x","y"]`, status: `{"phase":"Running"}`}.json(),
		rawER{name: "e", meta: `"creationTimestamp":"yesterday","finalizers":["z"]`}.json(),
		rawER{name: "f", status: `{"phase":"Failed","jobRequestId":991,"jobRepositoryName":"acme/api","workflowRunId":4242,"jobId":"77"}`}.json(),
	}
	for i := 0; i < 20; i++ {
		b, err := json.Marshal(arcRunnerObject(i))
		require.NoError(t, err)
		objs = append(objs, string(b))
	}
	want, _, err := readEphemeralRunnerPage(bytes.NewReader(erPage(objs...)), newListMemo("github.com", nil), nil)
	require.NoError(t, err)
	var stream strings.Builder
	for _, o := range objs {
		stream.WriteString(erEvent("ADDED", o))
	}
	stream.WriteString(erEvent("BOOKMARK", erBookmarkJSON(true)))
	for _, r := range []io.Reader{strings.NewReader(stream.String()), halfReader{strings.NewReader(stream.String())}} {
		got, err := readEphemeralRunnerWatch(r, newListMemo("github.com", nil), nil)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

// BenchmarkEphemeralRunnerWatch decodes 500 realistic EphemeralRunners
// into views as a JSON watch-list, as the API server writes it and with
// each object before its type (held, then decoded), and, for comparison,
// as one list page.
func BenchmarkEphemeralRunnerWatch(b *testing.B) {
	const n = 500
	run := func(name string, body []byte, f func([]byte) ([]fleet.EphemeralRunner, error)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				ers, err := f(body)
				if err != nil {
					b.Fatal(err)
				}
				if len(ers) != n {
					b.Fatalf("%d views", len(ers))
				}
			}
		})
	}
	watch := func(body []byte) ([]fleet.EphemeralRunner, error) {
		return readEphemeralRunnerWatch(bytes.NewReader(body), newListMemo("github.com", nil), nil)
	}
	run("watch", arcWatchList(b, n, false), watch)
	run("watch-object-first", arcWatchList(b, n, true), watch)
	run("page", arcPage(b, n), func(body []byte) ([]fleet.EphemeralRunner, error) {
		ers, _, err := readEphemeralRunnerPage(bytes.NewReader(body), newListMemo("github.com", nil), nil)
		return ers, err
	})
}
