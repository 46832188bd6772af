// Package loops finds reap loops: one group of runner pods (fleet.Group,
// what made them) reaped again and again for the same failure, which a
// broken template causes (an image that cannot be pulled, a runner
// version GitHub no longer accepts, a Secret the template names and that
// does not exist). Deleting each failure quietly would hide the fault and
// keep the cluster churning, so the sweep reports the loop and spreads
// out the actions that need confirmation.
//
// It is pure: the window it reads and returns is the ledger's
// (state.Ledger.Loops), and every time is the API server's, as the sweep
// reads now.
package loops

import (
	"cmp"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

// Policy is when a group's actions are a loop: Threshold or more of them
// within Window with one fingerprint.
type Policy struct {
	Threshold int
	Window    time.Duration
}

// The defaults, and the bounds REAPER_LOOP_THRESHOLD and
// REAPER_LOOP_WINDOW are held to.
const (
	DefaultThreshold = 5
	DefaultWindow    = 30 * time.Minute
	// MinThreshold: one action is no loop.
	MinThreshold = 2
	// MaxThreshold keeps a group's entries (twice the threshold) to a
	// few kilobytes of ledger.
	MaxThreshold = 50
	// MaxWindow: a window longer than a day would call a weekly failure
	// a loop.
	MaxWindow = 24 * time.Hour
	// MaxGroups is the most groups the window keeps, those acted on most
	// recently: a fleet of more templates than that failing at once
	// reports the busiest.
	MaxGroups = 64
	// futureSlack is how far after now an entry may be dated and still
	// count: a little, for the clocks of two sweeps' API servers; more is
	// a clock that lied, and the entry is dropped rather than kept for
	// longer than the window.
	futureSlack = time.Minute
)

// perGroup is how many entries a group keeps, the newest: twice the
// threshold, so that a group alternating between two failures still
// holds a threshold's worth of either.
func (p Policy) perGroup() int { return 2 * max(p.Threshold, MinThreshold) }

// Fingerprint is how the candidate's runner failed, the key a loop is
// counted by: a terminal pod's exit class (reconcile.Fingerprint), a
// never-started pod's waiting reason (at most MaxFingerprint bytes of it),
// else the verdict's name.
func Fingerprint(c reconcile.Candidate) string {
	switch {
	case c.Verdict == fleet.Terminal && c.Exit != nil:
		return string(c.Exit.Class)
	case c.Verdict == fleet.NeverStarted && c.Pod != nil && c.Pod.StartWait != nil && c.Pod.StartWait.Reason != "":
		return truncate(c.Pod.StartWait.Reason, MaxFingerprint)
	}
	return string(c.Verdict)
}

// MaxFingerprint bounds a fingerprint taken from the pod (a waiting
// reason, which the kubelet or a runtime writes and nothing bounds): it
// goes into the ledger, a metric label and an Event, and Kubernetes' own
// reasons are a few dozen bytes.
const MaxFingerprint = 64

// truncate is s cut to at most n bytes, at a rune's boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Failure reports whether an action of the verdict with the fingerprint
// is a failure a broken template causes, the only kind a loop counts: a
// runner that exited because its version is refused (outdated), crashed,
// ran out of memory or was killed; a pod that never started, whatever it
// waits for; a runner that never registered (a bad token or GitHub App, a
// scope or network path the template sets). A runner that ended as
// runners end (exit 0, SIGTERM) or with no exit recorded is a pool
// tidying its finished pods, however many it has. A zombie is not counted
// either: its verdict rests on GitHub's offline flag, which a GitHub
// incident or a network partition sets for every group's runners at once,
// a fault of no template; a looping group's zombies are still held with
// its other confirmed verdicts.
func Failure(verdict, fingerprint string) bool {
	switch fleet.Verdict(verdict) {
	case fleet.Terminal:
		switch reconcile.ExitClass(fingerprint) {
		case reconcile.ExitOutdated, reconcile.ExitCrash, reconcile.ExitOOMHost, reconcile.ExitSIGKILL:
			return true
		}
	case fleet.NeverStarted, fleet.Unregistered:
		return true
	}
	return false
}

// Act is one action really done, to be added to the window.
type Act struct {
	Group fleet.Group
	Entry state.LoopEntry
}

// ActOf is the window's entry for a candidate acted on at now; false for
// one whose pod is in no group (or that has no pod: a ghost, ARC's own
// leaks without one), and for one that is no failure (Failure), which no
// loop counts.
func ActOf(c reconcile.Candidate, now time.Time) (Act, bool) {
	if c.Pod == nil || c.Pod.Group.IsZero() {
		return Act{}, false
	}
	// To the second: the window's times are kept for minutes, and a
	// second's precision keeps each entry short in a ledger with a limit.
	e := state.LoopEntry{At: now.Truncate(time.Second), Fingerprint: Fingerprint(c), Verdict: string(c.Verdict)}
	if !Failure(e.Verdict, e.Fingerprint) {
		return Act{}, false
	}
	return Act{Group: c.Pod.Group, Entry: e}, true
}

// Prune is the window w as it stands at now: each group's entries within
// the window (none dated more than a little after now) that are failures
// (Failure: a window an older release wrote may hold others), in time order, at
// most twice the threshold of the newest; and at most MaxGroups groups,
// those whose newest entry is the latest. A group left with no entry goes.
// w is not changed.
func Prune(w map[string][]state.LoopEntry, now time.Time, p Policy) map[string][]state.LoopEntry {
	from, to := now.Add(-p.Window), now.Add(futureSlack)
	out := map[string][]state.LoopEntry{}
	for g, es := range w {
		var kept []state.LoopEntry
		for _, e := range es {
			if e.At.After(from) && !e.At.After(to) && Failure(e.Verdict, e.Fingerprint) {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			continue
		}
		slices.SortStableFunc(kept, func(a, b state.LoopEntry) int { return a.At.Compare(b.At) })
		if n := p.perGroup(); len(kept) > n {
			kept = kept[len(kept)-n:]
		}
		out[g] = kept
	}
	if len(out) > MaxGroups {
		groups := slices.SortedFunc(maps.Keys(out), func(a, b string) int {
			la, lb := out[a][len(out[a])-1].At, out[b][len(out[b])-1].At
			return cmp.Or(lb.Compare(la), cmp.Compare(a, b))
		})
		for _, g := range groups[MaxGroups:] {
			delete(out, g)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Add is the window w with the acts added, pruned at now (see Prune).
// w is not changed.
func Add(w map[string][]state.LoopEntry, acts []Act, now time.Time, p Policy) map[string][]state.LoopEntry {
	next := make(map[string][]state.LoopEntry, len(w)+len(acts))
	for g, es := range w {
		next[g] = slices.Clone(es)
	}
	for _, a := range acts {
		g := a.Group.String()
		next[g] = append(next[g], a.Entry)
	}
	return Prune(next, now, p)
}

// Loop is one group in a reap loop.
type Loop struct {
	Group fleet.Group
	// Count is how many of the group's actions within the window share
	// Fingerprint, at least the threshold.
	Count       int
	Fingerprint string
	// Verdict is the verdict of the newest of those actions.
	Verdict string
	// First and Last are when the first and the last of them were done.
	First, Last time.Time
	// Fix says what to look at, for the operator.
	Fix string
}

// Detect finds the loops in the window at now: each group whose commonest
// fingerprint within the window counts at least the threshold. Loops come
// most actions first, then by group.
func Detect(w map[string][]state.LoopEntry, now time.Time, p Policy) []Loop {
	if p.Threshold < MinThreshold {
		return nil // the zero Policy: no loop is ever found
	}
	var out []Loop
	for g, es := range Prune(w, now, p) {
		counts := map[string]int{}
		for _, e := range es {
			counts[e.Fingerprint]++
		}
		// The commonest fingerprint; a tie goes to the newest action's.
		best := ""
		for i := len(es) - 1; i >= 0; i-- {
			if f := es[i].Fingerprint; best == "" || counts[f] > counts[best] {
				best = f
			}
		}
		if counts[best] < p.Threshold {
			continue
		}
		group := fleet.ParseGroup(g)
		if group.IsZero() {
			continue // a key edited by hand, which names no group
		}
		l := Loop{Group: group, Count: counts[best], Fingerprint: best, Fix: Fix(best)}
		for _, e := range es {
			if e.Fingerprint != best {
				continue
			}
			if l.First.IsZero() {
				l.First = e.At
			}
			l.Last, l.Verdict = e.At, e.Verdict
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Loop) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Group.String(), b.Group.String()))
	})
	return out
}

// Looping is the set of groups in a loop, for the back-off.
func Looping(ls []Loop) map[fleet.Group]bool {
	if len(ls) == 0 {
		return nil
	}
	out := make(map[fleet.Group]bool, len(ls))
	for _, l := range ls {
		out[l.Group] = true
	}
	return out
}

// Fix is what a fingerprint asks the operator to look at.
func Fix(fingerprint string) string {
	switch fingerprint {
	case string(reconcile.ExitOutdated):
		return "runner version deprecated: update the runner image"
	case "ImagePullBackOff", "ErrImagePull", "InvalidImageName":
		return "the runner image cannot be pulled: check the image name and pull secret"
	case "CreateContainerConfigError":
		return "a Secret or ConfigMap the template names is missing"
	case "CreateContainerError":
		return "the runtime cannot create the runner container: check the template's command, mounts and security context"
	case "Unschedulable":
		return "no node can take the runner pod: check its resource requests, node selector and tolerations"
	case string(reconcile.ExitOOMHost):
		return "the runner container hits its memory limit: raise the limit in the template"
	case string(reconcile.ExitSIGKILL):
		return "the runner is killed (an OOM in a VM, or another SIGKILL): check the node's or VM's memory"
	case string(reconcile.ExitCrash):
		return "the runner crashes on start: read the runner container's log (kubectl logs --previous) and check the template's image, command and environment"
	case string(fleet.Unregistered):
		return "the runners never register on GitHub: check the registration token or GitHub App, the scope and the network path to GitHub"
	}
	return "the group's runners keep failing the same way: check its template, and the runner container's log"
}

// groupAPIs are the API versions of the kinds a group names, where the
// pod does not say it (ARC's labels name a set, not its API).
var groupAPIs = map[string]string{
	fleet.GroupScaleSet:         fleet.EphemeralRunnerAPIVersion,
	fleet.GroupRunnerDeployment: fleet.LegacyRunnerAPIVersion,
	fleet.GroupRunnerSet:        fleet.LegacyRunnerAPIVersion,
	"ReplicaSet":                "apps/v1",
	"StatefulSet":               "apps/v1",
	"DaemonSet":                 "apps/v1",
	"Job":                       "batch/v1",
}

// Target is the object a loop's Event goes on, in its namespace: what
// makes the group's pods (the AutoscalingRunnerSet, RunnerDeployment,
// RunnerSet, or the pods' controller, with its UID where last, the pod
// acted on last, names it), which is what the operator fixes; else, for a
// group by generateName or a kind whose API is not known, last itself.
// ok is false when there is neither.
func Target(g fleet.Group, last *fleet.Pod) (namespace string, o fleet.Owner, ok bool) {
	kind, ns, name := g.Parts()
	if last != nil && last.Owner != nil && last.Owner.Kind == kind && last.Owner.Name == name && last.Namespace == ns {
		return ns, *last.Owner, true
	}
	if api, known := groupAPIs[kind]; known {
		return ns, fleet.Owner{APIVersion: api, Kind: kind, Name: name}, true
	}
	if last == nil {
		return "", fleet.Owner{}, false
	}
	return last.Namespace, fleet.Owner{APIVersion: "v1", Kind: "Pod", Name: last.Name, UID: last.UID}, true
}
