package ghclient

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
)

// script serves a list that changes while it is read: version k answers
// every request after the request numbered switches[k-1] (counted from 1),
// so that a test says exactly between which two requests the list changed.
// It records each request's page, If-None-Match and status.
type script struct {
	mu       sync.Mutex
	versions []*fakeList
	switches []int
	served   []string
}

func newScript(switches []int, versions ...[]fakePage) *script {
	s := &script{switches: switches}
	for _, v := range versions {
		l := &fakeList{}
		l.set(v...)
		s.versions = append(s.versions, l)
	}
	return s
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.served) + 1
	v := 0
	for v < len(s.switches) && n > s.switches[v] {
		v++
	}
	s.served = append(s.served, "")
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.versions[v].ServeHTTP(sw, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[n-1] = fmt.Sprintf("p%s %s %d", r.URL.Query().Get("page"), r.Header.Get("If-None-Match"), sw.status)
}

// rv is a runner of these tests: online unless offline, busy or idle.
func rv(id int64, online, busy bool) map[string]any {
	status := "offline"
	if online {
		status = "online"
	}
	return runner(id, fmt.Sprintf("rr-%d", id), status, busy)
}

// reg is rv as ListRunners returns it.
func reg(id int64, online, busy bool) fleet.Registration {
	return fleet.Registration{ID: id, Name: fmt.Sprintf("rr-%d", id), Online: online, Busy: busy}
}

// pagesOf is a list of total runners, one page per slice, with ETags
// tag1, tag2, ...
func pagesOf(tag string, total int, pages ...[]map[string]any) []fakePage {
	out := make([]fakePage, len(pages))
	for i, p := range pages {
		out[i] = fakePage{total: total, etag: fmt.Sprintf(`"%s%d"`, tag, i+1), runners: p}
	}
	return out
}

type list = []map[string]any

