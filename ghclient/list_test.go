package ghclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/state"
)

// threePages is a list of five runners over three pages, with ETags.
func threePages() []fakePage {
	return []fakePage{
		{total: 5, etag: `W/"p1"`, runners: []map[string]any{
			runner(1, "rr-a", "online", true, "self-hosted", "linux"),
			runner(2, "rr-b", "offline", false, "self-hosted"),
		}},
		{total: 5, etag: `W/"p2"`, runners: []map[string]any{
			runner(3, "rr-c", "online", false),
			runner(4, "rr-d", "online", true, "self-hosted", "X64", "gpu"),
		}},
		{total: 5, etag: `W/"p3"`, runners: []map[string]any{
			runner(5, "rr-e", "offline", true, "custom-only"),
		}},
	}
}

// threePagesWant is what ListRunners makes of threePages.
func threePagesWant() []fleet.Registration {
	return []fleet.Registration{
		{ID: 1, Name: "rr-a", Online: true, Busy: true, Labels: []string{"linux"}},
		{ID: 2, Name: "rr-b"},
		{ID: 3, Name: "rr-c", Online: true},
		{ID: 4, Name: "rr-d", Online: true, Busy: true},
		{ID: 5, Name: "rr-e", Busy: true},
	}
}

func TestListRunnersPaginatesEveryScope(t *testing.T) {
	for _, tc := range scopeCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			list := &fakeList{}
			list.set(threePages()...)
			mux.Handle("GET "+tc.path, list)

			got, cache, err := c.ListRunners(context.Background(), tc.scope, nil)
			require.NoError(t, err)
			assert.Equal(t, threePagesWant(), got)

			require.NotNil(t, cache)
			require.Len(t, cache.Pages, 3)
			for i, p := range cache.Pages {
				assert.Equal(t, `W/"p`+strconv.Itoa(i+1)+`"`, p.ETag)
				assert.Equal(t, 5, p.TotalCount)
			}
			assert.Equal(t, []int{2, 3, 0}, []int{cache.Pages[0].NextPage, cache.Pages[1].NextPage, cache.Pages[2].NextPage})

			// Three pages, then pages 1 and 2 revalidated with the
			// ETags this read got: answered 304.
			reqs := list.seen()
			require.Len(t, reqs, 5)
			for i, r := range reqs {
				assert.Equal(t, []int{1, 2, 3, 1, 2}[i], r.Page)
				assert.Equal(t, "100", r.PerPage)
				assert.Equal(t, "Bearer "+testToken, r.Authorization)
			}
			for _, r := range reqs[:3] {
				assert.Empty(t, r.IfNoneMatch, "no cache, no conditional request")
			}
			assert.Equal(t, `W/"p1"`, reqs[3].IfNoneMatch)
			assert.Equal(t, `W/"p2"`, reqs[4].IfNoneMatch)
			assert.Equal(t, httpcount.Counts{Requests: 5, NotModified: 2}, requestCounts(c))
		})
	}
}

func TestListRunnersConditional(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	list.set(threePages()...)
	mux.Handle("GET /orgs/octo/actions/runners", list)
	ctx := context.Background()

	first, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.NoError(t, err)
	list.seen()

	second, cache2, err := c.ListRunners(ctx, orgScope, cache)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	assert.Equal(t, cache, cache2)

	reqs := list.seen()
	require.Len(t, reqs, 5, "a 304 page must still lead to the next one; pages 1 and 2 are revalidated")
	for i, r := range reqs {
		assert.Equal(t, `W/"p`+strconv.Itoa([]int{1, 2, 3, 1, 2}[i])+`"`, r.IfNoneMatch)
	}
	// First read: 3 pages + 2 revalidations (304); second: all 5 are 304.
	assert.Equal(t, httpcount.Counts{Requests: 10, NotModified: 7}, requestCounts(c))

	// A page answered 304 is the cached page itself, not a copy: at
	// 100,000 runners a second copy is most of a sweep's memory.
	for i := range cache.Pages {
		assert.Same(t, &cache.Pages[i].Runners[0], &cache2.Pages[i].Runners[0], "page %d", i+1)
	}
	assert.Equal(t, ownerLabel, cache2.Label)
}

