package reconcile

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Policy is the part of the configuration that classification depends on.
type Policy struct {
	// RegistrationDeadline is how long a running pod may go without its
	// runner appearing on GitHub before it is unregistered.
	RegistrationDeadline time.Duration
	// StampEnabled turns orphan-stamped on (an owner-stamp label is set).
	StampEnabled bool
	// GhostNamePrefix and GhostLabel say which registrations this
	// deployment owns; with both empty, ghost is off. Nobody else's runners
	// are ever touched.
	GhostNamePrefix string
	GhostLabel      string
	// ARC turns on ARC's own leaks, judged from the EphemeralRunners
	// observed; its ages are in Hold, since they are how long a verdict
	// must stand.
	ARC bool
	// ARCStuckDeletingAfter is how long an EphemeralRunner may wait on a
	// finalizer after its deletion before it is reported.
	ARCStuckDeletingAfter time.Duration
	// Claimed says whether a live claim backs a stamped pod. Nil means the
	// claim source of this release: GitHub says the runner is busy. It is a
	// seam for pools that keep claims elsewhere.
	Claimed func(p Pod, reg *Registration) bool
}

// GitHubBusyClaim is the default claim source: a claim is live while GitHub
// says the runner is running a job.
func GitHubBusyClaim(_ Pod, reg *Registration) bool { return reg != nil && reg.Busy }

// GhostsEnabled reports whether any ownership rule is configured.
func (p Policy) GhostsEnabled() bool { return p.GhostNamePrefix != "" || p.GhostLabel != "" }

// Owns reports whether this deployment owns the registration.
func (p Policy) Owns(r Registration) bool {
	if p.GhostNamePrefix != "" && strings.HasPrefix(r.Name, p.GhostNamePrefix) {
		return true
	}
	if p.GhostLabel != "" {
		for _, l := range r.Labels {
			if strings.EqualFold(l, p.GhostLabel) {
				return true
			}
		}
	}
	return false
}

// Finding is one verdict with the evidence it rests on.
type Finding struct {
	Verdict  Verdict
	Evidence string
	// Key is the ledger key the verdict is marked under.
	Key      string
	ScopeKey string
	// Pod is nil for a ghost.
	Pod *Pod
	// Registration is the GitHub registration to delete first; nil when
	// there is none (or, for a terminal pod, when its scope's list could
	// not be read).
	Registration *Registration
	// EphemeralRunner is set for ARC's own leaks: the object to act on.
	EphemeralRunner *EphemeralRunner
	// Exit is set for terminal pods.
	Exit *Exit
	// Since is when the leaking object appeared, for oldest-first order.
	Since time.Time
	// Gone is true for a zombie whose registration was seen or known and is
	// now absent, as opposed to one that is offline.
	Gone bool
}

// NeedsConfirmation reports whether the verdict rests on what GitHub said.
// Only the kubelet's word (terminal) is final on its own.
func (f Finding) NeedsConfirmation() bool { return f.Verdict != Terminal }

// Skip is a scope whose list gave no verdict this sweep.
type Skip struct {
	ScopeKey string
	Reason   string
}

// Classification is what one sweep concluded.
type Classification struct {
	Findings []Finding
	// Skipped lists scopes whose list was failed, rate-limited or
	// inconsistent: their pods get no GitHub-based verdict and their marks
	// must be neither confirmed nor cleared.
	Skipped []Skip
	// Unscoped counts running pods whose scope or runner name could not be
	// told, or whose scope is not configured; they can only be terminal.
	Unscoped int
	// Protected counts pods spared because GitHub says their runner is busy
	// or a claim backs them.
	Protected int
	// ScopePods counts the classified pods per scope, for the mass
	// suspicion alarm.
	ScopePods map[string]int
	// ManagedPods is every pod observed, the base of the fractional bound.
	ManagedPods int
	// Unobserved lists the configured namespaces whose pods were not seen.
	// While there is one, no ghost verdict is made and ghost marks are
	// held: the sweep is degraded.
	Unobserved []UnobservedNamespace
}

// SkippedScope reports whether a scope's marks must be held this sweep.
func (c Classification) SkippedScope(key string) bool {
	for _, s := range c.Skipped {
		if s.ScopeKey == key {
			return true
		}
	}
	return false
}

