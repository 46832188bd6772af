package reap

import (
	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// loopWaiting settles, before any job check or log read is handed out,
// which candidates of the looping groups wait for a later sweep: of each
// looping group, every candidate that backs off (reconcile.BacksOff) but
// the first in the bound's order. Those that need a check or a read to
// act are held outright (loop-held): a turn spent on one of them would
// be taken from another group's runner, and its GitHub request spent
// for nothing, on every sweep the loop stands. One that needs neither
// may still take the group's one action of the sweep, when the first
// did not take it (protected, deferred, or its write refused before
// anything was written: see takesOver).
func (r *Reaper) loopWaiting(cs []reconcile.Candidate) map[int]bool {
	if len(r.looping) == 0 {
		return nil
	}
	first := map[fleet.Group]bool{}
	waiting := map[int]bool{}
	for i, c := range cs {
		if c.Pod == nil || !reconcile.BacksOff(c.Verdict) || !r.looping[c.Pod.Group] ||
			r.Action(c) == Report || alreadyDeleting(c) {
			continue
		}
		if first[c.Pod.Group] {
			waiting[i] = true
			continue
		}
		first[c.Pod.Group] = true
	}
	return waiting
}

// needsTurn reports whether the candidate can act only after a job check
// or a log read, which a waiting candidate is never given.
func (r *Reaper) needsTurn(c reconcile.Candidate) bool {
	return (needsJobCheck(c) && r.asks(c)) || r.needsLogRead(c)
}

// loopGroupOf is the looping group a candidate that backs off belongs to.
func (r *Reaper) loopGroupOf(c reconcile.Candidate) (fleet.Group, bool) {
	if c.Pod == nil || !reconcile.BacksOff(c.Verdict) || !r.looping[c.Pod.Group] {
		return fleet.Group{}, false
	}
	return c.Pod.Group, true
}

// takesOver reports whether a candidate held for its looping group may
// act after all: the candidate admitted for the group ended before anything
// was written for it (its pre-flight refused, or found the object changed
// or gone; GitHub's rate limit held it), and this one needs no check or
// read it was never given, and fits the bound. Without it a runner whose
// delete is refused every sweep (an admission webhook that denies it),
// first in the bound's order every sweep, would hold the rest of its group
// for ever. A write refused after its pre-flight passed is not passed on:
// something was sent for the group this sweep.
func (r *Reaper) takesOver(o *Outcome, freed map[fleet.Group]bool, budget *reconcile.Budget) bool {
	g, ok := r.loopGroupOf(o.Candidate)
	if !ok || o.Result != fleet.LoopHeld || !freed[g] || r.needsTurn(o.Candidate) || !budget.Fits(o.Candidate) {
		return false
	}
	freed[g] = false
	budget.Admit(o.Candidate)
	o.Result = ""
	return true
}

// freeLoop records that a candidate admitted for its looping group ended
// before anything was written for it (see takesOver).
func (r *Reaper) freeLoop(o *Outcome, freed map[fleet.Group]bool) {
	if g, ok := r.loopGroupOf(o.Candidate); ok {
		freed[g] = true
	}
}
