// Package state is the ledger of marks: the only thing one sweep leaves for
// the next. The reaper keeps nothing in the process, so a verdict can only be
// confirmed across sweeps if the marks survive here.
//
// Every backend gives optimistic concurrency: a sweep loads the ledger,
// decides, saves it with the version it loaded, and only then acts. If the
// save fails with ErrConflict another sweep saved in between, and this sweep
// starts no action; that is how two overlapping sweeps never act twice.
//
// This package is the leaf the sweep, the report and the metrics read: it
// holds the contract and what the backends share, and imports no client of
// any store. Each backend lives in a subpackage (configmap, dynamo, file,
// memory), so that only the composition root pulls in client-go or the AWS
// SDK.
package state

import (
	"context"
	"errors"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Ledger is what one sweep leaves for the next.
type Ledger struct {
	// Marks are keyed by the mark key of the object suspected:
	// fleet.PodMarkKey ("pod/"), fleet.EphemeralRunnerMarkKey
	// ("er/") or fleet.RegistrationMarkKey ("reg/").
	Marks map[string]fleet.Mark `json:"marks"`
	// Lists is the runner-list cache by scope key (ETags and pages). It only
	// saves rate limit, so a backend short of room may drop it.
	Lists map[string]ListCache `json:"lists,omitempty"`
	// NextScope is the key of the scope the next sweep lists first, when a
	// sweep cannot list every scope: the position of the fair rotation.
	// Empty starts at the first configured scope.
	NextScope string `json:"next_scope,omitempty"`
	// Streaks count trouble that has lasted several sweeps in a row, for
	// the alerts that must tell a blip from a lasting fault. They only feed
	// metrics: one lost or unreadable restarts from zero and delays an
	// alert, never changes what a sweep does.
	Streaks Streaks `json:"streaks"`
	// History is the record of the actions sweeps really carried out,
	// oldest first, at most REAPER_HISTORY_SIZE of them: the one account
	// of an action that outlives the sweep's log and the Event. It feeds
	// no decision, so a backend short of room drops its oldest records
	// after the list cache and before anything else.
	History []Record `json:"history,omitempty"`
	// Loops is the reap-loop window: by group (fleet.Group's string), the
	// recent actions really done on its runner pods, oldest first, within
	// REAPER_LOOP_WINDOW and bounded by package loops. It feeds the
	// back-off of a looping group, so it ranks above the record of
	// actions and the streaks when room runs short; lost, it only delays
	// a loop's report and back-off.
	Loops map[string][]LoopEntry `json:"loops,omitempty"`
}

// Streaks are the ledger's counts of sweeps in a row.
type Streaks struct {
	// Skips counts, by scope key, the sweeps in a row whose list of that
	// scope was failed, rate-limited or inconsistent. A deferral by the
	// scope budget neither counts nor breaks the streak: the scope was not
	// asked. A scope listed whole is absent.
	Skips map[string]int `json:"skips,omitempty"`
	// Bound counts the sweeps in a row in which the action bound left a
	// ready candidate for later.
	Bound int `json:"bound,omitempty"`
}

// MaxSkip is the longest skip streak of any scope.
func (s Streaks) MaxSkip() int {
	n := 0
	for _, v := range s.Skips {
		n = max(n, v)
	}
	return n
}

// Zero is true when no streak is running: a backend stores nothing then.
func (s Streaks) Zero() bool { return len(s.Skips) == 0 && s.Bound == 0 }

// ListCache is what the ledger remembers of a scope's runner list so that
// the next sweep can ask GitHub with If-None-Match and reuse an unchanged
// page: a 304 costs no rate limit. It lives here, not in reconcile, because
// only the GitHub client, the sweep and the ledger read it; the verdicts
// never do.
type ListCache struct {
	// Pages are stored under "trimmed", not the "pages" of the releases
	// that kept every label: such a release reads no pages from this
	// cache, so it cannot replay, under an ownership label it has and
	// this cache's runners lack, a 304 page without that label; and a
	// cache such a release wrote is read afresh once.
	Pages []CachedPage `json:"trimmed"`
	// Label is the one runner label the pages keep (the ownership label,
	// ghclient.Config.OwnerLabel): a cache trimmed to another label is not
	// used, since a 304 would replay registrations without the label
	// ownership now reads.
	Label string `json:"label,omitempty"`
}

// CachedPage is one page of a runner list with the ETag GitHub gave it.
type CachedPage struct {
	ETag       string               `json:"etag"`
	TotalCount int                  `json:"total"`
	Runners    []fleet.Registration `json:"runners"`
	// NextPage is the page number the Link header pointed to, zero on the
	// last page.
	NextPage int `json:"next,omitempty"`
}

// Version identifies one saved state of the ledger. It is opaque to callers:
// they only hand back what Load or Save gave them. "" means the ledger does
// not exist yet.
type Version string

// ErrConflict is returned (wrapped) by Save when the ledger changed since
// the version being saved over was loaded. A caller seeing it must not act on
// what it decided: another sweep has decided since.
var ErrConflict = errors.New("ledger changed since it was loaded")

// Store keeps the ledger between sweeps.
type Store interface {
	// Load returns the ledger and its version. A missing ledger is an empty
	// one (with non-nil maps) at Version "".
	Load(ctx context.Context) (Ledger, Version, error)
	// Save replaces the ledger if it is still at version v and returns the
	// new version. When it is not, the error satisfies
	// errors.Is(err, ErrConflict); with v == "" that means the ledger has
	// been created meanwhile. Any other error (permissions, network) is not
	// a conflict and must not be taken for a lost race.
	Save(ctx context.Context, l Ledger, v Version) (Version, error)
}

// Normalize gives a ledger non-nil maps. Every backend's Load returns what
// it gives, so that callers can write to a loaded ledger without checking.
func Normalize(l Ledger) Ledger {
	if l.Marks == nil {
		l.Marks = map[string]fleet.Mark{}
	}
	if l.Lists == nil {
		l.Lists = map[string]ListCache{}
	}
	return l
}