// Classify turns one sweep's observation into verdicts. marks are the
// ledger's marks, read only to tell a zombie whose registration has gone
// from a pod that never registered.
func Classify(obs Observation, pol Policy, marks map[string]Mark) Classification {
	claimed := pol.Claimed
	if claimed == nil {
		claimed = GitHubBusyClaim
	}
	out := Classification{ScopePods: map[string]int{}, ManagedPods: len(obs.Pods), Unobserved: obs.Unobserved}

	keys := make([]string, 0, len(obs.Lists))
	byName := make(map[string]map[string]*Registration, len(obs.Lists))
	for key, l := range obs.Lists {
		keys = append(keys, key)
		if !l.Complete {
			continue
		}
		m := make(map[string]*Registration, len(l.Runners))
		for i := range l.Runners {
			m[l.Runners[i].Name] = &l.Runners[i]
		}
		byName[key] = m
	}
	sort.Strings(keys)
	for _, key := range keys {
		if l := obs.Lists[key]; !l.Complete {
			out.Skipped = append(out.Skipped, Skip{ScopeKey: key, Reason: l.Problem})
		}
	}

	// backed holds every runner name some pod stands for, per scope; a
	// pod whose scope is unknown backs the name in every scope, so that a
	// mislabelled pod can never make its registration look like a ghost.
	backed := map[string]map[string]bool{}
	back := func(scope, name string) {
		if backed[scope] == nil {
			backed[scope] = map[string]bool{}
		}
		backed[scope][name] = true
	}

	// An EphemeralRunner's status.runnerId is its pod's registration id:
	// what tells "was registered, now gone" from "never registered".
	arcIDs := make(map[string]int64, len(obs.EphemeralRunners))
	for _, er := range obs.EphemeralRunners {
		if er.RunnerID != 0 {
			arcIDs[er.UID] = er.RunnerID
		}
	}

	for i := range obs.Pods {
		p := &obs.Pods[i]
		back(p.ScopeKey, p.RunnerName)
		if p.Deleting {
			continue
		}
		regs, complete := byName[p.ScopeKey]
		var reg *Registration
		if complete {
			reg = regs[p.RunnerName]
		}
		if f, ok := terminal(p, reg); ok {
			out.Findings = append(out.Findings, f)
			continue
		}
		if p.Phase != "Running" {
			continue
		}
		// A pod that does not say its runner's name cannot be matched
		// to a registration, so GitHub's list says nothing about it.
		if _, observed := obs.Lists[p.ScopeKey]; p.ScopeKey == "" || !observed || p.RunnerName == "" {
			out.Unscoped++
			continue
		}
		out.ScopePods[p.ScopeKey]++
		if !complete {
			continue
		}
		runnerID := p.RunnerID
		if runnerID == 0 && p.Owner != nil {
			runnerID = arcIDs[p.Owner.UID]
		}
		f, protected := judgeRunning(obs.Now, p, runnerID, reg, pol, claimed, marks)
		if protected {
			out.Protected++
		}
		if f != nil {
			out.Findings = append(out.Findings, *f)
		}
	}

	if pol.ARC {
		out.Findings = append(out.Findings, classifyARC(obs, pol, byID(obs.Lists))...)
	}

	// A ghost is a registration that no observed pod backs; with a
	// namespace unobserved, its pods might back any of them.
	if pol.GhostsEnabled() && len(obs.Unobserved) == 0 {
		for _, key := range keys {
			l := obs.Lists[key]
			if !l.Complete {
				continue
			}
			for i := range l.Runners {
				r := &l.Runners[i]
				if r.Online || r.Busy || !pol.Owns(*r) || backed[key][r.Name] || backed[""][r.Name] {
					continue
				}
				out.Findings = append(out.Findings, Finding{
					Verdict:      Ghost,
					Evidence:     fmt.Sprintf("registration %d %q is offline and no observed pod backs it", r.ID, r.Name),
					Key:          RegistrationMarkKey(key, r.ID),
					ScopeKey:     key,
					Registration: r,
				})
			}
		}
	}
	return out
}

// terminal judges on the kubelet's word alone: the pod has ended, or its
// runner container has.
func terminal(p *Pod, reg *Registration) (Finding, bool) {
	var why string
	switch {
	case p.Phase == "Succeeded" || p.Phase == "Failed":
		why = "pod phase " + p.Phase
	case p.Runner.Terminated != nil:
		why = "runner container terminated in a " + p.Phase + " pod"
	default:
		return Finding{}, false
	}
	exit := Fingerprint(p.Runner)
	evidence := fmt.Sprintf("%s; runner exit %s (code %d, reason %q)", why, exit.Class, exit.Code, exit.Reason)
	switch {
	case !p.Runner.Found:
		evidence = why + "; no runner container status: runner exit unknown (was the node or VM killed?)"
	case exit.Class == ExitUnknown:
		evidence = why + "; the runner container recorded no termination: runner exit unknown"
	case exit.FromLastState:
		evidence += " from lastState"
	}
	return Finding{
		Verdict:      Terminal,
		Evidence:     evidence,
		Key:          PodMarkKey(p.UID),
		ScopeKey:     p.ScopeKey,
		Pod:          p,
		Registration: reg,
		Exit:         &exit,
		Since:        p.CreatedAt,
	}, true
}

