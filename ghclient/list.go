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
// page.
//
// What a list proves depends on whether it moved while it was read (see
// listCheck). Every registration it shows existed when its page was read,
// with the status and busy that page gave: that is presence, and it needs
// nothing more. That a runner is absent needs a list that did not move: a
// runner can slide onto a page already read and go unseen, with every
// count still agreeing. So, after the last page, every earlier page is
// asked for once more with the ETag this read got for it (an unchanged page
// answers 304 at no rate-limit cost); the list proves absence only when
// every page agreed on total_count, the runners added up to it, and every
// page read again holds the same runners (the same ids, the same
// total_count, the same next link), whatever their busy, status, name or
// labels now say: in an org of thousands some runner flips busy during any
// read, and that is no movement of the list. A page read again replaces
// its first reading, in the registrations and in the cache, with its own
// ETag: it is the fresher, and a cache must hold exactly what its ETag
// stands for, or a later 304 would replay a state GitHub never sent.
//
// A list that moved is not read again: in a busy org it would move again,
// and every read costs the scope's pages. It is returned with its
// registrations and its cache and an error that wraps fleet.ErrMoved, and
// the caller takes it for presence and proves each absence it would act on
// with a look-up by name (FindRunner). Its registrations are every runner
// this call listed: a page read again that came back with other runners
// keeps its first reading's runners too (each existed when it was listed),
// each runner once, at its freshest reading. A list whose first read
// already moved is not read again page by page either: it proves no
// absence whatever that pass would show.
//
// One field is not simply taken from the fresher read: a runner any read
// of this call saw busy comes back busy. The list's busy is what spares a
// runner with a job, and of two readings seconds apart the busy one costs
// at most one sweep's delay (a job that ended between them), while the
// idle one could be GitHub's lag or a replica behind; the registration's
// 422 (safety rule 2) still stands behind it either way.
//
// A list of P pages thus costs P requests and, unless it moved during
// them, at most P-1 revalidations (304 when nothing changed). A one-page
// list needs no second look: it costs one request.
//
// On any other error (a failed request, a rate limit, a list that
// contradicts itself) the registrations and the cache are nil, so that a
// caller keeps its old cache and draws no conclusion: it wraps
// fleet.ErrInconsistent when the pages contradict each other, and is a
// *fleet.RateLimitError when GitHub said rate-limited.
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
	read, err := c.readList(ctx, path, where, cache, busy)
	if err != nil {
		return nil, nil, err
	}
	fresh := &state.ListCache{Pages: read.pages, Label: c.ownerLabel}
	if read.moved != "" {
		return union(read, busy), fresh, fmt.Errorf("%s: %w: %s", where, fleet.ErrMoved, read.moved)
	}
	return registrations(read.pages, busy), fresh, nil
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

// union is every runner a moved list showed, once each, busy if any read
// saw it busy: the pages as they stand, then the runners only the first
// reading of the page read again showed. A runner can be listed twice only
// where that page is concerned: it slid onto the page read again from a
// later one (its reading there is the fresher), or the page's first
// reading showed it too. Every other pair of pages is one read, which
// listCheck holds to no runner twice.
func union(read listRead, busy map[int64]bool) []fleet.Registration {
	if read.changed == 0 {
		return registrations(read.pages, busy)
	}
	changed := read.pages[read.changed-1].Runners
	fresh := make(map[int64]bool, len(changed))
	for _, r := range changed {
		fresh[r.ID] = true
	}
	n := len(read.earlier)
	for _, p := range read.pages {
		n += len(p.Runners)
	}
	regs := make([]fleet.Registration, 0, n)
	for i, p := range read.pages {
		for _, r := range p.Runners {
			if i >= read.changed && fresh[r.ID] {
				continue
			}
			r.Busy = r.Busy || busy[r.ID]
			regs = append(regs, r)
		}
	}
	for _, r := range read.earlier {
		if !fresh[r.ID] {
			r.Busy = r.Busy || busy[r.ID]
			regs = append(regs, r)
		}
	}
	return regs
}

// listRead is one read of a whole list.
type listRead struct {
	// pages is the list's pages, a page read again in place of its first
	// reading.
	pages []state.CachedPage
	// moved says how the list moved under the read; "" when it did not.
	moved string
	// changed is the page (from 1) that, read again, held other runners,
	// and earlier its first reading's runners; 0 and nil when no page did.
	changed int
	earlier []fleet.Registration
}

// readList is one read of the whole list and, if the read did not move,
// its revalidation pass, which stops at the first page that moved. Every
// runner a page shows busy is noted in busy. Its error is a failed request,
// or a list that contradicts itself (see listCheck), which reading again
// would not cure.
func (c *Client) readList(ctx context.Context, path, where string, cache *state.ListCache, busy map[int64]bool) (listRead, error) {
	list := listCheck{firstPageOn: make(map[int64]int), ceiling: maxPages}
	for page := 1; ; page++ {
		p, err := c.fetchPage(ctx, path, page, cachedPage(cache, page))
		if err != nil {
			return listRead{}, fmt.Errorf("%s page %d: %w", where, page, err)
		}
		noteBusy(busy, p)
		if err := list.add(page, p); err != nil {
			return listRead{}, fmt.Errorf("%s: %w: %w", where, fleet.ErrInconsistent, err)
		}
		if p.NextPage == 0 {
			break
		}
	}
	list.complete()
	read := listRead{pages: list.pages, moved: list.moved}
	for n := 1; n < len(read.pages) && read.moved == ""; n++ {
		again, err := c.fetchPage(ctx, path, n, &read.pages[n-1])
		if err != nil {
			return listRead{}, fmt.Errorf("%s: revalidate page %d: %w", where, n, err)
		}
		if err := list.again(n, again); err != nil {
			return listRead{}, fmt.Errorf("%s: %w: %w", where, fleet.ErrInconsistent, err)
		}
		noteBusy(busy, again)
		if why := sameMembers(read.pages[n-1], again); why != "" {
			read.moved = fmt.Sprintf("page %d changed while later pages were read: %s", n, why)
			read.changed, read.earlier = n, read.pages[n-1].Runners
		}
		read.pages[n-1] = again
	}
	return read, nil
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
		return state.CachedPage{}, accessHint(rateLimited(offOrigin(err)), strings.HasPrefix(path, "enterprises/"))
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