func TestListRunnersMixedCache(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	page1 := fakePage{total: 3, etag: `"one"`, runners: []map[string]any{
		runner(1, "rr-a", "online", false), runner(2, "rr-b", "online", false),
	}}
	list.set(page1, fakePage{total: 3, etag: `"two"`, runners: []map[string]any{runner(3, "rr-c", "online", false)}})
	mux.Handle("GET /repos/octo/hello/actions/runners", list)
	ctx := context.Background()

	_, cache, err := c.ListRunners(ctx, repoScope, nil)
	require.NoError(t, err)
	list.seen()

	// Runner 3 took a job: page 2 changes, page 1 does not.
	list.set(page1, fakePage{total: 3, etag: `"two-b"`, runners: []map[string]any{runner(3, "rr-c", "online", true)}})
	got, cache2, err := c.ListRunners(ctx, repoScope, cache)
	require.NoError(t, err)
	assert.Equal(t, []fleet.Registration{
		{ID: 1, Name: "rr-a", Online: true},
		{ID: 2, Name: "rr-b", Online: true},
		{ID: 3, Name: "rr-c", Online: true, Busy: true},
	}, got)
	require.Len(t, cache2.Pages, 2)
	assert.Equal(t, `"one"`, cache2.Pages[0].ETag)
	assert.Equal(t, `"two-b"`, cache2.Pages[1].ETag)

	reqs := list.seen()
	require.Len(t, reqs, 3)
	assert.Equal(t, `"one"`, reqs[0].IfNoneMatch)
	assert.Equal(t, `"two"`, reqs[1].IfNoneMatch)
	assert.Equal(t, `"one"`, reqs[2].IfNoneMatch, "page 1 revalidated after the last page")
	// Each read: 2 pages + 1 revalidation; 304s: the first read's
	// revalidation, and page 1 twice in the second.
	assert.Equal(t, httpcount.Counts{Requests: 6, NotModified: 3}, requestCounts(c))
}

func TestListRunnersShrunkListDropsStalePages(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	list.set(threePages()...)
	mux.Handle("GET /orgs/octo/actions/runners", list)
	ctx := context.Background()
	_, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.NoError(t, err)

	list.set(fakePage{total: 1, etag: `"only"`, runners: []map[string]any{runner(9, "rr-z", "online", false)}})
	got, cache2, err := c.ListRunners(ctx, orgScope, cache)
	require.NoError(t, err)
	assert.Equal(t, []fleet.Registration{{ID: 9, Name: "rr-z", Online: true}}, got)
	require.Len(t, cache2.Pages, 1)
	assert.Equal(t, `"only"`, cache2.Pages[0].ETag)
}

func TestListRunnersEmpty(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	list.set(fakePage{total: 0})
	mux.Handle("GET /orgs/octo/actions/runners", list)
	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	require.NotNil(t, cache)
	assert.Len(t, cache.Pages, 1)
}

func TestListRunnersInconsistent(t *testing.T) {
	r := func(id int64) map[string]any { return runner(id, "rr-"+strconv.FormatInt(id, 10), "online", false) }
	tests := []struct {
		name  string
		pages []fakePage
		// cached, when set, is read first and then replaced by pages.
		cached []fakePage
		want   string
	}{
		{
			name:  "more items than total_count",
			pages: []fakePage{{total: 1, runners: []map[string]any{r(1), r(2)}}},
			want:  "page 1 holds 2 runners, more than its total_count 1 leaves for it (1)",
		},
		{
			name: "a page holds more runners than its own total_count allows, after a move",
			pages: []fakePage{
				{total: 3, runners: []map[string]any{r(1), r(2)}},
				{total: 2, runners: []map[string]any{r(3)}},
			},
			want: "page 2 holds 1 runners, more than its total_count 2 leaves for it (0)",
		},
		{
			name: "a runner listed twice on one read, after a move",
			pages: []fakePage{
				{total: 3, runners: []map[string]any{r(1), r(2)}},
				{total: 4, runners: []map[string]any{r(2), r(4)}},
			},
			want: "runner 2 is listed on page 1 and again on page 2",
		},
		{
			name: "page missing: next skips a page",
			pages: []fakePage{
				{total: 3, next: 3, runners: []map[string]any{r(1)}},
				{total: 3, runners: []map[string]any{r(2)}},
				{total: 3, runners: []map[string]any{r(3)}},
			},
			want: "page 1 links to page 3 as next, want page 2",
		},
		{
			name: "a runner listed twice",
			pages: []fakePage{
				{total: 3, runners: []map[string]any{r(1), r(2)}},
				{total: 3, runners: []map[string]any{r(2)}},
			},
			want: "runner 2 is listed on page 1 and again on page 2",
		},
		{
			name: "an empty page that links on",
			pages: []fakePage{
				{total: 1, runners: []map[string]any{}},
				{total: 1, runners: []map[string]any{r(1)}},
			},
			want: "page 1 is empty but links to a next page",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, newCache, err := listAfter(t, tc.cached, tc.pages)
			require.Error(t, err)
			assert.ErrorIs(t, err, fleet.ErrInconsistent)
			assert.Contains(t, err.Error(), "list runners for org:octo: runner list is inconsistent: "+tc.want)
			assert.Nil(t, got)
			assert.Nil(t, newCache)
		})
	}
}

