package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

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
// agreeing, and an unchanged page answers 304 at no rate-limit cost.
//
// What the list proves is membership: which runners exist. So a page read
// again is consistent when it holds the same runners (the same ids, the same
// total_count, the same next link), whatever their busy, status, name or
// labels now say; in an org of thousands of runners some runner flips busy
// during any read of its dozens of pages, and a check on bytes would skip
// that scope on nearly every sweep and never clean its leaks. The page
// read again replaces the first reading, in the registrations and in the
// cache, with its own ETag: it is the fresher, and a cache must hold exactly
// what its ETag stands for, or a later 304 would replay a state GitHub
// never sent. One field is not simply taken from the fresher read: a
// runner any read of this call saw busy comes back busy. The list's busy
// is what spares a runner with a job, and of two readings seconds apart the
// busy one costs at most one sweep's delay (a job that ended between them),
// while the idle one could be GitHub's lag or a replica behind; the
// registration's 422 (safety rule 2) still stands behind it either way.
//
// A list whose membership moved under the read (a page read again holds
// other runners, or a page reports another total_count than page 1) is
// read once more from the start, with the same checks and its own second
// look: runners join and leave all the time in a busy org, and one settled
// read is as good as any. If that read moves too, the list is
// inconsistent. A list of P pages thus costs P requests and P-1
// revalidations (304 when nothing changed); at worst two full reads and two
// revalidation passes, 2P+2(P-1) requests (P the longer of the two reads).
// A one-page list needs no second look and cannot move under its own read:
// it costs one request.
//
// The registrations and the new cache are returned only when every page
// was read and the list adds up; otherwise the error says why (it wraps
// fleet.ErrInconsistent when the pages do not add up, and is a
// *fleet.RateLimitError when GitHub said rate-limited) and the cache is nil,
// so that a caller keeps its old cache and draws no conclusion.
func (c *Client) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	path, err := runnersPath(scope)
	if err != nil {
		return nil, nil, fmt.Errorf("list runners: %w", err)
	}
	if cache != nil && cache.Label != c.ownerLabel {
		// Its pages were trimmed to another label: a 304 would replay
		// registrations without the label ownership now reads.
		cache = nil
	}
	busy := map[int64]bool{}
	where := fmt.Sprintf("list runners for %s", scope)
	pages, moved, err := c.readList(ctx, path, where, cache, busy)
	if err != nil {
		return nil, nil, err
	}
	if moved != nil {
		// The second read asks with the newest ETag known for each page,
		// this call's own where it read the page: a page unchanged since
		// answers 304 and costs no rate limit.
		again := fmt.Sprintf("list runners for %s (read again: %v)", scope, moved)
		var movedAgain error
		pages, movedAgain, err = c.readList(ctx, path, again, newest(pages, cache), busy)
		if err != nil {
			return nil, nil, err
		}
		if movedAgain != nil {
			return nil, nil, fmt.Errorf("list runners for %s: %w: %w, and again on a fresh read: %w", scope, fleet.ErrInconsistent, moved, movedAgain)
		}
	}
	return registrations(pages, busy), &state.ListCache{Pages: pages, Label: c.ownerLabel}, nil
}

// registrations is the list's runners, each busy if any read saw it busy.
// A one-page list whose every runner reads as the cache has it, the common
// case, is its page's own slice, capped so that an append cannot write
// into the cache: the registrations and the cache are then one copy, which
// at 100,000 runners is what a sweep's memory is made of. Nothing writes
// to a registration once it is read.
func registrations(pages []state.CachedPage, busy map[int64]bool) []fleet.Registration {
	n, fresher := 0, false
	for _, p := range pages {
		n += len(p.Runners)
		for _, r := range p.Runners {
			fresher = fresher || (busy[r.ID] && !r.Busy)
		}
	}
	if len(pages) == 1 && !fresher {
		rs := pages[0].Runners
		return rs[:len(rs):len(rs)]
	}
	regs := make([]fleet.Registration, 0, n)
	for _, p := range pages {
		for _, r := range p.Runners {
			r.Busy = r.Busy || busy[r.ID]
			regs = append(regs, r)
		}
	}
	return regs
}