// TestListRunnersMembershipNotBytes: a page read again is judged by its
// runners' ids, the total and the next link, not by its bytes. Flags that
// flip between the read and the revalidation are taken from the fresher
// read, except that a runner either read saw busy comes back busy. A list
// whose membership moved is not read again: it is returned with
// fleet.ErrMoved and every runner it listed, for presence. Every request is
// counted: which page, with which ETag, and how it was answered.
func TestListRunnersMembershipNotBytes(t *testing.T) {
	// a: five runners on three pages, runner 4 busy, runner 5 offline.
	a := pagesOf("a", 5, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false)})
	aWant := []fleet.Registration{reg(1, true, false), reg(2, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false)}
	// moved: runner 2 left and runner 6 joined, so runner 3 slid back to
	// page 1; pages 2 and 3 changed with it.
	moved := pagesOf("m", 5, list{rv(1, true, false), rv(3, true, false)}, list{rv(4, true, true), rv(5, false, false)}, list{rv(6, true, false)})

	tests := []struct {
		name     string
		switches []int
		versions [][]fakePage
		want     []fleet.Registration
		// wantCache is the cache's pages: each one's ETag, and the
		// busy runners it holds.
		wantCache []string
		wantErr   string
		// moved is why the list moved, when it did.
		moved  string
		served []string
		counts httpcount.Counts
	}{
		{
			name:     "busy and status flip on page 1 between the read and its revalidation",
			switches: []int{3},
			versions: [][]fakePage{a, func() []fakePage {
				b := pagesOf("b", 5, list{rv(1, true, true), rv(2, false, false)})
				return append(b, a[1:]...)
			}()},
			want:      []fleet.Registration{reg(1, true, true), reg(2, false, false), reg(3, true, false), reg(4, true, true), reg(5, false, false)},
			wantCache: []string{`"b1" busy [1]`, `"a2" busy [4]`, `"a3" busy []`},
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`, `p2 "a2" 304`},
			counts:    httpcount.Counts{Requests: 5, NotModified: 1},
		},
		{
			name:      "busy only in the re-read: busy",
			switches:  []int{3},
			versions:  [][]fakePage{a, {a[0], {total: 5, etag: `"b2"`, runners: list{rv(3, true, true), rv(4, true, true)}}, a[2]}},
			want:      []fleet.Registration{reg(1, true, false), reg(2, true, false), reg(3, true, true), reg(4, true, true), reg(5, false, false)},
			wantCache: []string{`"a1" busy []`, `"b2" busy [3 4]`, `"a3" busy []`},
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 304`, `p2 "a2" 200`},
			counts:    httpcount.Counts{Requests: 5, NotModified: 1},
		},
		{
			name:      "busy in the read, idle in the re-read: still busy; the cache holds what its ETag stands for",
			switches:  []int{3},
			versions:  [][]fakePage{a, {a[0], {total: 5, etag: `"b2"`, runners: list{rv(3, true, false), rv(4, true, false)}}, a[2]}},
			want:      aWant,
			wantCache: []string{`"a1" busy []`, `"b2" busy []`, `"a3" busy []`},
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 304`, `p2 "a2" 200`},
			counts:    httpcount.Counts{Requests: 5, NotModified: 1},
		},
		{
			name:      "page 1 reordered, same runners: consistent",
			switches:  []int{3},
			versions:  [][]fakePage{a, {{total: 5, etag: `"b1"`, runners: list{rv(2, true, false), rv(1, true, false)}}, a[1], a[2]}},
			want:      []fleet.Registration{reg(2, true, false), reg(1, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false)},
			wantCache: []string{`"b1" busy []`, `"a2" busy [4]`, `"a3" busy []`},
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`, `p2 "a2" 304`},
			counts:    httpcount.Counts{Requests: 5, NotModified: 1},
		},
		{
			name:      "membership moves on revalidation: moved, every runner either reading listed, not read again",
			switches:  []int{3},
			versions:  [][]fakePage{a, moved},
			want:      []fleet.Registration{reg(1, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false), reg(2, true, false)},
			wantCache: []string{`"m1" busy []`, `"a2" busy [4]`, `"a3" busy []`},
			moved:     "page 1 changed while later pages were read: runners [2] left it, [3] came",
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`},
			counts:    httpcount.Counts{Requests: 4},
		},
		{
			name:     "busy on its first reading, idle where it slid to: busy; the cache holds what its ETag stands for",
			switches: []int{3},
			versions: [][]fakePage{
				pagesOf("a", 5, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, true), rv(4, true, true)}, list{rv(5, false, false)}),
				moved,
			},
			want:      []fleet.Registration{reg(1, true, false), reg(3, true, true), reg(4, true, true), reg(5, false, false), reg(2, true, false)},
			wantCache: []string{`"m1" busy []`, `"a2" busy [3 4]`, `"a3" busy []`},
			moved:     "page 1 changed while later pages were read: runners [2] left it, [3] came",
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`},
			counts:    httpcount.Counts{Requests: 4},
		},
		{
			name:      "a runner joins while page 2 is read: total_count disagrees, moved, no revalidation",
			switches:  []int{1},
			versions:  [][]fakePage{a, pagesOf("j", 6, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false), rv(6, true, false)})},
			want:      append(append([]fleet.Registration(nil), aWant...), reg(6, true, false)),
			wantCache: []string{`"a1" busy []`, `"j2" busy [4]`, `"j3" busy []`},
			moved:     "page 2 reports total_count 6, page 1 reported 5",
			served:    []string{`p1  200`, `p2  200`, `p3  200`},
			counts:    httpcount.Counts{Requests: 3},
		},
		{
			name:     "a runner leaves while page 2 is read and runner 3 slides onto page 1, read already: moved, runner 3 unseen",
			switches: []int{1},
			versions: [][]fakePage{a, pagesOf("l", 4, list{rv(1, true, false), rv(3, true, false)}, list{rv(4, true, true), rv(5, false, false)})},
			want:     []fleet.Registration{reg(1, true, false), reg(2, true, false), reg(4, true, true), reg(5, false, false)},
			// Page 2 is the last of the moved list: it links to no page 3.
			wantCache: []string{`"a1" busy []`, `"l2" busy [4]`},
			moved:     "page 2 reports total_count 4, page 1 reported 5",
			served:    []string{`p1  200`, `p2  200`},
			counts:    httpcount.Counts{Requests: 2},
		},
		{
			name:      "a join and a leave between two pages, total_count unchanged: the revalidation finds the runner that slid",
			switches:  []int{1},
			versions:  [][]fakePage{a, pagesOf("s", 5, list{rv(1, true, false), rv(3, true, false)}, list{rv(4, true, true), rv(5, false, false)}, list{rv(6, true, false)})},
			want:      []fleet.Registration{reg(1, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false), reg(6, true, false), reg(2, true, false)},
			wantCache: []string{`"s1" busy []`, `"s2" busy [4]`, `"s3" busy []`},
			moved:     "page 1 changed while later pages were read: runners [2] left it, [3] came",
			served:    []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`},
			counts:    httpcount.Counts{Requests: 4},
		},
		{
			name:     "a page read again that lists a runner twice: inconsistent",
			switches: []int{3},
			versions: [][]fakePage{a, append(pagesOf("d", 5, list{rv(1, true, false), rv(1, true, false)}), a[1:]...)},
			wantErr:  "list runners for org:octo: runner list is inconsistent: page 1 read again: runner 1 is listed twice on page 1",
			served:   []string{`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`},
			counts:   httpcount.Counts{Requests: 4},
		},
		{
			name:      "a one-page list whose flags flip needs no second look",
			switches:  []int{1},
			versions:  [][]fakePage{pagesOf("o", 2, list{rv(1, true, false), rv(2, true, true)}), pagesOf("p", 2, list{rv(1, true, true), rv(2, false, false)})},
			want:      []fleet.Registration{reg(1, true, false), reg(2, true, true)},
			wantCache: []string{`"o1" busy [2]`},
			served:    []string{`p1  200`},
			counts:    httpcount.Counts{Requests: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			s := newScript(tc.switches, tc.versions...)
			mux.Handle("GET /orgs/octo/actions/runners", s)

			got, cache, err := c.ListRunners(context.Background(), orgScope, nil)
			assert.Equal(t, tc.served, s.served, "requests: page, If-None-Match, status")
			assert.Equal(t, tc.counts, requestCounts(c))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, fleet.ErrInconsistent)
				assert.Equal(t, tc.wantErr, err.Error())
				assert.Nil(t, got)
				assert.Nil(t, cache)
				return
			}
			if tc.moved != "" {
				require.ErrorIs(t, err, fleet.ErrMoved)
				assert.NotErrorIs(t, err, fleet.ErrInconsistent)
				assert.Equal(t, "list runners for org:octo: runner list moved while it was read: "+tc.moved, err.Error())
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
			require.NotNil(t, cache)
			var pages []string
			for _, p := range cache.Pages {
				busy := []int64{}
				for _, r := range p.Runners {
					if r.Busy {
						busy = append(busy, r.ID)
					}
				}
				pages = append(pages, fmt.Sprintf("%s busy %v", p.ETag, busy))
			}
			assert.Equal(t, tc.wantCache, pages)
		})
	}
}

// TestListRunnersCacheAfterFlip: the cache a flip leaves behind is the
// re-read, so that the next sweep's conditional requests are all answered
// 304 and show the runners as GitHub last sent them.
func TestListRunnersCacheAfterFlip(t *testing.T) {
	c, mux, _ := setup(t, 0)
	a := pagesOf("a", 3, list{rv(1, true, true), rv(2, true, false)}, list{rv(3, true, false)})
	b := pagesOf("b", 3, list{rv(1, true, false), rv(2, true, false)})
	s := newScript([]int{2}, a, append(b, a[1]))
	mux.Handle("GET /orgs/octo/actions/runners", s)
	ctx := context.Background()

	got, cache, err := c.ListRunners(ctx, orgScope, nil)
	require.NoError(t, err)
	assert.Equal(t, []fleet.Registration{reg(1, true, true), reg(2, true, false), reg(3, true, false)}, got, "busy in the first read")

	again, _, err := c.ListRunners(ctx, orgScope, cache)
	require.NoError(t, err)
	assert.Equal(t, []fleet.Registration{reg(1, true, false), reg(2, true, false), reg(3, true, false)}, again, "idle, as the cached re-read says")
	assert.Equal(t, []string{`p1  200`, `p2  200`, `p1 "a1" 200`, `p1 "b1" 304`, `p2 "a2" 304`, `p1 "b1" 304`}, s.served)
	assert.Equal(t, httpcount.Counts{Requests: 6, NotModified: 3}, requestCounts(c))
}