// TestListRunnersMoved: a list read to its end, every page sound, whose
// counts show that runners came or went while it was read, is no failure:
// it comes back with every runner it listed and with its cache, and an
// error that wraps fleet.ErrMoved (never fleet.ErrInconsistent), so that
// the sweep takes it for presence only.
func TestListRunnersMoved(t *testing.T) {
	r := func(id int64) map[string]any { return runner(id, "rr-"+strconv.FormatInt(id, 10), "online", false) }
	tests := []struct {
		name  string
		pages []fakePage
		// cached, when set, is read first and then replaced by pages.
		cached    []fakePage
		want      string
		ids       []int64
		cacheTags []string
	}{
		{
			name:      "fewer items than total_count",
			pages:     []fakePage{{total: 3, etag: `"a"`, runners: []map[string]any{r(1), r(2)}}},
			want:      "2 runners on 1 pages, total_count is 3",
			ids:       []int64{1, 2},
			cacheTags: []string{`"a"`},
		},
		{
			name: "pages disagree on total_count",
			pages: []fakePage{
				{total: 3, etag: `"a"`, runners: []map[string]any{r(1), r(2)}},
				{total: 4, etag: `"b"`, runners: []map[string]any{r(3)}},
			},
			want:      "page 2 reports total_count 4, page 1 reported 3",
			ids:       []int64{1, 2, 3},
			cacheTags: []string{`"a"`, `"b"`},
		},
		{
			name: "a cached page disagrees with a fresh one",
			cached: []fakePage{
				{total: 3, etag: `"a"`, runners: []map[string]any{r(1), r(2)}},
				{total: 3, etag: `"b"`, runners: []map[string]any{r(3)}},
			},
			pages: []fakePage{
				{total: 3, etag: `"a"`, runners: []map[string]any{r(1), r(2)}},
				{total: 4, etag: `"b2"`, runners: []map[string]any{r(3), r(4)}},
			},
			want:      "page 2 reports total_count 4, page 1 reported 3",
			ids:       []int64{1, 2, 3, 4},
			cacheTags: []string{`"a"`, `"b2"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, newCache, err := listAfter(t, tc.cached, tc.pages)
			require.ErrorIs(t, err, fleet.ErrMoved)
			assert.NotErrorIs(t, err, fleet.ErrInconsistent)
			assert.Equal(t, "list runners for org:octo: runner list moved while it was read: "+tc.want, err.Error())
			var ids []int64
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			assert.Equal(t, tc.ids, ids)
			require.NotNil(t, newCache)
			var tags []string
			for _, p := range newCache.Pages {
				tags = append(tags, p.ETag)
			}
			assert.Equal(t, tc.cacheTags, tags, "the cache holds each page as its ETag stands for it")
		})
	}
}

// listAfter lists a scope that serves pages, after a first list of cached
// (when set) has left its cache.
func listAfter(t *testing.T, cached, pages []fakePage) ([]fleet.Registration, *state.ListCache, error) {
	t.Helper()
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	mux.Handle("GET /orgs/octo/actions/runners", list)
	var cache *state.ListCache
	if cached != nil {
		list.set(cached...)
		var err error
		_, cache, err = c.ListRunners(context.Background(), orgScope, nil)
		require.NoError(t, err)
	}
	list.set(pages...)
	return c.ListRunners(context.Background(), orgScope, cache)
}

func TestListRunnersFailures(t *testing.T) {
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	ok := fakePage{total: 2, runners: []map[string]any{runner(1, "rr-a", "online", false)}}
	tests := []struct {
		name        string
		failPage    int
		status      int
		headers     map[string]string
		body        string
		rateLimited bool
	}{
		{name: "500", failPage: 1, status: 500, body: `{"message":"boom"}`},
		{name: "502 on page 2", failPage: 2, status: 502, body: `bad gateway`},
		{name: "404 scope unknown", failPage: 1, status: 404, body: `{"message":"Not Found"}`},
		{name: "401 bad credentials", failPage: 1, status: 401, body: `{"message":"Bad credentials"}`},
		{
			name: "403 primary rate limit", failPage: 1, status: 403, rateLimited: true,
			headers: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Limit": "5000", "X-Ratelimit-Reset": reset},
			body:    `{"message":"API rate limit exceeded"}`,
		},
		{
			name: "429 primary rate limit on page 2", failPage: 2, status: 429, rateLimited: true,
			headers: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": reset},
			body:    `{"message":"API rate limit exceeded"}`,
		},
		{
			name: "429 with retry-after", failPage: 1, status: 429, rateLimited: true,
			headers: map[string]string{"Retry-After": "60"},
			body:    `{"message":"You have exceeded a secondary rate limit"}`,
		},
		{
			name: "403 with retry-after", failPage: 1, status: 403, rateLimited: true,
			headers: map[string]string{"Retry-After": "30"},
			body:    `{"message":"You have exceeded a secondary rate limit"}`,
		},
		{
			name: "403 secondary rate limit as go-github knows it", failPage: 1, status: 403, rateLimited: true,
			body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`,
		},
		{name: "403 forbidden, not a rate limit", failPage: 1, status: 403, body: `{"message":"Resource not accessible by integration"}`},
		{name: "200 without total_count", failPage: 1, status: 200, body: `{"runners":[]}`},
		{name: "200 without runners", failPage: 1, status: 200, body: `{"total_count":0}`},
		{name: "200 not JSON", failPage: 1, status: 200, body: `<html>`},
		{name: "runner without busy", failPage: 1, status: 200, body: `{"total_count":1,"runners":[{"id":1,"name":"rr-a","status":"online"}]}`},
		{name: "runner without id", failPage: 1, status: 200, body: `{"total_count":1,"runners":[{"name":"rr-a","status":"online","busy":false}]}`},
		{name: "304 to an unconditional request", failPage: 1, status: 304},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			list := &fakeList{}
			list.set(ok, fakePage{total: 2, runners: []map[string]any{runner(2, "rr-b", "online", false)}})
			mux.HandleFunc("GET /orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("page") != strconv.Itoa(tc.failPage) {
					list.ServeHTTP(w, r)
					return
				}
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})

			got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
			require.Error(t, err)
			t.Logf("error: %v", err)
			assert.Nil(t, got)
			assert.Nil(t, cache)
			assert.Contains(t, err.Error(), "list runners for org:octo page "+strconv.Itoa(tc.failPage)+": ")
			assert.NotErrorIs(t, err, fleet.ErrInconsistent, "a failed page is a failure, not an inconsistency")
			assert.Equal(t, tc.rateLimited, isRateLimited(err), "isRateLimited(%v)", err)
			assert.NotContains(t, err.Error(), testToken)
		})
	}
}

