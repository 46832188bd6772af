package state

import (
	"fmt"
	"time"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// epoch is a fixed UTC time, so that marks round-trip through JSON equal.
var epoch = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// mark returns a pod mark first seen i minutes after epoch, and its key.
func mark(i int) (string, reconcile.Mark) {
	uid := fmt.Sprintf("0000-uid-%04d", i)
	return reconcile.PodMarkKey(uid), reconcile.Mark{
		Verdict:    reconcile.Zombie,
		FirstSeen:  epoch.Add(time.Duration(i) * time.Minute),
		LastSeen:   epoch.Add(time.Duration(i+1) * time.Minute),
		Scope:      "org:acme",
		Namespace:  "runners",
		Pod:        fmt.Sprintf("runner-%04d", i),
		RunnerID:   int64(1000 + i),
		RunnerName: fmt.Sprintf("runner-%04d", i),
	}
}

// marks returns n marks, first seen one minute apart from epoch.
func marks(n int) map[string]reconcile.Mark {
	m := make(map[string]reconcile.Mark, n)
	for i := 0; i < n; i++ {
		k, v := mark(i)
		m[k] = v
	}
	return m
}

// lists returns a list cache of scopes scopes with runners runners each.
func lists(scopes, runners int) map[string]reconcile.ListCache {
	l := make(map[string]reconcile.ListCache, scopes)
	for s := 0; s < scopes; s++ {
		page := reconcile.CachedPage{ETag: fmt.Sprintf(`W/"etag-%d"`, s), TotalCount: runners}
		for r := 0; r < runners; r++ {
			page.Runners = append(page.Runners, reconcile.Registration{
				ID: int64(s*100000 + r), Name: fmt.Sprintf("runner-%d-%d", s, r),
				Online: r%2 == 0, Busy: r%3 == 0, Labels: []string{"self-hosted", "linux"},
			})
		}
		l[fmt.Sprintf("org:scope-%d", s)] = reconcile.ListCache{Pages: []reconcile.CachedPage{page}}
	}
	return l
}

// sample is a small ledger with both marks and a list cache.
func sample() Ledger {
	m := marks(3)
	m[reconcile.RegistrationMarkKey("repo:acme/app", 42)] = reconcile.Mark{
		Verdict: reconcile.Ghost, FirstSeen: epoch, LastSeen: epoch.Add(time.Minute),
		Scope: "repo:acme/app", RunnerID: 42, RunnerName: "reaper-ghost",
	}
	return Ledger{Marks: m, Lists: lists(2, 3)}
}
