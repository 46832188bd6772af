package ghclient

import (
	"fmt"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// listCheck accumulates a runner list page by page and enforces safety
// rule 1: a list is complete only when every page agrees on total_count,
// the pages follow each other without a gap, no runner is listed twice and
// the runners add up to total_count exactly. A runner that moves between
// pages while they are read (one registered, another removed) can leave the
// count right but one runner unseen; the duplicate check catches that.
// The checks also bound the loop: a page that links to a next one must
// bring a runner, and the runners may not exceed total_count.
type listCheck struct {
	pages       []reconcile.CachedPage
	runners     []reconcile.Registration
	firstPageOn map[int64]int
}

// add takes page n; its error describes the inconsistency.
func (l *listCheck) add(n int, p reconcile.CachedPage) error {
	if p.TotalCount < 0 {
		return fmt.Errorf("page %d reports a negative total_count %d", n, p.TotalCount)
	}
	if len(l.pages) > 0 && p.TotalCount != l.pages[0].TotalCount {
		return fmt.Errorf("page %d reports total_count %d, page 1 reported %d", n, p.TotalCount, l.pages[0].TotalCount)
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