func TestListRunnersTimeout(t *testing.T) {
	c, mux, _ := setup(t, 150*time.Millisecond)
	mux.HandleFunc("GET /orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	start := time.Now()
	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Contains(t, err.Error(), "list runners for org:octo page 1: ")
	assert.False(t, isRateLimited(err))
	assert.Nil(t, got)
	assert.Nil(t, cache)
	assert.NotContains(t, err.Error(), testToken)
}

func TestListRunnersContextCanceled(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	list.set(threePages()...)
	mux.Handle("GET /orgs/octo/actions/runners", list)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, cache)
}

func TestListRunnersRejectsBadScope(t *testing.T) {
	c, _, _ := setup(t, 0)
	for _, s := range []fleet.Scope{
		{Kind: fleet.OrgScope, Name: "octo/../../user"},
		{Kind: fleet.RepoScope, Name: "hello"},
		{Kind: fleet.OrgScope, Owner: "x", Name: "octo"},
		{Kind: "team", Name: "octo"},
		{Kind: fleet.EnterpriseScope, Name: "a?b"},
	} {
		_, _, err := c.ListRunners(context.Background(), s, nil)
		assert.Error(t, err, "%+v", s)
	}
	assert.Equal(t, httpcount.Counts{}, requestCounts(c), "a bad scope must not reach the wire")
}

// TestListRunnersRemembersPrimaryRateLimit: after a primary rate limit,
// go-github refuses further requests until the reset without sending them,
// so a rate-limited scope costs nothing more until then.
func TestListRunnersRemembersPrimaryRateLimit(t *testing.T) {
	c, mux, _ := setup(t, 0)
	mux.HandleFunc("GET /orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusForbidden)
	})
	ctx := context.Background()
	_, _, err := c.ListRunners(ctx, orgScope, nil)
	require.Error(t, err)
	require.True(t, isRateLimited(err))

	_, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.Error(t, err)
	assert.True(t, isRateLimited(err), "%v", err)
	assert.Nil(t, cache)
	_, err = c.DeleteRunner(ctx, orgScope, 42)
	require.Error(t, err)
	assert.True(t, isRateLimited(err), "%v", err)
	assert.Equal(t, httpcount.Counts{Requests: 1}, requestCounts(c), "nothing more reached the wire")
}

