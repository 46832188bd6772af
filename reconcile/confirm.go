package reconcile

import (
	"sort"
	"time"
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

func (h Hold) of(v Verdict) time.Duration {
	switch v {
	case Terminal:
		return 0
	case OrphanStamped:
		return max(h.ConfirmAfter, h.StampMaxAge)
	case ARCFailed:
		return max(h.ConfirmAfter, h.ARCFailedAfter)
	case ARCPodless:
		return max(h.ConfirmAfter, h.ARCPodlessAfter)
	default:
		return h.ConfirmAfter
	}
}

// Candidate is a finding with its confirmation state.
type Candidate struct {
	Finding
	// Mark is the mark as the sweep leaves it (zero for terminal).
	Mark Mark
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
	Marks map[string]Mark
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
}

// FutureMark is a mark the ledger held with a time after the sweep's now:
// a sweep whose clock ran ahead wrote it.
type FutureMark struct {
	Key       string
	FirstSeen time.Time
	LastSeen  time.Time
}

// fromNow returns the marks with every time after now brought back to now,
// and lists in out the marks it changed. A mark from the future was written
// by a sweep whose clock ran ahead: taken as it is, it would hold a real
// leak for the length of the skew (and leave last_seen before first_seen);
// taken as old, it could act early. Counted from now, it does neither: its
// confirmation starts again with this sweep. old is not changed.
func fromNow(now time.Time, old map[string]Mark, out *Confirmation) map[string]Mark {
	var fixed map[string]Mark
	for key, m := range old {
		if !m.FirstSeen.After(now) && !m.LastSeen.After(now) {
			continue
		}
		if fixed == nil {
			fixed = make(map[string]Mark, len(old))
			for k, v := range old {
				fixed[k] = v
			}
		}
		out.FromFuture = append(out.FromFuture, FutureMark{Key: key, FirstSeen: m.FirstSeen, LastSeen: m.LastSeen})
		m.FirstSeen = minTime(m.FirstSeen, now)
		m.LastSeen = minTime(m.LastSeen, now)
		fixed[key] = m
	}
	if fixed == nil {
		return old
	}
	sort.Slice(out.FromFuture, func(i, j int) bool { return out.FromFuture[i].Key < out.FromFuture[j].Key })
	return fixed
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
func Confirm(now time.Time, c Classification, old map[string]Mark, hold Hold) Confirmation {
	out := Confirmation{Marks: make(map[string]Mark, len(c.Findings))}
	old = fromNow(now, old, &out)
	newly := map[string]int{}
	for _, f := range c.Findings {
		if !f.NeedsConfirmation() {
			out.Candidates = append(out.Candidates, Candidate{Finding: f, Ready: true})
			continue
		}
		m, seen := old[f.Key]
		if !seen || m.Verdict != f.Verdict {
			m = Mark{Verdict: f.Verdict, FirstSeen: now}
			if f.Pod != nil {
				newly[f.ScopeKey]++
			}
		}
		m.LastSeen = now
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
		mature := m.FirstSeen.Add(hold.of(f.Verdict))
		out.Candidates = append(out.Candidates, Candidate{
			Finding:  f,
			Mark:     m,
			MatureAt: mature,
			Ready:    !now.Before(mature) && now.After(m.FirstSeen),
		})
	}
	for key, m := range old {
		if _, kept := out.Marks[key]; kept {
			continue
		}
		if c.SkippedScope(m.Scope) || (m.Verdict == Ghost && len(c.Unobserved) > 0) {
			out.Marks[key] = m
			out.Held = append(out.Held, key)
			continue
		}
		out.Cleared = append(out.Cleared, key)
	}
	sort.Strings(out.Cleared)
	sort.Strings(out.Held)

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
