// Package reconcile holds the pure heart of runner-reaper: what a sweep
// observed, how that is classified into verdicts, how verdicts are confirmed
// across sweeps, and the order in which they are allowed to act. Nothing here
// does I/O, so every decision the reaper makes can be tested as a table.
package reconcile

import (
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ScopeList is one scope's runner list as one sweep saw it.
type ScopeList struct {
	Scope fleet.Scope
	// Complete is true only when the list proves absence: every page was
	// read, the items add up to total_count, and nothing moved under the
	// read. An incomplete list is never evidence of absence.
	Complete bool
	// Moved, when set, says how the list moved while it was read: it was
	// read to its end with every page sound, runners joined or left, and
	// Runners holds every runner it listed. Such a list proves presence
	// (a runner listed existed, with the status and busy it was listed
	// with) and not absence: a verdict that rests on a runner not being
	// listed is made, but carries AbsenceUnproven, and acts only once a
	// look-up by name has proven it.
	Moved string
	// Problem says why the list gave no verdict, for the log.
	Problem string
	// Skip says why the list gives no verdict, as the sweep classified it
	// where it asked (fleet.SkipOf); a list that is neither listed nor
	// names a kind is a failure.
	Skip fleet.SkipKind
	// Until is when GitHub takes requests again, for a rate-limited list.
	Until   time.Time
	Runners []fleet.Registration
}

// Listed reports whether the list serves verdicts: it proves absence, or
// it moved and proves presence.
func (l ScopeList) Listed() bool { return l.Complete || l.Moved != "" }

// Observation is everything one sweep saw.
type Observation struct {
	Now  time.Time
	Pods []fleet.Pod
	// EphemeralRunners is set only when ARC's leaks are watched.
	EphemeralRunners []fleet.EphemeralRunner
	// Lists holds one entry per configured scope, by Scope.Key.
	Lists map[string]ScopeList
	// Unobserved lists the configured namespaces whose pods were not seen:
	// the namespace does not exist, or its existence could not be checked.
	Unobserved []fleet.UnobservedNamespace
}
