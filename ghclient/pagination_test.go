package ghclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// endlessList serves pages that never end: every page links to a next one
// and claims total, grown by grow a page, with size runners on page 1 and
// later runners on every later page, each runner new. It counts the
// requests it served.
func endlessList(total, grow, size, later int, served *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		n := later
		if page == 1 {
			n = size
		}
		runners := make([]map[string]any, n)
		for i := range runners {
			id := int64(page)*1000 + int64(i) + 1
			runners[i] = runner(id, fmt.Sprintf("rr-%d", id), "online", false)
		}
		next := fmt.Sprintf("<http://%s%s?per_page=100&page=%d>", r.Host, r.URL.Path, page+1)
		w.Header().Set("Link", next+`; rel="next"`)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": total + grow*(page-1), "runners": runners})
	}
}

// TestListRunnersPageCap: a list whose next links never end is cut off,
// and is then inconsistent: at the first page its own total_count leaves
// no room for, at the pages page 1's total_count implies plus one plus a
// tenth however the later pages' total_count grows, and at the hard
// ceiling whatever total_count says. Before the cap, a total_count of
// 1,000,000 with a next link on every page ran tens of thousands of pages.
func TestListRunnersPageCap(t *testing.T) {
	tests := []struct {
		name                     string
		total, grow, size, later int
		wantRequests             int64
		want                     string
	}{
		{
			name: "total_count 1,000,000: the hard ceiling", total: 1_000_000, size: 100, later: 100,
			wantRequests: maxPages, want: "page 1000 links to a next page, but total_count 1000000 allows at most 1000 pages",
		},
		{
			name: "total_count 250 at 100 a page: no room on page 4", total: 250, size: 100, later: 1,
			wantRequests: 4, want: "page 4 holds 1 runners, more than its total_count 250 leaves for it (0)",
		},
		{
			name: "a server paging by 10: total_count 50 leaves no room on page 6", total: 50, size: 10, later: 1,
			wantRequests: 6, want: "page 6 holds 1 runners, more than its total_count 50 leaves for it (0)",
		},
		{
			name: "a total_count that grows a page a page: 3 pages, plus one", total: 250, grow: 100, size: 100, later: 100,
			wantRequests: 4, want: "page 4 links to a next page, but total_count 250 allows at most 4 pages",
		},
		{
			name: "a total_count of 10,000 that grows a page a page: 100 pages, plus one, plus a tenth", total: 10_000, grow: 100, size: 100, later: 100,
			wantRequests: 111, want: "page 111 links to a next page, but total_count 10000 allows at most 111 pages",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			var served atomic.Int64
			mux.Handle("GET /orgs/octo/actions/runners", endlessList(tc.total, tc.grow, tc.size, tc.later, &served))

			got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, fleet.ErrInconsistent)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, got)
			assert.Nil(t, cache)
			assert.Equal(t, tc.wantRequests, served.Load(), "requests served")
			assert.Equal(t, httpcount.Counts{Requests: tc.wantRequests}, requestCounts(c), "requests sent")
		})
	}
}

// shiftingList serves before for the first request and after for every
// later one: the list changed right after page 1 was read.
type shiftingList struct {
	before, after fakeList
	served        atomic.Int64
}

func (s *shiftingList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.served.Add(1) == 1 {
		s.before.ServeHTTP(w, r)
		return
	}
	s.after.ServeHTTP(w, r)
}

