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
// read, except that a runner either read saw busy comes back busy; a list
// whose membership moved is read once more, and is inconsistent only if it
// moves again. Every request is counted: which page, with which ETag, and
// how it was answered.
func TestListRunnersMembershipNotBytes(t *testing.T) {
	// a: five runners on three pages, runner 4 busy, runner 5 offline.
	a := pagesOf("a", 5, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false)})
	aWant := []fleet.Registration{reg(1, true, false), reg(2, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false)}
	// moved: runner 2 left and runner 6 joined, so runner 3 slid back to
	// page 1; pages 2 and 3 changed with it.
	moved := pagesOf("m", 5, list{rv(1, true, false), rv(3, true, false)}, list{rv(4, true, true), rv(5, false, false)}, list{rv(6, true, false)})
	movedWant := []fleet.Registration{reg(1, true, false), reg(3, true, false), reg(4, true, true), reg(5, false, false), reg(6, true, false)}

	tests := []struct {
		name     string
		switches []int
		versions [][]fakePage
		want     []fleet.Registration
		// wantCache is the cache's pages: each one's ETag, and the
		// busy runners it holds.
		wantCache []string
		wantErr   string
		served    []string
		counts    httpcount.Counts
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
			name:      "membership moves on revalidation, then one clean fresh read: the fresh read's runners",
			switches:  []int{3},
			versions:  [][]fakePage{a, moved},
			want:      movedWant,
			wantCache: []string{`"m1" busy []`, `"m2" busy [4]`, `"m3" busy []`},
			served: []string{
				`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`, // read, and page 1 moved
				`p1 "m1" 304`, `p2 "a2" 200`, `p3 "a3" 200`, `p1 "m1" 304`, `p2 "m2" 304`, // read again, with its revalidation
			},
			counts: httpcount.Counts{Requests: 9, NotModified: 3},
		},
		{
			name:      "busy in the first read, idle in the fresh read after a move: busy",
			switches:  []int{3},
			versions:  [][]fakePage{a, pagesOf("m", 5, list{rv(1, true, false), rv(3, true, false)}, list{rv(4, true, false), rv(5, false, false)}, list{rv(6, true, false)})},
			want:      movedWant,
			wantCache: []string{`"m1" busy []`, `"m2" busy []`, `"m3" busy []`},
			served: []string{
				`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`,
				`p1 "m1" 304`, `p2 "a2" 200`, `p3 "a3" 200`, `p1 "m1" 304`, `p2 "m2" 304`,
			},
			counts: httpcount.Counts{Requests: 9, NotModified: 3},
		},
		{
			name:      "membership moves, and a flag flips during the fresh read's revalidation: consistent",
			switches:  []int{3, 7},
			versions:  [][]fakePage{a, moved, append(pagesOf("f", 5, list{rv(1, false, false), rv(3, true, true)}), moved[1:]...)},
			want:      []fleet.Registration{reg(1, false, false), reg(3, true, true), reg(4, true, true), reg(5, false, false), reg(6, true, false)},
			wantCache: []string{`"f1" busy [3]`, `"m2" busy [4]`, `"m3" busy []`},
			served: []string{
				`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`,
				`p1 "m1" 304`, `p2 "a2" 200`, `p3 "a3" 200`, `p1 "m1" 200`, `p2 "m2" 304`,
			},
			counts: httpcount.Counts{Requests: 9, NotModified: 2},
		},
		{
			name:      "a runner joins while page 2 is read: total_count disagrees, the list is read again",
			switches:  []int{1},
			versions:  [][]fakePage{a, pagesOf("j", 6, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false), rv(6, true, false)})},
			want:      append(append([]fleet.Registration(nil), aWant...), reg(6, true, false)),
			wantCache: []string{`"j1" busy []`, `"j2" busy [4]`, `"j3" busy []`},
			served: []string{
				`p1  200`, `p2  200`, // page 2 says 6, page 1 said 5
				`p1 "a1" 200`, `p2 "j2" 304`, `p3  200`, `p1 "j1" 304`, `p2 "j2" 304`,
			},
			counts: httpcount.Counts{Requests: 7, NotModified: 3},
		},
		{
			name:     "membership moves twice: inconsistent",
			switches: []int{3, 5},
			versions: [][]fakePage{a, moved, pagesOf("n", 5, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false), rv(6, true, false)}, list{rv(7, true, false)})},
			wantErr:  "list runners for org:octo: runner list is inconsistent: page 1 changed while later pages were read: runners [2] left it, [3] came, and again on a fresh read: page 1 changed while later pages were read: runners [1] left it, [4] came",
			served: []string{
				`p1  200`, `p2  200`, `p3  200`, `p1 "a1" 200`,
				`p1 "m1" 304`, `p2 "a2" 200`, `p3 "a3" 200`, `p1 "m1" 200`,
			},
			counts: httpcount.Counts{Requests: 8, NotModified: 1},
		},
		{
			name:     "a join on each read: inconsistent",
			switches: []int{1, 3},
			versions: [][]fakePage{
				a,
				pagesOf("j", 6, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false), rv(6, true, false)}),
				pagesOf("k", 7, list{rv(1, true, false), rv(2, true, false)}, list{rv(3, true, false), rv(4, true, true)}, list{rv(5, false, false), rv(6, true, false)}, list{rv(7, true, false)}),
			},
			wantErr: "list runners for org:octo: runner list is inconsistent: page 2 reports total_count 6, page 1 reported 5, and again on a fresh read: page 2 reports total_count 7, page 1 reported 6",
			served:  []string{`p1  200`, `p2  200`, `p1 "a1" 200`, `p2 "j2" 200`},
			counts:  httpcount.Counts{Requests: 4},
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
			assert.Equal(t, tc.counts, c.Counts())
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, fleet.ErrInconsistent)
				assert.Equal(t, tc.wantErr, err.Error())
				assert.Nil(t, got)
				assert.Nil(t, cache)
				return
			}
			require.NoError(t, err)
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
	assert.Equal(t, httpcount.Counts{Requests: 6, NotModified: 3}, c.Counts())
}