// A cache is used only under the ownership label its pages were trimmed
// to: under another, a 304 would replay registrations without the label
// that ownership now reads, and a runner of this deployment would never
// look like one.
func TestListRunnersCacheOfAnotherLabel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cacheLabel string
		wantETag   bool
	}{
		{"same label", ownerLabel, true},
		{"another label", "gpu", false},
		{"none (a cache kept every label)", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			list := &fakeList{}
			list.set(fakePage{total: 1, etag: `W/"p1"`, runners: []map[string]any{runner(1, "rr-a", "online", false, "linux", "gpu")}})
			mux.Handle("GET /orgs/octo/actions/runners", list)

			_, cache, err := c.ListRunners(context.Background(), orgScope, nil)
			require.NoError(t, err)
			list.seen()
			cache.Label = tc.cacheLabel
			got, fresh, err := c.ListRunners(context.Background(), orgScope, cache)
			require.NoError(t, err)
			reqs := list.seen()
			require.Len(t, reqs, 1)
			assert.Equal(t, tc.wantETag, reqs[0].IfNoneMatch != "", "If-None-Match sent")
			assert.Equal(t, []fleet.Registration{{ID: 1, Name: "rr-a", Online: true, Labels: []string{"linux"}}}, got)
			assert.Equal(t, ownerLabel, fresh.Label)
		})
	}
}

// Without an ownership label no label is kept at all.
func TestListRunnersNoOwnerLabelKeepsNone(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, Token: testToken})
	require.NoError(t, err)
	list := &fakeList{}
	list.set(threePages()...)
	mux.Handle("GET /orgs/octo/actions/runners", list)
	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.NoError(t, err)
	for _, r := range got {
		assert.Nil(t, r.Labels, "runner %d", r.ID)
	}
	assert.Equal(t, "", cache.Label)
}

// A one-page list that no second reading changed is its cache page's own
// runners, capped so that an append cannot reach into the cache; a runner
// a second reading saw busy makes a copy, so the cache keeps what its ETag
// stands for.
func TestListRunnersSharesOnePage(t *testing.T) {
	c, mux, _ := setup(t, 0)
	list := &fakeList{}
	list.set(fakePage{total: 2, etag: `W/"p1"`, runners: []map[string]any{runner(1, "rr-a", "online", false), runner(2, "rr-b", "online", false)}})
	mux.Handle("GET /orgs/octo/actions/runners", list)
	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Same(t, &cache.Pages[0].Runners[0], &got[0])
	assert.Equal(t, len(got), cap(got))

	busy := registrations([]state.CachedPage{{Runners: []fleet.Registration{{ID: 1}, {ID: 2}}}}, map[int64]bool{2: true})
	assert.Equal(t, []fleet.Registration{{ID: 1}, {ID: 2, Busy: true}}, busy)
}

// A refusal says what an operator most likely has to fix: 401 the
// credential itself, 403 its rights (an enterprise's, a classic token's
// scope), 404 the scope's name or the credential's sight of it. A rate
// limit on a 403 is a rate limit, with no such hint.
func TestListRunnersRefusalsCarryAHint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scope   fleet.Scope
		path    string
		status  int
		headers map[string]string
		want    string
	}{
		{"401", orgScope, "/orgs/octo/actions/runners", 401, nil, "GitHub does not take the credential"},
		{"403", orgScope, "/orgs/octo/actions/runners", 403, nil, "lacks the right to administer the scope's self-hosted runners"},
		{"403 on an enterprise", fleet.Scope{Kind: fleet.EnterpriseScope, Name: "acme"}, "/enterprises/acme/actions/runners", 403, nil, "classic personal access token with `manage_runners:enterprise`"},
		{"404", orgScope, "/orgs/octo/actions/runners", 404, nil, "does not exist under that name, or the credential may not see it"},
		{"403 rate limit", orgScope, "/orgs/octo/actions/runners", 403, map[string]string{"Retry-After": "60"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("GET "+tc.path, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"message":"nope"}`))
			})
			_, _, err := c.ListRunners(context.Background(), tc.scope, nil)
			require.Error(t, err)
			if tc.want == "" {
				require.NotNil(t, fleet.AsRateLimit(err))
				assert.NotContains(t, err.Error(), "credential")
				return
			}
			assert.Nil(t, fleet.AsRateLimit(err))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
