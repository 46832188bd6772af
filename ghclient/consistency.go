package ghclient

import (
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
// What no movement explains fails the list (safety rule 1): a runner
// listed twice on one read (a runner's place only ever moves back, and the
// read only forward, so it cannot meet one twice), more runners read by a
// page than that page's own total_count allows (each page is a snapshot:
// the runners before it fill at most its page number less one pages, and
// its own are what is left of its total), a next link to another than the
// next page, an empty page that links to a next one, or more pages than a
// page's total_count implies at the page size, plus one, or than the hard
// ceiling. Those checks also bound the loop whatever total_count says.
type listCheck struct {
	pages       []state.CachedPage
	runners     int
	firstPageOn map[int64]int
	// ceiling is the most pages any list may have.
	ceiling int
	// moved says how the list moved under this read; "" while it has not.
	moved string
}

// maxPagesFor is the most pages a list of total runners may take: what
// total implies at the page size page 1 was served with (per_page, or
// fewer if the server pages in smaller steps; a server that pages by one
// runner meets the ceiling instead), plus one for a runner registered while
// the list was read, and never more than the ceiling.
func (l *listCheck) maxPagesFor(total int) int {
	size := perPage
	if n := len(l.pages[0].Runners); n > 0 && n < size {
		size = n
	}
	implied := (total + size - 1) / size
	return min(max(implied, 1)+1, l.ceiling)
}

// add takes page n; its error describes a contradiction.
func (l *listCheck) add(n int, p state.CachedPage) error {
	if p.TotalCount < 0 {
		return fmt.Errorf("page %d reports a negative total_count %d", n, p.TotalCount)
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
	if l.runners > p.TotalCount {
		return fmt.Errorf("%d runners by page %d, more than total_count %d", l.runners, n, p.TotalCount)
	}
	if p.NextPage != 0 && p.NextPage != n+1 {
		return fmt.Errorf("page %d links to page %d as next, want page %d", n, p.NextPage, n+1)
	}
	if p.NextPage != 0 && len(p.Runners) == 0 {
		return fmt.Errorf("page %d is empty but links to a next page", n)
	}
	if most := l.maxPagesFor(p.TotalCount); p.NextPage != 0 && n >= most {
		return fmt.Errorf("page %d links to a next page, but total_count %d allows at most %d pages (ceiling %d)", n, p.TotalCount, most, l.ceiling)
	}
	return nil
}

// complete notes, once the last page has been read, a list that lists
// fewer runners than total_count: one slid onto a page already read.
// (More cannot be: add refuses them.)
func (l *listCheck) complete() {
	if l.moved != "" || len(l.pages) == 0 {
		return
	}
	if total := l.pages[0].TotalCount; l.runners != total {
		l.moved = fmt.Sprintf("%d runners on %d pages, total_count is %d", l.runners, len(l.pages), total)
	}
}