// judgeRunning classifies a running pod whose scope's list is complete.
func judgeRunning(now time.Time, p *Pod, runnerID int64, reg *Registration, pol Policy, claimed func(Pod, *Registration) bool, marks map[string]Mark) (*Finding, bool) {
	// Rule 2: a runner GitHub reports busy is never a suspect.
	if reg != nil && reg.Busy {
		return nil, true
	}
	f := &Finding{Key: PodMarkKey(p.UID), ScopeKey: p.ScopeKey, Pod: p, Registration: reg, Since: p.CreatedAt}
	switch {
	case pol.StampEnabled && p.Stamped:
		if claimed(*p, reg) {
			return nil, true
		}
		f.Verdict = OrphanStamped
		if reg == nil {
			f.Evidence = fmt.Sprintf("pod is stamped but no live claim backs it; runner %q not registered", p.RunnerName)
		} else {
			f.Evidence = fmt.Sprintf("pod is stamped but no live claim backs it; registration %d is %s and idle", reg.ID, onlineWord(reg.Online))
		}
	case reg != nil && !reg.Online:
		f.Verdict = Zombie
		f.Evidence = fmt.Sprintf("pod running; registration %d %q is offline", reg.ID, reg.Name)
	case reg != nil:
		return nil, false
	case runnerID != 0:
		f.Verdict, f.Gone = Zombie, true
		f.Evidence = fmt.Sprintf("pod running; its registration %d %q was registered (runner id known from Kubernetes) and is gone from the complete list", runnerID, p.RunnerName)
	case marks[f.Key].Verdict == Zombie:
		f.Verdict, f.Gone = Zombie, true
		f.Evidence = fmt.Sprintf("pod running; its registration %q was seen offline and is now gone from the complete list", p.RunnerName)
	case now.Sub(p.CreatedAt) > pol.RegistrationDeadline:
		f.Verdict = Unregistered
		f.Evidence = fmt.Sprintf("pod running for %s, past the %s registration deadline; runner %q never appeared",
			now.Sub(p.CreatedAt).Round(time.Second), pol.RegistrationDeadline, p.RunnerName)
	default:
		return nil, false
	}
	return f, false
}

func onlineWord(online bool) string {
	if online {
		return "online"
	}
	return "offline"
}

// byID indexes the complete lists' registrations by scope and id, for
// EphemeralRunners, which know their runner's id but have no pod to name it.
func byID(lists map[string]ScopeList) map[string]map[int64]*Registration {
	out := make(map[string]map[int64]*Registration, len(lists))
	for key, l := range lists {
		if !l.Complete {
			continue
		}
		m := make(map[int64]*Registration, len(l.Runners))
		for i := range l.Runners {
			m[l.Runners[i].ID] = &l.Runners[i]
		}
		out[key] = m
	}
	return out
}

// classifyARC judges ARC's own leaks. An EphemeralRunner that still has a
// pod is left to the pod's verdict, which removes it through its owner, so
// that one object is never acted on twice in a sweep.
func classifyARC(obs Observation, pol Policy, regs map[string]map[int64]*Registration) []Finding {
	owners := make(map[string]bool, len(obs.Pods))
	for _, p := range obs.Pods {
		if p.Owner != nil {
			owners[p.Owner.UID] = true
		}
	}
	var out []Finding
	for i := range obs.EphemeralRunners {
		er := &obs.EphemeralRunners[i]
		if owners[er.UID] {
			continue
		}
		f := Finding{Key: EphemeralRunnerMarkKey(er.UID), ScopeKey: er.ScopeKey, EphemeralRunner: er, Since: er.CreatedAt}
		if er.RunnerID != 0 {
			f.Registration = regs[er.ScopeKey][er.RunnerID]
		}
		name := fmt.Sprintf("EphemeralRunner %s/%s", er.Namespace, er.Name)
		switch {
		case !er.DeletingSince.IsZero():
			waited := obs.Now.Sub(er.DeletingSince)
			if waited <= pol.ARCStuckDeletingAfter || len(er.Finalizers) == 0 {
				continue
			}
			// Deleting already: there is no registration to remove
			// first, only a finalizer that cannot finish.
			f.Verdict, f.Registration, f.Since = ARCStuckDeleting, nil, er.DeletingSince
			f.Evidence = fmt.Sprintf("%s deleted %s ago, still held by finalizers %v", name, waited.Round(time.Second), er.Finalizers)
		case f.Registration != nil && f.Registration.Busy:
			continue // rule 2: GitHub says a job runs on it
		case er.Phase == "Failed":
			f.Verdict = ARCFailed
			f.Evidence = fmt.Sprintf("%s is in phase Failed (reason %q, message %q) with no pod", name, er.Reason, er.Message)
		default:
			f.Verdict = ARCPodless
			f.Evidence = fmt.Sprintf("%s (phase %q) has no pod and is not being deleted", name, er.Phase)
		}
		out = append(out, f)
	}
	return out
}