// readList is one read of the whole list and its revalidation pass. It
// returns the pages, a page read again in place of its first reading; or
// why the list moved under the read, and then the pages read so far, whose
// ETags the next read may use. Every runner a page shows busy is noted in
// busy. Its error is a failed request, or an inconsistency that no moving
// list explains (a gap, a runner listed twice, runners beyond
// total_count, too many pages), which reading again would not cure.
func (c *Client) readList(ctx context.Context, path, where string, cache *state.ListCache, busy map[int64]bool) ([]state.CachedPage, error, error) {
	list := listCheck{firstPageOn: make(map[int64]int), ceiling: maxPages}
	for page := 1; ; page++ {
		p, err := c.fetchPage(ctx, path, page, cachedPage(cache, page))
		if err != nil {
			return nil, nil, fmt.Errorf("%s page %d: %w", where, page, err)
		}
		noteBusy(busy, p)
		if err := list.add(page, p); err != nil {
			if errors.As(err, new(movedError)) {
				return append(list.pages, p), err, nil
			}
			return nil, nil, fmt.Errorf("%s: %w: %w", where, fleet.ErrInconsistent, err)
		}
		if p.NextPage == 0 {
			break
		}
	}
	if err := list.complete(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", where, fleet.ErrInconsistent, err)
	}
	for n := 1; n < len(list.pages); n++ {
		again, err := c.fetchPage(ctx, path, n, &list.pages[n-1])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: revalidate page %d: %w", where, n, err)
		}
		noteBusy(busy, again)
		why := sameMembers(list.pages[n-1], again)
		list.pages[n-1] = again
		if why != "" {
			return list.pages, fmt.Errorf("page %d changed while later pages were read: %s", n, why), nil
		}
	}
	return list.pages, nil, nil
}

// sameMembers says how two readings of a page differ in what the list
// proves: its total, its next link and the ids of its runners, in any
// order; "" when they do not. Busy, status, name and labels are a runner's
// state, not the list's membership.
func sameMembers(a, b state.CachedPage) string {
	switch {
	case a.TotalCount != b.TotalCount:
		return fmt.Sprintf("total_count %d, was %d", b.TotalCount, a.TotalCount)
	case a.NextPage != b.NextPage:
		return fmt.Sprintf("next page %d, was %d", b.NextPage, a.NextPage)
	}
	was, is := sortedIDs(a), sortedIDs(b)
	if slices.Equal(was, is) {
		return ""
	}
	left, came := missing(was, is), missing(is, was)
	if len(left) == 0 && len(came) == 0 {
		return fmt.Sprintf("runners %v, were %v", is, was)
	}
	return fmt.Sprintf("runners %v left it, %v came", left, came)
}

func sortedIDs(p state.CachedPage) []int64 {
	ids := make([]int64, len(p.Runners))
	for i, r := range p.Runners {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}

// missing is the ids of a, sorted, that sorted b lacks.
func missing(a, b []int64) []int64 {
	var out []int64
	for _, id := range a {
		if _, found := slices.BinarySearch(b, id); !found {
			out = append(out, id)
		}
	}
	return out
}

// noteBusy records every runner p shows busy.
func noteBusy(busy map[int64]bool, p state.CachedPage) {
	for _, r := range p.Runners {
		if r.Busy {
			busy[r.ID] = true
		}
	}
}

// newest is the cache a second read asks with: each page this call read,
// else the caller's.
func newest(read []state.CachedPage, cache *state.ListCache) *state.ListCache {
	out := &state.ListCache{Pages: append([]state.CachedPage(nil), read...)}
	if cache != nil && len(cache.Pages) > len(read) {
		out.Pages = append(out.Pages, cache.Pages[len(read):]...)
	}
	return out
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
		// The cached page itself: nothing writes to a page once read,
		// so the new cache and the old share its runners.
		return *cached, nil
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
		reg, err := registration(r, c.ownerLabel)
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

// registration keeps what the reaper needs of a runner: its id, name,
// status and busy, and of its labels only ownerLabel (see
// Config.OwnerLabel). A runner without id, name, status or busy is
// refused: a missing busy read as false would defeat safety rule 2.
func registration(r *github.Runner, ownerLabel string) (fleet.Registration, error) {
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
		if l != nil && l.Name != nil && ownerLabel != "" && strings.EqualFold(*l.Name, ownerLabel) {
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
