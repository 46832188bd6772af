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
	// Complete is true only when every page was read and the items add up
	// to total_count. An incomplete list is never evidence of absence.
	Complete bool
	// Problem says why the list is not complete, for the log.
	Problem string
	// Skip says why the list is not complete, as the sweep classified it
	// where it asked (fleet.SkipOf); an incomplete list that names no kind
	// is a failure.
	Skip fleet.SkipKind
	// Until is when GitHub takes requests again, for a rate-limited list.
	Until   time.Time
	Runners []fleet.Registration
}

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
