package ghclient

import (
	"errors"
	"fmt"

	"github.com/runner-reaper/runner-reaper/state"
)

// listCheck accumulates one read of a runner list page by page and tells
// a list that moved under the read from one that contradicts itself.
//
// Runners are listed by id: a new registration takes the next id and is
// listed last, and a removal slides every later runner back one place. So
// while a busy fleet's list is read, pages disagree on total_count and a
// runner can slide onto a page already read and go unseen: the read then
// lists fewer runners than total_count, or a page read again holds others.
// Such a list moved; what it lists is still proof of presence, and only
// absence needs more (see ListRunners). That is recorded in moved, and the
// read goes on.
//
// What no movement explains fails the list (safety rule 1), each page
// judged on its own answer, which is one snapshot of the list: a runner
// listed twice (on one page, or on two pages of one read: a runner's place
// only ever moves back, and the read only forward, so it cannot meet one
// twice), a page holding more runners than its own total_count leaves for
// it (at the page size, the pages before it hold that many each), a next
// link to another than the next page, an empty page that links to a next
// one, or more pages than page 1's total_count implies at the page size,
// plus one, plus a tenth for runners registered while the list is read,
// and never more than the hard ceiling. Those checks also bound the loop,
// whatever the later pages' total_count says. A page holding fewer
// runners than its total_count calls for is what a slide looks like, and
// is taken for movement: nothing it lists is the less true for it.
type listCheck struct {
	pages       []state.CachedPage
	runners     int
	firstPageOn map[int64]int
	// ceiling is the most pages any list may have.
	ceiling int
	// moved says how the list moved under this read; "" while it has not.
	moved string
}

// step is the page size the server pages by: per_page, or fewer where
// page 1 came with fewer runners and a next link (a server that pages in
// smaller steps; one that pages by one runner meets the ceiling instead).
func step(first state.CachedPage) int {
	if n := len(first.Runners); first.NextPage != 0 && n > 0 && n < perPage {
		return n
	}
	return perPage
}

// maxPages is the most pages the list may take: what page 1's total_count
// implies at the page size, plus one, plus a tenth for runners registered
// while it is read, and never more than the ceiling.
func (l *listCheck) maxPages() int {
	size := step(l.pages[0])
	implied := max((l.pages[0].TotalCount+size-1)/size, 1)
	return min(implied+1+implied/10, l.ceiling)
}

// pageProblem says how page n, with the page size size, contradicts
// itself, or "": a negative total_count, a runner listed twice on it, more
// runners than its total_count leaves for it, a next link to another than
// the next page, or an empty page that links to a next one.
func pageProblem(n, size int, p state.CachedPage) string {
	if p.TotalCount < 0 {
		return fmt.Sprintf("page %d reports a negative total_count %d", n, p.TotalCount)
	}
	seen := make(map[int64]bool, len(p.Runners))
	for _, r := range p.Runners {
		if seen[r.ID] {
			return fmt.Sprintf("runner %d is listed twice on page %d", r.ID, n)
		}
		seen[r.ID] = true
	}
	if room := min(max(p.TotalCount-(n-1)*size, 0), perPage); len(p.Runners) > room {
		return fmt.Sprintf("page %d holds %d runners, more than its total_count %d leaves for it (%d)", n, len(p.Runners), p.TotalCount, room)
	}
	if p.NextPage != 0 && p.NextPage != n+1 {
		return fmt.Sprintf("page %d links to page %d as next, want page %d", n, p.NextPage, n+1)
	}
	if p.NextPage != 0 && len(p.Runners) == 0 {
		return fmt.Sprintf("page %d is empty but links to a next page", n)
	}
	return ""
}

// add takes page n; its error describes a contradiction.
func (l *listCheck) add(n int, p state.CachedPage) error {
	size := step(p)
	if len(l.pages) > 0 {
		size = step(l.pages[0])
	}
	if why := pageProblem(n, size, p); why != "" {
		return errors.New(why)
	}
	if len(l.pages) > 0 && p.TotalCount != l.pages[0].TotalCount && l.moved == "" {
		l.moved = fmt.Sprintf("page %d reports total_count %d, page 1 reported %d", n, p.TotalCount, l.pages[0].TotalCount)
	}
	for _, r := range p.Runners {
		if first, dup := l.firstPageOn[r.ID]; dup {
			return fmt.Errorf("runner %d is listed on page %d and again on page %d", r.ID, first, n)
		}
		l.firstPageOn[r.ID] = n
	}
	l.pages = append(l.pages, p)
	l.runners += len(p.Runners)
	if most := l.maxPages(); p.NextPage != 0 && n >= most {
		return fmt.Errorf("page %d links to a next page, but total_count %d allows at most %d pages (ceiling %d)", n, l.pages[0].TotalCount, most, l.ceiling)
	}
	return nil
}

// again checks page n read again, which must not contradict itself either.
func (l *listCheck) again(n int, p state.CachedPage) error {
	if why := pageProblem(n, step(l.pages[0]), p); why != "" {
		return fmt.Errorf("page %d read again: %s", n, why)
	}
	return nil
}

// complete notes, once the last page has been read, a list that lists
// fewer or more runners than total_count: one slid onto a page already
// read, or the list shrank or grew between its pages.
func (l *listCheck) complete() {
	if l.moved != "" || len(l.pages) == 0 {
		return
	}
	if total := l.pages[0].TotalCount; l.runners != total {
		l.moved = fmt.Sprintf("%d runners on %d pages, total_count is %d", l.runners, len(l.pages), total)
	}
}