// TestListRunnersRunnerMovedBackAPage: right after page 1 is read, runner 2
// on page 1 is removed and runner 6 registers at the end, so runner 3 moves
// back from page 2 to page 1. The read sees runners 1, 2, 4, 5 and 6: five
// runners, total_count 5, no runner twice, every count agreeing, and runner
// 3 unseen. Revalidating page 1 finds other runners on it: the list moved,
// and is not read again. Every runner either reading of page 1 listed is
// returned (runner 3, which slid, and runner 2, which existed when page 1
// was first read), for presence only.
func TestListRunnersRunnerMovedBackAPage(t *testing.T) {
	c, mux, _ := setup(t, 0)
	l := &shiftingList{}
	l.before.set(
		fakePage{total: 5, etag: `W/"a1"`, runners: []map[string]any{runner(1, "rr-1", "online", false), runner(2, "rr-2", "online", false)}},
		fakePage{total: 5, etag: `W/"a2"`, runners: []map[string]any{runner(3, "rr-3", "online", false), runner(4, "rr-4", "online", false)}},
		fakePage{total: 5, etag: `W/"a3"`, runners: []map[string]any{runner(5, "rr-5", "online", false)}},
	)
	l.after.set(
		fakePage{total: 5, etag: `W/"b1"`, runners: []map[string]any{runner(1, "rr-1", "online", false), runner(3, "rr-3", "online", false)}},
		fakePage{total: 5, etag: `W/"b2"`, runners: []map[string]any{runner(4, "rr-4", "online", false), runner(5, "rr-5", "online", false)}},
		fakePage{total: 5, etag: `W/"b3"`, runners: []map[string]any{runner(6, "rr-6", "online", false)}},
	)
	mux.Handle("GET /orgs/octo/actions/runners", l)

	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.ErrorIs(t, err, fleet.ErrMoved)
	assert.Contains(t, err.Error(), "page 1 changed while later pages were read: runners [2] left it, [3] came")
	var ids []int64
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []int64{1, 3, 4, 5, 6, 2}, ids, "runner 3 seen on page 1 read again; runner 2 from its first reading")
	require.NotNil(t, cache)
	require.Len(t, cache.Pages, 3)
	assert.Equal(t, []string{`W/"b1"`, `W/"b2"`, `W/"b3"`}, []string{cache.Pages[0].ETag, cache.Pages[1].ETag, cache.Pages[2].ETag})
	reqs := l.after.seen()
	var pages, etags []string
	for _, r := range reqs {
		pages = append(pages, strconv.Itoa(r.Page))
		etags = append(etags, r.IfNoneMatch)
	}
	assert.Equal(t, []string{"2", "3", "1"}, pages, "pages 2 and 3, then page 1 again, which moved: no second read")
	assert.Equal(t, []string{"", "", `W/"a1"`}, etags)
	assert.Equal(t, httpcount.Counts{Requests: 4}, requestCounts(c))
}

// simClient starts a simulator with scope org:octo and a token client for
// it.
func simClient(t *testing.T) (*ghsim.Sim, *Client) {
	t.Helper()
	sim := ghsim.New(ghsim.Options{})
	base, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope(orgScope.String())
	c, err := New(Config{BaseURL: base, Token: testToken})
	require.NoError(t, err)
	return sim, c
}

// TestListRunnersShiftLeft reproduces the slide on the simulator: while
// page 2 of 3 is read, a registration on page 1 is removed and a new one
// registers, so runner 101 slides from page 2 to page 1 unseen.
// total_count, the pages and the items all agree; only revalidating page 1
// shows the list moved under the read. The list is not read again: the
// page read again brings the runner that slid, its first reading the one
// that left, and the list is returned as moved, for presence.
func TestListRunnersShiftLeft(t *testing.T) {
	sim, c := simClient(t)
	scope := orgScope.String()
	for range 250 {
		sim.AddRunner(scope, ghsim.Runner{Status: "online"})
	}
	slid := sim.Runners(scope)[100] // the first runner of page 2
	left := sim.Runners(scope)[10]
	sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Page: 2, Times: 1, Before: func() {
		require.True(t, sim.RemoveRunner(scope, left.ID))
		sim.AddRunner(scope, ghsim.Runner{Status: "online"})
	}})

	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	var pages []string
	for _, r := range sim.Requests() {
		pages = append(pages, r.Query)
	}
	assert.Equal(t, httpcount.Counts{Requests: 4}, requestCounts(c))
	require.ErrorIs(t, err, fleet.ErrMoved)
	assert.NotErrorIs(t, err, fleet.ErrInconsistent)
	assert.Contains(t, err.Error(), "page 1 changed while later pages were read")
	assert.Len(t, got, 251, "every runner listed: the 250, the one that joined")
	assert.True(t, slices.ContainsFunc(got, func(r fleet.Registration) bool { return r.ID == slid.ID }), "runner %d, which slid, is listed", slid.ID)
	assert.True(t, slices.ContainsFunc(got, func(r fleet.Registration) bool { return r.ID == left.ID }), "runner %d, listed before it left, is listed", left.ID)
	require.NotNil(t, cache)
	assert.Len(t, cache.Pages, 3)
	assert.Equal(t, []string{"per_page=100&page=1", "per_page=100&page=2", "per_page=100&page=3", "per_page=100&page=1"}, pages)
}

