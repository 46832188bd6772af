package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/google/go-github/v60/github"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
)

// perPage is GitHub's maximum page size: the fewer pages, the fewer
// requests a sweep costs.
const perPage = 100

// maxPages is the hard ceiling on one runner list: 1,000 pages, 100,000
// registrations at per_page=100, some ten times the largest fleets a
// janitor of one deployment sees, and at a real round trip of 100-300 ms
// more than a one-minute sweep could read anyway. It stops a server whose
// total_count and next links go on for ever; past it the list is
// inconsistent.
const maxPages = 1000

// ListRunners reads a scope's whole runner list, one request per page and
// never one per runner. A page the cache holds with an ETag is asked for
// with If-None-Match; a 304 (which costs no rate limit) reuses the cached
// page. After the last page, every earlier page is asked for once more
// with the ETag this read got for it: a runner that slid back a page while
// later pages were read would otherwise go unseen with every count still
// agreeing, and an unchanged page answers 304 at no rate-limit cost. A
// one-page list needs no second look. The registrations and the new cache
// are returned only when every page was read, none changed, and the list
// adds up; otherwise the error says why (it wraps fleet.ErrInconsistent when the
// pages do not add up, and is a *fleet.RateLimitError when GitHub said
// rate-limited) and the cache is nil, so that a caller keeps its old cache
// and draws no conclusion.
func (c *Client) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	path, err := runnersPath(scope)
	if err != nil {
		return nil, nil, fmt.Errorf("list runners: %w", err)
	}
	list := listCheck{firstPageOn: make(map[int64]int), ceiling: maxPages}
	for page := 1; ; page++ {
		p, err := c.fetchPage(ctx, path, page, cachedPage(cache, page))
		if err != nil {
			return nil, nil, fmt.Errorf("list runners for %s page %d: %w", scope, page, err)
		}
		if err := list.add(page, p); err != nil {
			return nil, nil, fmt.Errorf("list runners for %s: %w: %w", scope, fleet.ErrInconsistent, err)
		}
		if p.NextPage == 0 {
			break
		}
	}
	if err := list.complete(); err != nil {
		return nil, nil, fmt.Errorf("list runners for %s: %w: %w", scope, fleet.ErrInconsistent, err)
	}
	for n := 1; n < len(list.pages); n++ {
		read := &list.pages[n-1]
		again, err := c.fetchPage(ctx, path, n, read)
		if err != nil {
			return nil, nil, fmt.Errorf("list runners for %s: revalidate page %d: %w", scope, n, err)
		}
		if !samePage(*read, again) {
			return nil, nil, fmt.Errorf("list runners for %s: %w: page %d changed while later pages were read", scope, fleet.ErrInconsistent, n)
		}
	}
	return list.runners, &state.ListCache{Pages: list.pages}, nil
}

// samePage reports whether two reads of a page show the same list: the
// same total, runners and next link. Only what the reaper reads counts, so
// a 200 that shows the same list under a new ETag is no change.
func samePage(a, b state.CachedPage) bool {
	if a.TotalCount != b.TotalCount || a.NextPage != b.NextPage || len(a.Runners) != len(b.Runners) {
		return false
	}
	for i := range a.Runners {
		if !reflect.DeepEqual(a.Runners[i], b.Runners[i]) {
			return false
		}
	}
	return true
}

// fetchPage reads one page, conditionally when cached has an ETag.
func (c *Client) fetchPage(ctx context.Context, path string, page int, cached *state.CachedPage) (state.CachedPage, error) {
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("%s?per_page=%d&page=%d", path, perPage, page), nil)
	if err != nil {
		return state.CachedPage{}, fmt.Errorf("build request: %w", err)
	}
	conditional := cached != nil && cached.ETag != ""
	if conditional {
		req.Header.Set("If-None-Match", cached.ETag)
	}
	var body runnersBody
	resp, err := c.gh.Do(ctx, req, &body)
	// go-github v60 treats 304 like any status outside 2xx: Do returns an
	// *ErrorResponse and a non-nil *Response with StatusCode 304 (and
	// leaves body untouched). That is the one "error" that is success.
	if resp != nil && resp.Response != nil && resp.StatusCode == http.StatusNotModified {
		if !conditional {
			return state.CachedPage{}, errors.New("304 Not Modified to a request without If-None-Match")
		}
		return clonePage(*cached), nil
	}
	if err != nil {
		closeExchangeBody(err)
		return state.CachedPage{}, rateLimited(offOrigin(err))
	}
	if resp.StatusCode != http.StatusOK {
		return state.CachedPage{}, fmt.Errorf("unexpected status %s", resp.Status)
	}
	if body.TotalCount == nil || body.Runners == nil {
		return state.CachedPage{}, errors.New("response lacks total_count or runners")
	}
	regs := make([]fleet.Registration, 0, len(*body.Runners))
	for i, r := range *body.Runners {
		reg, err := registration(r)
		if err != nil {
			return state.CachedPage{}, fmt.Errorf("item %d: %w", i+1, err)
		}
		regs = append(regs, reg)
	}
	return state.CachedPage{
		ETag:       resp.Header.Get("ETag"),
		TotalCount: *body.TotalCount,
		Runners:    regs,
		NextPage:   resp.NextPage,
	}, nil
}

// runnersBody is github.Runners with its fields optional, so that a body
// that lacks them is refused rather than read as an empty list, which
// would make every runner look absent.
type runnersBody struct {
	TotalCount *int              `json:"total_count"`
	Runners    *[]*github.Runner `json:"runners"`
}

// registration keeps what the reaper needs of a runner. A runner without
// id, name, status or busy is refused: a missing busy read as false would
// defeat safety rule 2.
func registration(r *github.Runner) (fleet.Registration, error) {
	switch {
	case r == nil:
		return fleet.Registration{}, errors.New("null runner")
	case r.ID == nil || *r.ID <= 0:
		return fleet.Registration{}, errors.New("runner has no id")
	case r.Name == nil || *r.Name == "":
		return fleet.Registration{}, fmt.Errorf("runner %d has no name", *r.ID)
	case r.Status == nil:
		return fleet.Registration{}, fmt.Errorf("runner %d has no status", *r.ID)
	case r.Busy == nil:
		return fleet.Registration{}, fmt.Errorf("runner %d has no busy field", *r.ID)
	}
	// No labels is nil, as a registration reads back from the ledger, so
	// that a page reused from the cache equals the same page read afresh.
	var labels []string
	for _, l := range r.Labels {
		if l != nil && l.Name != nil {
			labels = append(labels, *l.Name)
		}
	}
	return fleet.Registration{
		ID:     *r.ID,
		Name:   *r.Name,
		Online: *r.Status == "online",
		Busy:   *r.Busy,
		Labels: labels,
	}, nil
}

// cachedPage is page n (from 1) of cache, or nil.
func cachedPage(cache *state.ListCache, n int) *state.CachedPage {
	if cache == nil || n < 1 || n > len(cache.Pages) {
		return nil
	}
	return &cache.Pages[n-1]
}

// clonePage copies a cached page so that the cache returned never shares
// memory with the one passed in.
func clonePage(p state.CachedPage) state.CachedPage {
	runners := make([]fleet.Registration, len(p.Runners))
	for i, r := range p.Runners {
		r.Labels = append([]string(nil), r.Labels...)
		runners[i] = r
	}
	p.Runners = runners
	return p
}
