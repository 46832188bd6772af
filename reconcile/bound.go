package reconcile

import (
	"math"
	"sort"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Order sorts candidates into the order the bound lets them act: the order
// of Verdicts (terminal, orphan-stamped, zombie, unregistered,
// never-started, arc-failed, arc-podless, arc-stuck-deleting, ghost); oldest
// first within a verdict.
// Oldest first because the longest leak has cost the most.
func Order(cs []Candidate) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if pa, pb := a.Verdict.Priority(), b.Verdict.Priority(); pa != pb {
			return pa < pb
		}
		sa, sb := a.since(), b.since()
		if !sa.Equal(sb) {
			return sa.Before(sb)
		}
		return a.Key < b.Key
	})
}

// since is the age anchor: a pod's creation, or for a ghost (GitHub gives no
// creation time) when it was first marked.
func (c Candidate) since() time.Time {
	if c.Since.IsZero() {
		return c.Mark.FirstSeen
	}
	return c.Since
}

// Limits bound one sweep's actions.
type Limits struct {
	// MaxActions is the most actions of any kind in one sweep.
	MaxActions int
	// MaxFraction is the largest share of the managed pods that one sweep
	// may remove.
	MaxFraction float64
}

// Budget counts one sweep's actions against its limits. It is the arithmetic
// of the choke point; the reaper holds the only one per sweep.
type Budget struct {
	limits  Limits
	podCap  int
	actions int
	pods    int
	// looping are the groups in a reap loop (package loops), and acted
	// how many of their candidates that back off were admitted.
	looping map[fleet.Group]bool
	acted   map[fleet.Group]int
}

// BacksOff reports whether a verdict is spread out while its pod's group
// is in a reap loop: those that need confirmation across sweeps
// (never-started, unregistered, zombie), whose runners a broken template
// makes again as fast as they go. A terminal pod is dead, and freeing it
// costs nothing: it is never held.
func BacksOff(v fleet.Verdict) bool {
	return v == fleet.NeverStarted || v == fleet.Unregistered || v == fleet.Zombie
}

// HoldLoops tells the budget which groups are in a reap loop as the sweep
// began: of each, at most one candidate that backs off (BacksOff) is
// admitted this sweep.
func (b *Budget) HoldLoops(looping map[fleet.Group]bool) { b.looping = looping }

// LoopHeld reports whether the candidate waits for a later sweep because
// its group is in a reap loop and one of the group's candidates that back
// off has already been admitted in this one.
func (b *Budget) LoopHeld(c Candidate) bool {
	g, ok := b.loopGroup(c)
	return ok && b.acted[g] >= 1
}

// loopGroup is the candidate's group when the loop back-off applies to it.
func (b *Budget) loopGroup(c Candidate) (fleet.Group, bool) {
	if c.Pod == nil || !BacksOff(c.Verdict) || !b.looping[c.Pod.Group] {
		return fleet.Group{}, false
	}
	return c.Pod.Group, true
}

// NewBudget sizes a sweep's budget. The fractional cap rounds up so that a
// small fleet can still lose its one dead pod, and is never below one while
// any pod is managed.
func NewBudget(l Limits, managedPods int) *Budget {
	podCap := int(math.Ceil(l.MaxFraction * float64(managedPods)))
	return &Budget{limits: l, podCap: podCap}
}

// Fits reports whether Admit would admit the candidate, without taking
// its place: the job guard asks GitHub only for candidates the bound
// would let act.
func (b *Budget) Fits(c Candidate) bool {
	return b.actions < b.limits.MaxActions && (c.Pod == nil || b.pods < b.podCap)
}

// Admit reports whether one more action fits, and counts it if so.
func (b *Budget) Admit(c Candidate) bool {
	if b.actions >= b.limits.MaxActions {
		return false
	}
	if c.Pod != nil {
		if b.pods >= b.podCap {
			return false
		}
		b.pods++
	}
	b.actions++
	if g, ok := b.loopGroup(c); ok {
		if b.acted == nil {
			b.acted = map[fleet.Group]int{}
		}
		b.acted[g]++
	}
	return true
}
