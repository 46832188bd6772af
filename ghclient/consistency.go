package ghclient

import (
	"fmt"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
)

// listCheck accumulates a runner list page by page and enforces safety
// rule 1: a list is complete only when every page agrees on total_count,
// the pages follow each other without a gap, no runner is listed twice and
// the runners add up to total_count exactly. A runner that moves between
// pages while they are read (one registered, another removed) can leave the
// count right but one runner unseen; the duplicate check catches that.
// A runner that moves back a page is caught by ListRunners' revalidation.
// A page that disagrees with page 1 on total_count is a list whose
// membership moved under the read, which ListRunners reads again once; the
// other checks fail a list that no reading again would cure.
// The checks also bound the loop: a page that links to a next one must
// bring a runner, the runners may not exceed total_count, and the pages may
// not exceed what total_count implies at the page size, plus one, nor the
// hard ceiling, whatever total_count says.
type listCheck struct {
	pages       []state.CachedPage
	runners     []fleet.Registration
	firstPageOn map[int64]int
	// ceiling is the most pages any list may have.
	ceiling int
}

// movedError is an inconsistency that runners joining or leaving while the
// list is read explains, as against one of a malformed list: the one kind
// a second read may not meet.
type movedError struct{ error }

func (e movedError) Unwrap() error { return e.error }

// maxPagesFor is the most pages a list may take: what total_count implies
// at the page size page 1 was served with (per_page, or fewer if the server
// pages in smaller steps; a server that pages by one runner meets the
// ceiling instead), plus one for a runner registered while the list was
// read, and never more than the ceiling.
func (l *listCheck) maxPagesFor(first state.CachedPage) int {
	size := perPage
	if n := len(first.Runners); n > 0 && n < size {
		size = n
	}
	implied := (first.TotalCount + size - 1) / size
	return min(max(implied, 1)+1, l.ceiling)
}

// add takes page n; its error describes the inconsistency.
func (l *listCheck) add(n int, p state.CachedPage) error {
	if p.TotalCount < 0 {
		return fmt.Errorf("page %d reports a negative total_count %d", n, p.TotalCount)
	}
	if len(l.pages) > 0 && p.TotalCount != l.pages[0].TotalCount {
		return movedError{fmt.Errorf("page %d reports total_count %d, page 1 reported %d", n, p.TotalCount, l.pages[0].TotalCount)}
	}
	for _, r := range p.Runners {
		if first, dup := l.firstPageOn[r.ID]; dup {
			return fmt.Errorf("runner %d is listed on page %d and again on page %d", r.ID, first, n)
		}
		l.firstPageOn[r.ID] = n
	}
	l.pages = append(l.pages, p)
	l.runners = append(l.runners, p.Runners...)
	if len(l.runners) > p.TotalCount {
		return fmt.Errorf("%d runners by page %d, more than total_count %d", len(l.runners), n, p.TotalCount)
	}
	if p.NextPage != 0 && p.NextPage != n+1 {
		return fmt.Errorf("page %d links to page %d as next, want page %d", n, p.NextPage, n+1)
	}
	if p.NextPage != 0 && len(p.Runners) == 0 {
		return fmt.Errorf("page %d is empty but links to a next page", n)
	}
	if most := l.maxPagesFor(l.pages[0]); p.NextPage != 0 && n >= most {
		return fmt.Errorf("page %d links to a next page, but total_count %d allows at most %d pages (ceiling %d)", n, p.TotalCount, most, l.ceiling)
	}
	return nil
}

// complete checks the list once the last page has been read.
func (l *listCheck) complete() error {
	total := 0
	if len(l.pages) > 0 {
		total = l.pages[0].TotalCount
	}
	if len(l.runners) != total {
		return fmt.Errorf("%d runners on %d pages, total_count is %d", len(l.runners), len(l.pages), total)
	}
	return nil
}
