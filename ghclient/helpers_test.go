package ghclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
)

// testToken is the credential the tests use; no error may ever quote it.
const testToken = "ghp_TESTsecretTOKEN0123456789"

// setup starts a test server in go-github's style and a token client for
// it. The base URL is given without its trailing slash on purpose: New
// must add it. The client keeps the runner label ownerLabel ("linux") and
// no other.
func setup(t *testing.T, timeout time.Duration) (*Client, *http.ServeMux, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, Token: testToken, Timeout: timeout, OwnerLabel: ownerLabel})
	require.NoError(t, err)
	return c, mux, srv
}

// ownerLabel is the ownership label setup's clients keep.
const ownerLabel = "linux"

// runner is one item of a list body, in GitHub's shape.
func runner(id int64, name, status string, busy bool, labels ...string) map[string]any {
	ls := make([]map[string]any, len(labels))
	for i, l := range labels {
		ls[i] = map[string]any{"id": i + 1, "name": l, "type": "custom"}
	}
	return map[string]any{"id": id, "name": name, "os": "linux", "status": status, "busy": busy, "labels": ls}
}

// fakePage is one page a fakeList serves.
type fakePage struct {
	total   int
	runners []map[string]any
	// etag, when set, is sent and honoured in If-None-Match.
	etag string
	// next overrides the Link next page: 0 follows on, -1 omits it.
	next int
}

// seen is what a fakeList recorded of one request.
type seen struct {
	Page          int
	PerPage       string
	IfNoneMatch   string
	Authorization string
}

// fakeList serves a paginated runner list at one path the way GitHub does:
// Link headers, ETags and 304s.
type fakeList struct {
	mu       sync.Mutex
	pages    []fakePage
	requests []seen
}

// set replaces the pages served from now on.
func (f *fakeList) set(pages ...fakePage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages = pages
}

// seen returns the requests so far and forgets them.
func (f *fakeList) seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.requests
	f.requests = nil
	return s
}

func (f *fakeList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := 1
	if p := r.URL.Query().Get("page"); p != "" {
		page, _ = strconv.Atoi(p)
	}
	f.requests = append(f.requests, seen{
		Page:          page,
		PerPage:       r.URL.Query().Get("per_page"),
		IfNoneMatch:   r.Header.Get("If-None-Match"),
		Authorization: r.Header.Get("Authorization"),
	})
	if page < 1 || page > len(f.pages) {
		http.Error(w, `{"message":"no such page"}`, http.StatusNotFound)
		return
	}
	p := f.pages[page-1]
	if p.etag != "" {
		w.Header().Set("ETag", p.etag)
		if r.Header.Get("If-None-Match") == p.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	next := p.next
	if next == 0 && page < len(f.pages) {
		next = page + 1
	}
	if next > 0 {
		link := func(n int) string {
			return fmt.Sprintf("<http://%s%s?per_page=100&page=%d>", r.Host, r.URL.Path, n)
		}
		w.Header().Set("Link", link(next)+`; rel="next", `+link(len(f.pages))+`; rel="last"`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	runners := p.runners
	if runners == nil {
		runners = []map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"total_count": p.total, "runners": runners})
}

// Scopes used across the tests, with the list path each must hit.
var (
	repoScope = fleet.Scope{Kind: fleet.RepoScope, Owner: "octo", Name: "hello"}
	orgScope  = fleet.Scope{Kind: fleet.OrgScope, Name: "octo"}
	entScope  = fleet.Scope{Kind: fleet.EnterpriseScope, Name: "big-corp"}
)

// scopeCases pairs each scope kind with its runners path.
func scopeCases() []struct {
	name  string
	scope fleet.Scope
	path  string
} {
	return []struct {
		name  string
		scope fleet.Scope
		path  string
	}{
		{"repo", repoScope, "/repos/octo/hello/actions/runners"},
		{"org", orgScope, "/orgs/octo/actions/runners"},
		{"enterprise", entScope, "/enterprises/big-corp/actions/runners"},
	}
}

// isRateLimited tells whether the client typed err as GitHub's rate limit.
func isRateLimited(err error) bool { return fleet.AsRateLimit(err) != nil }

// requestCounts are c's counts of requests and 304s, without the bytes
// read, which these tests do not count: they prove what reaches the wire.
func requestCounts(c *Client) httpcount.Counts {
	n := c.Counts()
	n.Bytes = 0
	return n
}
