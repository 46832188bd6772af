package reconcile

import (
	"sort"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Hold is how long each verdict's mark must stand before it may act.
type Hold struct {
	// ConfirmAfter applies to every verdict that rests on GitHub's word.
	ConfirmAfter time.Duration
	// StampMaxAge is how long a stamp may stand with no live claim; an
	// orphan-stamped mark waits for the longer of the two.
	StampMaxAge time.Duration
	// ARCFailedAfter and ARCPodlessAfter are how long an EphemeralRunner
	// may stay Failed, or without a pod, before it is removed; ARC gives
	// no time of the transition, so the mark measures it.
	ARCFailedAfter  time.Duration
	ARCPodlessAfter time.Duration
	// MassSuspicionFraction and MassSuspicionMin set off the alarm of
	// safety rule 4: at least Min newly suspect pods making up at least
	// Fraction of a scope's running pods in one sweep.
	MassSuspicionFraction float64
	MassSuspicionMin      int
}

func (h Hold) of(v fleet.Verdict) time.Duration {
	switch v {
	case fleet.Terminal:
		return 0
	case fleet.OrphanStamped:
		return max(h.ConfirmAfter, h.StampMaxAge)
	case fleet.ARCFailed:
		return max(h.ConfirmAfter, h.ARCFailedAfter)
	case fleet.ARCPodless:
		return max(h.ConfirmAfter, h.ARCPodlessAfter)
	default:
		return h.ConfirmAfter
	}
}

// Candidate is a finding with its confirmation state.
type Candidate struct {
	Finding
	// Mark is the mark as the sweep leaves it (zero for terminal).
	Mark fleet.Mark
	// MatureAt is when the mark may act; zero for terminal.
	MatureAt time.Time
	// Ready is true when the verdict may act this sweep.
	Ready bool
}

// Suspicion is safety rule 4's alarm for one scope.
type Suspicion struct {
	ScopeKey     string
	NewlySuspect int
	Pods         int
}

// Confirmation is the outcome of mark and sweep.
type Confirmation struct {
	// Candidates holds every finding: the ready ones and those waiting for
	// their marks to mature.
	Candidates []Candidate
	// Marks is the ledger's marks as this sweep leaves them.
	Marks map[string]fleet.Mark
	// Cleared lists the keys of marks whose verdict no longer holds.
	Cleared []string
	// Held lists the keys of marks kept untouched because their scope was
	// skipped (safety rule 1), or, for ghost marks, because a configured
	// namespace was not observed.
	Held []string
	// MassSuspicion lists the scopes that set off rule 4's alarm.
	MassSuspicion []Suspicion
	// FromFuture lists the marks that were dated after now, as they were
	// in the ledger; each was counted from now instead.
	FromFuture []FutureMark
	// Disagreed lists the keys of the marks whose two clocks disagree
	// about how long ago they were first seen (see ClockDrift); each
	// started again.
	Disagreed []string
}

// FutureTolerance is how far ahead of now a mark's time may be before it
// counts as from the future: refclock's tolerance, within which the local
// clock is used as it is.
const FutureTolerance = 2 * time.Second

// ClockDrift is how far the two clocks of a confirmation may disagree
// about a mark's age before the mark starts again. The offset between the
// reference clock and the local one when a mark was first seen should still
// hold; if it has moved by more than this, one clock lied then or lies now,
// and the mark's age on one of them is wrong. A backward lie on one clock
// at a first sighting and a forward lie on the other at maturity would each
// pass the other's check; this catches their combination. It is looser than
// refclock's tolerance so that CronJob runs on nodes whose clocks differ by
// a few seconds do not restart marks.
const ClockDrift = 30 * time.Second

// FutureMark is a mark the ledger held with a time after the sweep's now
// (on either clock), or with no first sighting: a sweep whose clock ran
// ahead, or a broken writer, left it.
type FutureMark struct {
	Key       string
	FirstSeen time.Time
	LastSeen  time.Time
	// Ahead is how far its furthest time lay after now.
	Ahead time.Duration
}

// Clocks is the sweep's now on its two clocks. Ref is the reference clock
// every time from outside is written on (the API server's, read from the
// Date of its answers); Local is the sweeping machine's own. Confirmation
// needs both to agree that a hold has passed: a Date that lies (a proxy,
// one API server replica with a bad clock) moves Ref alone, a machine
// whose clock is off moves Local alone, and neither alone can make a mark
// ready early. Either alone can make one wait longer, which is the safe
// way to be wrong.
type Clocks struct {
	Ref, Local time.Time
}

// fromNow returns the marks with every time after now brought back to now,
// on each clock, and lists in out the marks it changed. A mark from the
// future was written by a sweep whose clock ran ahead: taken as it is, it
// would hold a real leak for the length of the skew (and leave last_seen
// before first_seen); taken as old, it could act early. Counted from now,
// it does neither: its confirmation starts again with this sweep. A mark
// with no first sighting starts again too. old is not changed.
func fromNow(now Clocks, old map[string]fleet.Mark, out *Confirmation) map[string]fleet.Mark {
	var fixed map[string]fleet.Mark
	copyOnce := func() {
		if fixed == nil {
			fixed = make(map[string]fleet.Mark, len(old))
			for k, v := range old {
				fixed[k] = v
			}
		}
	}
	for key, m := range old {
		ahead := max(m.FirstSeen.Sub(now.Ref), m.LastSeen.Sub(now.Ref), m.FirstSeenLocal.Sub(now.Local))
		// A time ahead by less than FutureTolerance is within what two
		// machines' clocks are trusted to agree on (another node, an
		// operator's laptop): it delays the mark by that much at most and
		// hurries nothing, so it is left as it is.
		if ahead <= FutureTolerance && !m.FirstSeen.IsZero() && (m.LastSeen.IsZero() || !m.LastSeen.Before(m.FirstSeen)) {
			if m.JobCheckedAt.Sub(now.Ref) > FutureTolerance {
				// Only when its job was last asked about is ahead: it
				// orders the job checks alone, and from the future it
				// would put the runner behind every other for the
				// length of the lie. Brought back to now, quietly.
				copyOnce()
				m.JobCheckedAt = now.Ref
				fixed[key] = m
			}
			continue
		}
		copyOnce()
		out.FromFuture = append(out.FromFuture, FutureMark{Key: key, FirstSeen: m.FirstSeen, LastSeen: m.LastSeen, Ahead: max(ahead, 0)})
		// Both first sightings start again, not only the one that is
		// ahead: a mark looks as if it came from the future also when
		// this sweep's clock has jumped back, and bringing one time
		// back to a now that lies would date the mark in the past on
		// that clock. Started again on both, it waits out its whole
		// hold on the other clock, whichever of the two lies.
		m.FirstSeen, m.FirstSeenLocal = now.Ref, now.Local
		m.LastSeen = now.Ref
		m.JobCheckedAt = minTime(m.JobCheckedAt, now.Ref)
		fixed[key] = m
	}
	if fixed == nil {
		return old
	}
	sort.Slice(out.FromFuture, func(i, j int) bool { return out.FromFuture[i].Key < out.FromFuture[j].Key })
	return fixed
}

// disagree reports whether the two clocks disagree about how long ago the
// mark was first seen by more than ClockDrift.
func disagree(at Clocks, m fleet.Mark) bool {
	if m.FirstSeen.IsZero() || m.FirstSeenLocal.IsZero() {
		return false
	}
	d := at.Ref.Sub(at.Local) - m.FirstSeen.Sub(m.FirstSeenLocal)
	return d > ClockDrift || d < -ClockDrift
}

// held reports whether a mark first seen at first has held for h by now on
// one clock: at least h, and across two sweeps (now after first) even when
// h is zero.
func held(now, first time.Time, h time.Duration) bool {
	return !now.Before(first.Add(h)) && now.After(first)
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}

// Confirm applies mark and sweep: a verdict resting on GitHub's word becomes
// ready only after it has held in two sweeps at least the hold apart; a
// mark whose verdict no longer holds is cleared; a mark in a skipped scope,
// or a ghost mark while a namespace is unobserved, is neither confirmed nor
// cleared.
func Confirm(at Clocks, c Classification, old map[string]fleet.Mark, hold Hold) Confirmation {
	now := at.Ref
	out := Confirmation{Marks: make(map[string]fleet.Mark, len(c.Findings))}
	old = fromNow(at, old, &out)
	newly := map[string]int{}
	for _, f := range c.Findings {
		if !f.NeedsConfirmation() {
			out.Candidates = append(out.Candidates, Candidate{Finding: f, Ready: true})
			continue
		}
		m, seen := old[f.Key]
		if !seen || m.Verdict != f.Verdict {
			m = fleet.Mark{Verdict: f.Verdict, FirstSeen: now, FirstSeenLocal: at.Local}
			if f.Pod != nil {
				newly[f.ScopeKey]++
			}
		} else if disagree(at, m) {
			m.FirstSeen, m.FirstSeenLocal = now, at.Local
			out.Disagreed = append(out.Disagreed, f.Key)
		}
		if m.FirstSeenLocal.IsZero() {
			// A mark from a ledger written before the local clock was
			// kept: it starts again, on both clocks, so that their
			// offset is this sweep's.
			m.FirstSeen, m.FirstSeenLocal = now, at.Local
		}
		// Never before the first sighting, which may be a moment ahead
		// (FutureTolerance).
		m.LastSeen = maxTime(now, m.FirstSeen)
		m.Scope = f.ScopeKey
		if f.Pod != nil {
			m.Namespace, m.Pod, m.RunnerName = f.Pod.Namespace, f.Pod.Name, f.Pod.RunnerName
		}
		if er := f.EphemeralRunner; er != nil {
			m.Namespace, m.Pod, m.RunnerID = er.Namespace, er.Name, er.RunnerID
		}
		if f.Registration != nil {
			m.RunnerID, m.RunnerName = f.Registration.ID, f.Registration.Name
		}
		out.Marks[f.Key] = m
		h := max(hold.of(f.Verdict), f.MinHold)
		// When the mark matures, on the reference clock: the later of
		// the two clocks' answers.
		mature := maxTime(m.FirstSeen.Add(h), now.Add(m.FirstSeenLocal.Add(h).Sub(at.Local)))
		out.Candidates = append(out.Candidates, Candidate{
			Finding:  f,
			Mark:     m,
			MatureAt: mature,
			Ready:    held(now, m.FirstSeen, h) && held(at.Local, m.FirstSeenLocal, h),
		})
	}
	for key, m := range old {
		if _, kept := out.Marks[key]; kept {
			continue
		}
		if c.SkippedScope(m.Scope) || (m.Verdict == fleet.Ghost && len(c.Unobserved) > 0) {
			out.Marks[key] = m
			out.Held = append(out.Held, key)
			continue
		}
		out.Cleared = append(out.Cleared, key)
	}
	sort.Strings(out.Cleared)
	sort.Strings(out.Held)
	sort.Strings(out.Disagreed)

	scopes := make([]string, 0, len(newly))
	for s := range newly {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	for _, s := range scopes {
		n, pods := newly[s], c.ScopePods[s]
		if n >= max(hold.MassSuspicionMin, 1) && pods > 0 && float64(n) >= hold.MassSuspicionFraction*float64(pods) {
			out.MassSuspicion = append(out.MassSuspicion, Suspicion{ScopeKey: s, NewlySuspect: n, Pods: pods})
		}
	}
	return out
}