// TestListRunnersRevalidationCost: an unchanged list of 3 pages costs 3
// reads and 2 revalidations answered 304 (which spend no rate limit); read
// again with its cache, all 5 are 304. A one-page list costs one request.
func TestListRunnersRevalidationCost(t *testing.T) {
	sim, c := simClient(t)
	for range 250 {
		sim.AddRunner(orgScope.String(), ghsim.Runner{Status: "online"})
	}
	budget := sim.RateRemaining()
	ctx := context.Background()

	regs, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.NoError(t, err)
	assert.Len(t, regs, 250)
	require.Len(t, cache.Pages, 3)
	assert.Equal(t, httpcount.Counts{Requests: 3 + 2, NotModified: 2}, requestCounts(c))
	assert.Equal(t, budget-3, sim.RateRemaining(), "revalidations cost no rate limit")
	var statuses []int
	for _, r := range sim.Requests() {
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []int{200, 200, 200, 304, 304}, statuses)

	again, cache2, err := c.ListRunners(ctx, orgScope, cache)
	require.NoError(t, err)
	assert.Equal(t, regs, again)
	assert.Equal(t, cache, cache2)
	assert.Equal(t, httpcount.Counts{Requests: 10, NotModified: 7}, requestCounts(c))
	assert.Equal(t, budget-3, sim.RateRemaining())

	one := fleet.Scope{Kind: fleet.OrgScope, Name: "small"}
	sim.AddRunner(one.String(), ghsim.Runner{Status: "online"})
	_, _, err = c.ListRunners(ctx, one, nil)
	require.NoError(t, err)
	assert.Equal(t, httpcount.Counts{Requests: 11, NotModified: 7}, requestCounts(c), "a one-page list needs no revalidation")
}

// TestListRunnersShrinkPastTheRead: 201 runners on three pages, and two of
// them go while page 3 is asked for: page 3 comes back empty, its
// total_count 199 leaving no room for it, and no next link. That is a list
// that moved, not one that contradicts itself: the 200 runners read are
// served, for presence.
func TestListRunnersShrinkPastTheRead(t *testing.T) {
	sim, c := simClient(t)
	scope := orgScope.String()
	for range 201 {
		sim.AddRunner(scope, ghsim.Runner{Status: "online"})
	}
	all := sim.Runners(scope)
	sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Page: 3, Times: 1, Before: func() {
		require.True(t, sim.RemoveRunner(scope, all[0].ID))
		require.True(t, sim.RemoveRunner(scope, all[1].ID))
	}})

	got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
	require.ErrorIs(t, err, fleet.ErrMoved)
	assert.NotErrorIs(t, err, fleet.ErrInconsistent)
	assert.Contains(t, err.Error(), "page 3 reports total_count 199, page 1 reported 201")
	assert.Len(t, got, 200)
	require.NotNil(t, cache)
	assert.Len(t, cache.Pages, 3)
	assert.Equal(t, httpcount.Counts{Requests: 3}, requestCounts(c), "a read that moved needs no revalidation")
}
