// Package reconcile holds the pure heart of runner-reaper: what a sweep
// observed, how that is classified into verdicts, how verdicts are confirmed
// across sweeps, and the order in which they are allowed to act. Nothing here
// does I/O, so every decision the reaper makes can be tested as a table.
package reconcile

import (
	"fmt"
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
	// Now is the sweep's time on the reference clock (the API server's,
	// read from the Date of its answers), and Local on the sweeping
	// machine's; Local zero means the reference alone.
	Now   time.Time
	Local time.Time
	Pods  []fleet.Pod
	// EphemeralRunners is set only when ARC's leaks are watched.
	EphemeralRunners []fleet.EphemeralRunner
	// Lists holds one entry per configured scope, by Scope.Key.
	Lists map[string]ScopeList
	// Unobserved lists the configured namespaces whose pods were not seen:
	// the namespace does not exist, or its existence could not be checked.
	Unobserved []fleet.UnobservedNamespace
}

// ClocksAgree reports whether the sweep's two clocks agree, within
// FutureTolerance. Where they do not, one of them lies (a Date a proxy
// rewrote, an API server or a machine whose clock is off), and nothing
// tells which.
func (o Observation) ClocksAgree() bool {
	if o.Local.IsZero() {
		return true
	}
	d := o.Now.Sub(o.Local)
	return d <= FutureTolerance && d >= -FutureTolerance
}

// past reports whether a time the API server or a kubelet wrote lies more
// than d before the sweep: an age that gates a verdict. ref and local are
// that time as each clock's reading of it places it (the same time, unless
// it had to be clamped to that clock's now). Where the clocks agree the
// reference clock says, as for every time the reaper compares. Where they
// disagree, either clock saying so, each against its own reading, makes the
// verdict (a clock behind for good would otherwise hide every leak for the
// length of its lie), and the verdict must then hold for the whole d from
// the reaper's own first sighting, on both clocks (Finding.MinHold, which
// the caller sets): a lie on either clock may delay an action, never hurry
// it.
func (o Observation) past(ref, local time.Time, d time.Duration) bool {
	if o.Now.Sub(ref) > d {
		return true
	}
	return !o.ClocksAgree() && o.Local.Sub(local) > d
}

// pastStart is past for a runner's start: start as the reference clock
// reads it (startedAt against Now), and as the local clock does.
func (o Observation) pastStart(p *fleet.Pod, start time.Time, d time.Duration) bool {
	local := start
	if !o.ClocksAgree() {
		local, _ = startedAt(o.Local, p)
	}
	return o.past(start, local, d)
}

// skewWords says how the clocks disagree, for a verdict's evidence.
func (o Observation) skewWords() string {
	ahead := o.Now.Sub(o.Local).Round(time.Second)
	if ahead < 0 {
		return fmt.Sprintf("the API server's clock is %s behind this machine's", -ahead)
	}
	return fmt.Sprintf("the API server's clock is %s ahead of this machine's", ahead)
}
