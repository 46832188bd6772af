package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Policy is the part of the configuration that classification depends on.
type Policy struct {
	// RegistrationDeadline is how long a running pod may go without its
	// runner appearing on GitHub before it is unregistered.
	RegistrationDeadline time.Duration
	// StartDeadline is how long a runner pod's runner container may go
	// without starting, counted from when the pod was scheduled (from its
	// creation while it waits for room), before the pod is never-started. Zero turns the verdict off (the configuration never
	// gives zero; tables that judge other verdicts leave it so).
	StartDeadline time.Duration
	// DeleteUnschedulable lets a never-started pod that only waits for
	// room in the cluster (fleet.StartWait.Unschedulable) act; without it
	// such a pod is reported and left.
	DeleteUnschedulable bool
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
	Claimed func(p fleet.Pod, reg *fleet.Registration) bool
}

// GitHubBusyClaim is the default claim source: a claim is live while GitHub
// says the runner is running a job.
func GitHubBusyClaim(_ fleet.Pod, reg *fleet.Registration) bool { return reg != nil && reg.Busy }

// GhostsEnabled reports whether any ownership rule is configured.
func (p Policy) GhostsEnabled() bool { return p.GhostNamePrefix != "" || p.GhostLabel != "" }

// Owns reports whether this deployment owns the registration.
func (p Policy) Owns(r fleet.Registration) bool {
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
	Verdict  fleet.Verdict
	Evidence string
	// Key is the ledger key the verdict is marked under.
	Key      string
	ScopeKey string
	// Pod is nil for a ghost.
	Pod *fleet.Pod
	// Registration is the GitHub registration to delete first; nil when
	// there is none, or, for a terminal pod, when its scope's list could
	// not be read or its runner name or id is ambiguous.
	Registration *fleet.Registration
	// EphemeralRunner is set for ARC's own leaks: the object to act on.
	EphemeralRunner *fleet.EphemeralRunner
	// OwnerRunner is the observed EphemeralRunner that controls the pod,
	// when ARC's objects are watched: the object the action deletes,
	// held to the version observed, so that one deleted since is never
	// deleted "again" and reported done.
	OwnerRunner *fleet.EphemeralRunner
	// RunnerID is the runner's registration id as far as anything knows
	// it (the registration, the pod, its EphemeralRunner); 0 when unknown.
	RunnerID int64
	// RegistrationAbsent is true when the runner's id is known and its
	// scope's complete list does not hold it: proof that the registration
	// is gone, which lets the choke point release ARC's registration
	// finalizer (fleet.ARCRegistrationFinalizer).
	RegistrationAbsent bool
	// AbsenceUnproven is true when the verdict, or the release of ARC's
	// registration finalizer, rests on the runner not being listed, and
	// its scope's list moved while it was read (ScopeList.Moved): the
	// runner may have slid onto a page already read. The choke point then
	// looks the runner up by name before it acts on that absence, and only
	// a definite "no such runner" proves it.
	AbsenceUnproven bool
	// Job is the job the runner is known to have held: its
	// EphemeralRunner's, else its pod's (REAPER_JOB_FROM); nil when none
	// is known. The choke point asks GitHub about it before deleting a
	// running runner, and the report names it.
	Job *fleet.Job
	// Exit is set for terminal pods.
	Exit *Exit
	// Since is when the leaking object appeared, for oldest-first order.
	Since time.Time
	// Gone is true for a zombie whose registration was seen or known and is
	// now absent, as opposed to one that is offline.
	Gone bool
	// ReportOnly is true for a verdict that is reported and acts on
	// nothing: an EphemeralRunner stuck deleting whose pod and
	// registration are both still there, which may be running the job
	// ARC waits for; a never-started pod that only waits for room in the
	// cluster, unless Policy.DeleteUnschedulable.
	ReportOnly bool
	// MinHold, when set, is the least time the verdict's mark must hold,
	// beyond its verdict's own hold: an unregistered runner whose start
	// cannot be read (its node's clock runs ahead) gets the whole
	// registration deadline from the reaper's own first sighting.
	MinHold time.Duration
}

// NeedsConfirmation reports whether the verdict rests on what GitHub said.
// Only the kubelet's word (terminal) is final on its own.
// A report (ReportOnly) acts on nothing and keeps no mark: it is reported
// each sweep, and should the same object later be judged for an action, its
// mark starts then, from nothing.
func (f Finding) NeedsConfirmation() bool { return f.Verdict != fleet.Terminal && !f.ReportOnly }

// Skip is a scope whose list gave no verdict this sweep.
type Skip struct {
	ScopeKey string
	Reason   string
	// Kind is failed, rate-limited or inconsistent.
	Kind fleet.SkipKind
	// Until is when GitHub takes requests again, for a rate-limited skip.
	Until time.Time
}

// Ambiguity is a runner name (or id) in a scope that cannot be tied to one
// pod and one registration. Nothing is deleted by an ambiguous name: the
// registration it finds may belong to a live namesake.
type Ambiguity struct {
	ScopeKey   string
	RunnerName string
	// RunnerID is set when the ambiguity is an id that more than one pod
	// claims.
	RunnerID int64
	Reason   string
	// Pods are the claimants' namespace/name, sorted.
	Pods []string
	// Registrations are the ids of the registrations listed under the
	// name, when there are more than one.
	Registrations []int64
}

// Classification is what one sweep concluded.
type Classification struct {
	Findings []Finding
	// Skipped lists scopes whose list was failed, rate-limited or
	// inconsistent: their pods get no GitHub-based verdict and their marks
	// must be neither confirmed nor cleared.
	Skipped []Skip
	// Ambiguities lists the runner names and ids that no registration
	// action may be taken on this sweep, sorted by scope and name.
	Ambiguities []Ambiguity
	// Unscoped counts running pods whose scope or runner name could not be
	// told, or whose scope is not configured; they can only be terminal.
	Unscoped int
	// NotRunner counts observed pods with no runner container: the
	// selector matched them, but they are never judged.
	NotRunner int
	// Protected counts pods spared because GitHub says their runner is busy
	// or a claim backs them.
	Protected int
	// OwnerDeleting counts runner pods left without a verdict because
	// their EphemeralRunner is being deleted: ARC removes them with it.
	OwnerDeleting int
	// ScopePods counts the classified pods per scope, for the mass
	// suspicion alarm.
	ScopePods map[string]int
	// ManagedPods is every runner pod observed, the base of the fractional
	// bound; pods that are not runners do not widen it.
	ManagedPods int
	// Unobserved lists the configured namespaces whose pods were not seen.
	// While there is one, no ghost verdict is made and ghost marks are
	// held: the sweep is degraded.
	Unobserved []fleet.UnobservedNamespace
	// ForeignOwners lists the runner pods (namespace/name) whose labels
	// and EphemeralRunner disagree and whose EphemeralRunner's
	// githubConfigUrl names no configured scope: another organization, or
	// a host other than the one the reaper lists (a proxy in
	// REAPER_GITHUB_API_URL says nothing of the web host ARC was given).
	// They get no verdict from GitHub's lists (scopeFromOwners).
	ForeignOwners []string
	// FutureStarts lists the running pods whose runner, by its node's
	// clock, started after now: that node's clock runs ahead. Such a
	// runner's registration deadline counts from its pod's creation
	// instead, and the skew is worth a warning.
	FutureStarts []FutureStart
}

// FutureStart is a running pod whose runner's start lies after now.
type FutureStart struct {
	Namespace, Pod string
	Ahead          time.Duration
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
func Classify(obs Observation, pol Policy, marks map[string]fleet.Mark) Classification {
	claimed := pol.Claimed
	if claimed == nil {
		claimed = GitHubBusyClaim
	}
	out := Classification{ScopePods: map[string]int{}, Unobserved: obs.Unobserved}

	keys := make([]string, 0, len(obs.Lists))
	for key := range obs.Lists {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if l := obs.Lists[key]; !l.Listed() {
			out.Skipped = append(out.Skipped, Skip{ScopeKey: key, Reason: l.Problem, Kind: cmp.Or(l.Skip, fleet.SkipFailed), Until: l.Until})
		}
	}

	// An EphemeralRunner's status.runnerId is its pod's registration id:
	// what tells "was registered, now gone" from "never registered".
	ers := newRunnerIndex(obs.EphemeralRunners)
	obs.Pods, out.ForeignOwners = scopeFromOwners(obs.Pods, ers, obs.Lists)
	runnerID := func(p *fleet.Pod) int64 {
		if p.RunnerID == 0 && p.Owner != nil {
			if er := ers.byUID(p.Owner.UID); er != nil {
				return er.RunnerID
			}
			return 0
		}
		return p.RunnerID
	}
	ix := index(obs, runnerID, pol.GhostsEnabled() && len(obs.Unobserved) == 0)
	out.Ambiguities = ix.ambiguities(keys)

	j := podJudge{obs: obs, pol: pol, claimed: claimed, marks: marks, ix: ix, ers: ers}
	for i := range obs.Pods {
		j.judge(&obs.Pods[i], ix.podIDs[i], &out)
	}

	if pol.ARC {
		out.Findings = append(out.Findings, classifyARC(obs, pol, ix.lists)...)
	}

	// A ghost is a registration that no observed pod backs; with a
	// namespace unobserved, its pods might back any of them.
	if pol.GhostsEnabled() && len(obs.Unobserved) == 0 {
		for _, key := range keys {
			l := obs.Lists[key]
			if !l.Listed() {
				continue
			}
			for i := range l.Runners {
				r := &l.Runners[i]
				// A name listed twice is no one registration's own:
				// deleting by it could remove a live runner's.
				if r.Online || r.Busy || !pol.Owns(*r) || ix.backed(key, r) || ix.lists[key].byName.n(r.Name) > 1 {
					continue
				}
				out.Findings = append(out.Findings, Finding{
					Verdict:      fleet.Ghost,
					Evidence:     fmt.Sprintf("registration %d %q is offline and no observed pod backs it", r.ID, r.Name),
					Key:          fleet.RegistrationMarkKey(key, r.ID),
					ScopeKey:     key,
					Registration: r,
				})
			}
		}
	}
	return out
}

// identities indexes, per scope, who claims which runner: the observed pods
// by runner name and id, and the listed scopes' registrations by name and
// id. It is how a pod is tied to its own registration and never to a
// namesake's.
type identities struct {
	pods []fleet.Pod
	// names holds every pod claiming a runner name, by scope and name. A
	// pod whose scope is unknown is under "" and claims the name in every
	// scope, so that a mislabelled pod can neither make its registration
	// look like a ghost nor leave a namesake looking unique.
	names positions[scoped[string]]
	// ids holds every pod claiming a runner id, by scope and id; podIDs
	// is each pod's id, worked out once rather than at every comparison.
	ids    positions[scoped[int64]]
	podIDs []int64
	// unscopedNames and unscopedIDs say whether any pod of no known scope
	// claims a name or an id: nearly never, so the lookups under "" that
	// every claim would add are skipped.
	unscopedNames, unscopedIDs bool
	// runners and runnerNames hold the registrations ARC's
	// EphemeralRunners stand for, by scope and runner id or name: an
	// EphemeralRunner whose pod is not there yet (a quota, a webhook)
	// still backs its registration, which must not look like a ghost.
	runners     positions[scoped[int64]]
	runnerNames positions[scoped[string]]
	// lists holds the lists that serve verdicts: complete ones, and
	// those that moved (ScopeList.Listed).
	lists map[string]listIndex
}

// listIndex is one listed scope's registrations by name and by id.
type listIndex struct {
	runners []fleet.Registration
	byName  positions[string]
	ids     positions[int64]
	// proves is whether the list proves absence (ScopeList.Complete): a
	// list that moved proves only what it holds.
	proves bool
}

func newListIndex(runners []fleet.Registration, proves bool) listIndex {
	return listIndex{
		runners: runners,
		proves:  proves,
		byName:  newPositions(len(runners), nil, func(i int32) string { return runners[i].Name }, strings.Compare),
		ids:     newPositions(len(runners), nil, func(i int32) int64 { return runners[i].ID }, cmp.Compare[int64]),
	}
}

// byID is the registration with the id (the last, were the list to hold it
// twice, which a list read to its end never does), or nil.
func (l listIndex) byID(id int64) *fleet.Registration {
	if at, ok := l.ids.last(id); ok {
		return &l.runners[at]
	}
	return nil
}

// index builds the identities; the registrations EphemeralRunners stand
// for (runners, runnerNames) only when ghosts are judged, the one thing
// that reads them.
func index(obs Observation, runnerID func(*fleet.Pod) int64, ghosts bool) identities {
	pods, ers := obs.Pods, obs.EphemeralRunners
	ix := identities{pods: pods, podIDs: make([]int64, len(pods)), lists: make(map[string]listIndex, len(obs.Lists))}
	for i := range pods {
		ix.podIDs[i] = runnerID(&pods[i])
		if pods[i].ScopeKey == "" {
			ix.unscopedNames = ix.unscopedNames || pods[i].RunnerName != ""
			ix.unscopedIDs = ix.unscopedIDs || ix.podIDs[i] != 0
		}
	}
	// Every observed pod claims its name and id, whatever its phase,
	// deletion or container: each is something a registration may belong
	// to.
	ix.names = newPositions(len(pods), func(i int) bool { return pods[i].RunnerName != "" },
		func(i int32) scoped[string] { return scoped[string]{pods[i].ScopeKey, pods[i].RunnerName} }, compareScoped[string])
	ix.ids = newPositions(len(pods), func(i int) bool { return ix.podIDs[i] != 0 },
		func(i int32) scoped[int64] { return scoped[int64]{pods[i].ScopeKey, ix.podIDs[i]} }, compareScoped[int64])
	if ghosts {
		ix.runners = newPositions(len(ers), func(i int) bool { return ers[i].RunnerID != 0 },
			func(i int32) scoped[int64] { return scoped[int64]{ers[i].ScopeKey, ers[i].RunnerID} }, compareScoped[int64])
		ix.runnerNames = newPositions(len(ers), nil,
			func(i int32) scoped[string] { return scoped[string]{ers[i].ScopeKey, ers[i].Name} }, compareScoped[string])
	}
	for key, l := range obs.Lists {
		if l.Listed() {
			ix.lists[key] = newListIndex(l.Runners, l.Complete)
		}
	}
	return ix
}

// claimants are the pods claiming the name in the scope.
func (ix identities) claimants(scope, name string) []*fleet.Pod {
	ps := pointers(ix.pods, ix.names.of(scoped[string]{scope, name}))
	if scope != "" && ix.unscopedNames {
		ps = append(ps, pointers(ix.pods, ix.names.of(scoped[string]{"", name}))...)
	}
	return ps
}

// claims is how many pods claim the name in the scope: len(claimants),
// without building the list.
func (ix identities) claims(scope, name string) int {
	return ix.names.n(scoped[string]{scope, name}) + ix.unscopedClaims(scope, name)
}

// unscopedClaims is how many pods of no known scope claim the name in
// another scope.
func (ix identities) unscopedClaims(scope, name string) int {
	if scope == "" || !ix.unscopedNames {
		return 0
	}
	return ix.names.n(scoped[string]{"", name})
}

// idClaims is how many pods claim the id in the scope, and those of no
// known scope with them. Under the scope "" (which no configured scope's
// key is: each holds a colon) a pod of no known scope is counted twice,
// as before the indexes were positions: such a pod is then ambiguous,
// never tied to a registration by its id.
func (ix identities) idClaims(scope string, id int64) int {
	return ix.ids.n(scoped[int64]{scope, id}) + ix.unscopedIDClaims(id)
}

// unscopedIDClaims is how many pods of no known scope claim the id.
func (ix identities) unscopedIDClaims(id int64) int {
	if !ix.unscopedIDs {
		return 0
	}
	return ix.ids.n(scoped[int64]{"", id})
}

// idClaimants are the pods idClaims counts: the scope's, then those of no
// known scope.
func (ix identities) idClaimants(scope string, id int64) []*fleet.Pod {
	ps := pointers(ix.pods, ix.ids.of(scoped[int64]{scope, id}))
	if ix.unscopedIDs {
		ps = append(ps, pointers(ix.pods, ix.ids.of(scoped[int64]{"", id}))...)
	}
	return ps
}

// backed reports whether an observed pod stands for the registration, by
// name or by id.
//
// A pod's id backs a registration only under the pod's own name: an id
// that names a registration of another name ties the pod to nothing (see
// match), so it may not shield that registration either. A pod that says
// no name still backs its id's registration: it may be its own.
func (ix identities) backed(scope string, r *fleet.Registration) bool {
	byID := func(at []int32) bool {
		return slices.ContainsFunc(at, func(i int32) bool { return ix.pods[i].RunnerName == r.Name || ix.pods[i].RunnerName == "" })
	}
	return ix.claims(scope, r.Name) > 0 || byID(ix.ids.of(scoped[int64]{scope, r.ID})) || byID(ix.ids.of(scoped[int64]{"", r.ID})) ||
		ix.runners.n(scoped[int64]{scope, r.ID}) > 0 || ix.runnerNames.n(scoped[string]{scope, r.Name}) > 0
}

// match is what a pod's scope's list says of its registration.
type match struct {
	reg *fleet.Registration
	// ambiguous: the pod cannot be tied to one registration, so no
	// registration action may be taken for it.
	ambiguous bool
	// protected: the name is ambiguous and one of its registrations is
	// busy or online, so the pod may be running a job.
	protected bool
}

// match ties a pod to its registration: by the runner id where Kubernetes
// knows it, else by name, and only when nothing else claims that name and
// the list holds it once.
//
// An id and a name that disagree tie the pod to nothing: the id names a
// registration of another name (GitHub does not rename runners), or the
// pod says no name to check it against. The id may be stale (a template
// copied from a live pod carries ARC's annotation; a runner registered
// again under its name with a new id) or written by someone other than
// ARC; trusted alone, it would make a pod whose runner is connected, maybe
// running a job, a zombie, or delete another runner's registration. A gone
// id whose name is listed falls back to the name: the registration the
// pod's runner holds now, whose delete GitHub refuses while it runs a job.
func (ix identities) match(p *fleet.Pod, id int64) match {
	if id != 0 {
		if ix.idClaims(p.ScopeKey, id) > 1 {
			return match{ambiguous: true}
		}
		list := ix.lists[p.ScopeKey]
		reg := list.byID(id)
		switch {
		case p.RunnerName == "" || reg != nil && reg.Name != p.RunnerName:
			m := match{ambiguous: true, protected: reg != nil && (reg.Busy || reg.Online)}
			for _, i := range list.byName.of(p.RunnerName) {
				m.protected = m.protected || list.runners[i].Busy || list.runners[i].Online
			}
			return m
		case reg == nil && list.byName.n(p.RunnerName) > 0:
			return ix.matchName(p)
		}
		return match{reg: reg}
	}
	return ix.matchName(p)
}

// matchName ties a pod to the one registration its runner name has.
func (ix identities) matchName(p *fleet.Pod) match {
	if p.RunnerName == "" {
		return match{}
	}
	if ix.claims(p.ScopeKey, p.RunnerName) > 1 {
		return match{ambiguous: true}
	}
	list := ix.lists[p.ScopeKey]
	at := list.byName.of(p.RunnerName)
	switch len(at) {
	case 0:
		return match{}
	case 1:
		return match{reg: &list.runners[at[0]]}
	}
	m := match{ambiguous: true}
	for _, i := range at {
		if list.runners[i].Busy || list.runners[i].Online {
			m.protected = true
		}
	}
	return m
}

// ambiguities lists, for the observed scopes (sorted keys), every name or
// id claimed by more than one pod of that scope, and every name a listed
// scope's list holds more than once.
func (ix identities) ambiguities(keys []string) []Ambiguity {
	podNames := func(ps []*fleet.Pod) []string {
		names := make([]string, 0, len(ps))
		for _, p := range ps {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		sort.Strings(names)
		return names
	}
	found := make(map[string][]Ambiguity, len(keys))
	for _, key := range keys {
		found[key] = nil
	}
	ix.names.runs(func(k scoped[string], at []int32) {
		if _, observed := found[k.scope]; !observed || len(at)+ix.unscopedClaims(k.scope, k.k) < 2 {
			return
		}
		ps := ix.claimants(k.scope, k.k)
		found[k.scope] = append(found[k.scope], Ambiguity{ScopeKey: k.scope, RunnerName: k.k, Pods: podNames(ps),
			Reason: fmt.Sprintf("runner name claimed by %d observed pods; no registration is deleted by it", len(ps))})
	})
	ix.ids.runs(func(k scoped[int64], at []int32) {
		if _, observed := found[k.scope]; !observed || len(at)+ix.unscopedIDClaims(k.k) < 2 {
			return
		}
		all := ix.idClaimants(k.scope, k.k)
		found[k.scope] = append(found[k.scope], Ambiguity{ScopeKey: k.scope, RunnerName: all[0].RunnerName, RunnerID: k.k, Pods: podNames(all),
			Reason: fmt.Sprintf("runner id claimed by %d observed pods; no registration is deleted by it", len(all))})
	})
	var out []Ambiguity
	for _, key := range keys {
		l := ix.lists[key]
		l.byName.runs(func(name string, at []int32) {
			if len(at) < 2 {
				return
			}
			a := Ambiguity{ScopeKey: key, RunnerName: name, Pods: podNames(ix.claimants(key, name))}
			live := false
			for _, i := range at {
				r := &l.runners[i]
				a.Registrations = append(a.Registrations, r.ID)
				live = live || r.Busy || r.Online
			}
			sort.Slice(a.Registrations, func(i, j int) bool { return a.Registrations[i] < a.Registrations[j] })
			a.Reason = fmt.Sprintf("%d registrations share the name; nothing is deleted by it", len(at))
			if live {
				a.Reason += ", and a pod claiming it is protected because one of them is busy or online"
			}
			found[key] = append(found[key], a)
		})
		f := found[key]
		sort.Slice(f, func(i, j int) bool {
			if f[i].RunnerName != f[j].RunnerName {
				return f[i].RunnerName < f[j].RunnerName
			}
			if f[i].RunnerID != f[j].RunnerID {
				return f[i].RunnerID < f[j].RunnerID
			}
			return f[i].Reason < f[j].Reason
		})
		out = append(out, f...)
	}
	return out
}

// RunnerEnded reports whether the kubelet says the pod's runner has ended,
// as the terminal verdict reads it: such a runner holds no job, whatever
// else is judged of its pod.
func RunnerEnded(p *fleet.Pod) bool {
	_, ended := terminal(p, nil)
	return ended
}

// terminal judges on the kubelet's word alone: the pod has ended, or its
// runner container has (and is not running again).
func terminal(p *fleet.Pod, reg *fleet.Registration) (Finding, bool) {
	var why string
	switch {
	case p.Phase == "Succeeded" || p.Phase == "Failed":
		why = "pod phase " + p.Phase
	case p.Runner.Terminated != nil:
		why = "runner container terminated in a " + p.Phase + " pod"
	case p.Phase == "Running" && !p.Runner.Running && p.Runner.LastTerminated != nil:
		// Waiting after a termination, CrashLoopBackOff: the runner
		// that was there has ended, and nothing runs in its place.
		why = "runner container not running after a termination in a Running pod"
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
		Verdict:      fleet.Terminal,
		Evidence:     evidence,
		Key:          fleet.PodMarkKey(p.UID),
		ScopeKey:     p.ScopeKey,
		Pod:          p,
		Registration: reg,
		Exit:         &exit,
		Since:        p.CreatedAt.Time(),
	}, true
}

// startedAt is when the deadline starts: when the runner began, or, for a
// pod that does not say, when it was created. The runner's start is written
// on its node's clock, the pod's creation on the API server's, which is the
// sweep's reference: a start before the pod's creation can only be a node
// clock running behind, and would make a runner that is still registering
// look past its deadline, so the creation bounds it. A start after now can
// only be a node clock running ahead, and the true start is then unknown:
// anywhere from the pod's creation to now. ok is false for it; the pod's
// creation stands in (taken as now on every sweep, it would hold a leak for
// the length of the skew), and the verdict it gives must then hold for the
// whole registration deadline from the reaper's own first sighting (MinHold),
// so that a runner whose pod waited long for a node or an image is not
// hurried either.
func startedAt(now time.Time, p *fleet.Pod) (t time.Time, ok bool) {
	switch {
	case p.StartedAt.Time().After(now):
		return minTime(p.CreatedAt.Time(), now), false
	case p.StartedAt.IsZero() || p.StartedAt.Time().Before(p.CreatedAt.Time()):
		return minTime(p.CreatedAt.Time(), now), true
	default:
		return p.StartedAt.Time(), true
	}
}

// judgeRunning classifies a running pod, its runner container running,
// whose scope's list serves verdicts and whose registration is
// unambiguous. proves is whether that list proves absence: where it does
// not (it moved while it was read), a verdict that rests on the
// registration not being listed carries AbsenceUnproven.
func judgeRunning(obs Observation, p *fleet.Pod, runnerID int64, reg *fleet.Registration, proves bool, pol Policy, claimed func(fleet.Pod, *fleet.Registration) bool, marks map[string]fleet.Mark) (*Finding, bool) {
	now := obs.Now
	// Rule 2: a runner GitHub reports busy is never a suspect.
	if reg != nil && reg.Busy {
		return nil, true
	}
	// A runner online and unstamped is healthy: nearly every pod of a
	// fleet, for which nothing is built (the switch below says the same).
	if reg != nil && reg.Online && !(pol.StampEnabled && p.Stamped) {
		return nil, false
	}
	f := &Finding{Key: fleet.PodMarkKey(p.UID), ScopeKey: p.ScopeKey, Pod: p, Registration: reg, Since: p.CreatedAt.Time(), AbsenceUnproven: reg == nil && !proves}
	start, known := startedAt(now, p)
	switch {
	case pol.StampEnabled && p.Stamped:
		if claimed(*p, reg) {
			return nil, true
		}
		f.Verdict = fleet.OrphanStamped
		if reg == nil {
			f.Evidence = fmt.Sprintf("pod is stamped but no live claim backs it; runner %q not registered", p.RunnerName)
		} else {
			f.Evidence = fmt.Sprintf("pod is stamped but no live claim backs it; registration %d is %s and idle", reg.ID, onlineWord(reg.Online))
		}
	case reg != nil && !reg.Online:
		f.Verdict = fleet.Zombie
		f.Evidence = fmt.Sprintf("pod running; registration %d %q is offline", reg.ID, reg.Name)
	case reg != nil:
		return nil, false
	case runnerID != 0:
		f.Verdict, f.Gone = fleet.Zombie, true
		f.Evidence = fmt.Sprintf("pod running; its registration %d %q was registered (runner id known from Kubernetes) and is gone from the %s", runnerID, p.RunnerName, listWord(proves))
	case marks[f.Key].Verdict == fleet.Zombie:
		f.Verdict, f.Gone = fleet.Zombie, true
		f.Evidence = fmt.Sprintf("pod running; its registration %q was seen offline and is now gone from the %s", p.RunnerName, listWord(proves))
	case obs.pastStart(p, start, pol.RegistrationDeadline):
		f.Verdict = fleet.Unregistered
		f.Evidence = fmt.Sprintf("runner running for %s (pod created %s ago), past the %s registration deadline; runner %q never appeared",
			max(now.Sub(start), 0).Round(time.Second), max(now.Sub(p.CreatedAt.Time()), 0).Round(time.Second), pol.RegistrationDeadline, p.RunnerName)
		switch {
		case !obs.ClocksAgree():
			f.MinHold = pol.RegistrationDeadline
			f.Evidence += fmt.Sprintf("; %s, so the verdict must hold for the whole %s deadline from this reaper's first sighting before it acts", obs.skewWords(), pol.RegistrationDeadline)
		case !known:
			f.MinHold = pol.RegistrationDeadline
			f.Evidence += fmt.Sprintf("; its start lies in the future by its node's clock, so it counts from the pod's creation, and the verdict must hold for the whole %s deadline before it acts", pol.RegistrationDeadline)
		}
	default:
		return nil, false
	}
	return f, false
}

// listWord names the list an absence was read from: a list that moved
// proves none until the runner is looked up by name.
func listWord(proves bool) string {
	if proves {
		return "complete list"
	}
	return "list, which moved while it was read (to be proven by a look-up by name)"
}

func onlineWord(online bool) string {
	if online {
		return "online"
	}
	return "offline"
}

// podJudge is what judging one pod needs of the sweep's observation.
type podJudge struct {
	obs     Observation
	pol     Policy
	claimed func(fleet.Pod, *fleet.Registration) bool
	marks   map[string]fleet.Mark
	ix      identities
	ers     runnerIndex
}

// judge classifies one observed pod, whose runner id (from the pod or its
// EphemeralRunner) is runnerID, into out: a finding, or the count that says
// why it has none.
func (j podJudge) judge(p *fleet.Pod, runnerID int64, out *Classification) {
	if !p.HasRunner {
		out.NotRunner++
		return
	}
	out.ManagedPods++
	if p.Deleting {
		return
	}
	// A pod whose EphemeralRunner is being deleted is ARC's to
	// remove: it has no verdict of its own. If the deletion does not
	// finish, the EphemeralRunner comes back as arc-stuck-deleting,
	// carrying its pod, which then counts against the fraction: so it
	// stays in the fraction's base too.
	owner := ownerRunner(j.ers, p)
	if owner != nil && !owner.DeletingSince.IsZero() {
		out.OwnerDeleting++
		return
	}
	// With the EphemeralRunners listed, one that owns a pod and is not
	// among them was deleted between the two lists (ARC removes a
	// finished runner's EphemeralRunner right after its pod's end): the
	// garbage collector takes the pod next, as it does a deleting
	// owner's.
	if owner == nil && j.pol.ARC && p.Owner != nil && p.Owner.APIVersion == fleet.EphemeralRunnerAPIVersion && p.Owner.Kind == fleet.EphemeralRunnerKind {
		out.OwnerDeleting++
		return
	}
	var m match
	list, listed := j.ix.lists[p.ScopeKey]
	if listed {
		m = j.ix.match(p, runnerID)
	}
	if f, ok := terminal(p, m.reg); ok {
		f.OwnerRunner, f.Job = owner, jobOf(p, owner)
		f.RunnerID, f.RegistrationAbsent, f.AbsenceUnproven = known(runnerID, m, listed, list.proves)
		if m.ambiguous {
			f.Evidence += fmt.Sprintf("; no registration is deleted: runner %q is ambiguous in %s", p.RunnerName, p.ScopeKey)
		}
		out.Findings = append(out.Findings, f)
		return
	}
	if notStarted(p) {
		if f := j.judgeNotStarted(p, runnerID, m, list, listed, out); f != nil {
			f.OwnerRunner, f.Job = owner, jobOf(p, owner)
			f.RunnerID, f.RegistrationAbsent, _ = known(runnerID, m, listed, list.proves)
			out.Findings = append(out.Findings, *f)
		}
		return
	}
	if p.Phase != "Running" || !p.Runner.Running {
		return
	}
	// A start after now on both clocks: where they disagree, a reference
	// clock behind would otherwise blame every node.
	if latest := maxTime(j.obs.Now, j.obs.Local); p.StartedAt.Time().After(latest) {
		out.FutureStarts = append(out.FutureStarts, FutureStart{Namespace: p.Namespace, Pod: p.Name, Ahead: p.StartedAt.Time().Sub(latest)})
	}
	// A pod that does not say its runner's name cannot be matched
	// to a registration, so GitHub's list says nothing about it.
	if _, observed := j.obs.Lists[p.ScopeKey]; p.ScopeKey == "" || !observed || p.RunnerName == "" {
		out.Unscoped++
		return
	}
	out.ScopePods[p.ScopeKey]++
	if !listed {
		return
	}
	if m.ambiguous {
		if m.protected {
			out.Protected++
		}
		return
	}
	f, protected := judgeRunning(j.obs, p, runnerID, m.reg, list.proves, j.pol, j.claimed, j.marks)
	if protected {
		out.Protected++
	}
	if f != nil {
		f.OwnerRunner, f.Job = owner, jobOf(p, owner)
		f.RunnerID, f.RegistrationAbsent, _ = known(runnerID, m, listed, list.proves)
		out.Findings = append(out.Findings, *f)
	}
}

// notStarted reports whether a live pod's runner container has never
// started: it is not running and has never ended (a runner that ended is
// terminal's). A pod in phase Unknown says nothing the kubelet can still
// vouch for, and is left.
func notStarted(p *fleet.Pod) bool {
	return (p.Phase == "Pending" || p.Phase == "Running") && !p.Runner.Running &&
		p.Runner.Terminated == nil && p.Runner.LastTerminated == nil
}

// judgeNotStarted judges a pod whose runner container has never started:
// past the start deadline, counted on both clocks (as the registration
// deadline is read) from the pod's creation while it waits for room, and
// from when it was scheduled once it has a node (waitStart), it is
// never-started. It rests on
// GitHub as unregistered does: the pod is tied to its registration as a
// running pod is, a registration that is busy protects it and one that is
// online (something runs under its name) leaves it alone, and where no
// registration is listed the choke point looks the runner up by name
// before it acts. A pod that only waits for room in the cluster is
// reported, unless the policy lets it act.
func (j podJudge) judgeNotStarted(p *fleet.Pod, runnerID int64, m match, list listIndex, listed bool, out *Classification) *Finding {
	pol, obs := j.pol, j.obs
	if pol.StartDeadline <= 0 {
		return nil
	}
	created := p.CreatedAt.Time()
	start, scheduled, known := waitStart(obs.Now, p)
	local := start
	if !obs.ClocksAgree() {
		local, _, _ = waitStart(obs.Local, p)
	}
	if !obs.past(start, local, pol.StartDeadline) {
		// A mark made while the pod waited for room (where such a pod
		// acts) is cleared here once it is scheduled: the time it
		// waited for a node does not count against its start.
		return nil
	}
	if _, observed := obs.Lists[p.ScopeKey]; p.ScopeKey == "" || !observed || p.RunnerName == "" {
		out.Unscoped++
		return nil
	}
	out.ScopePods[p.ScopeKey]++
	if !listed {
		return nil
	}
	if m.ambiguous {
		if m.protected {
			out.Protected++
		}
		return nil
	}
	reg := m.reg
	switch {
	case reg != nil && reg.Busy:
		out.Protected++
		return nil
	case reg != nil && reg.Online:
		return nil
	}
	f := &Finding{Verdict: fleet.NeverStarted, Key: fleet.PodMarkKey(p.UID), ScopeKey: p.ScopeKey, Pod: p, Registration: reg,
		Since: created, AbsenceUnproven: reg == nil && !list.proves}
	registered := fmt.Sprintf("runner %q not listed", p.RunnerName)
	switch {
	case reg != nil:
		registered = fmt.Sprintf("registration %d %q is offline", reg.ID, reg.Name)
	case runnerID != 0:
		registered = fmt.Sprintf("its registration %d %q is gone from the %s", runnerID, p.RunnerName, listWord(list.proves))
	}
	since := "the pod's creation"
	if scheduled {
		since = fmt.Sprintf("the pod was scheduled (created %s ago)", max(obs.Now.Sub(created), 0).Round(time.Second))
	}
	f.Evidence = fmt.Sprintf("runner container not started %s after %s, past the %s start deadline: %s; %s",
		max(obs.Now.Sub(start), 0).Round(time.Second), since, pol.StartDeadline, StartWaitWords(p.StartWait), registered)
	switch {
	case !obs.ClocksAgree():
		f.MinHold = pol.StartDeadline
		f.Evidence += fmt.Sprintf("; %s, so the verdict must hold for the whole %s deadline from this reaper's first sighting before it acts", obs.skewWords(), pol.StartDeadline)
	case !known:
		f.MinHold = pol.StartDeadline
		f.Evidence += fmt.Sprintf("; when it was scheduled lies in the future, so it counts from the pod's creation, and the verdict must hold for the whole %s deadline before it acts", pol.StartDeadline)
	}
	if p.StartWait.Unschedulable() && !pol.DeleteUnschedulable {
		f.ReportOnly = true
		f.Evidence += "; reported only: it waits for room in the cluster, deleting it would free nothing and its controller would make another (REAPER_DELETE_UNSCHEDULABLE=true deletes it)"
	}
	return f
}

// waitStart is when a not-started pod's start deadline counts from, on
// the clock whose now is given: the pod's creation while it waits for room
// (the scheduler's Unschedulable, a scheduling gate) or where its status
// does not say when it was scheduled, else the later of its creation and
// its scheduling (scheduled is then true), so that a pod that waited long
// for a node is not judged, once it has one, by the time it waited. The
// scheduling time is read as the runner's start is (startedAt): one before
// the pod's creation is a clock behind, and the creation bounds it; one
// after now is a clock ahead and says nothing of when it was, so the
// creation stands in with ok false, and the verdict must then hold for the
// whole start deadline from the reaper's own first sighting (MinHold).
func waitStart(now time.Time, p *fleet.Pod) (t time.Time, scheduled, ok bool) {
	created := minTime(p.CreatedAt.Time(), now)
	w := p.StartWait
	if w == nil || w.Unschedulable() || w.ScheduledAt.IsZero() {
		return created, false, true
	}
	switch at := w.ScheduledAt.Time(); {
	case at.After(now):
		return created, false, false
	case at.Before(p.CreatedAt.Time()):
		return created, false, true
	default:
		return at, true, true
	}
}

// StartWaitWords says what holds a runner back from starting, for a
// verdict's evidence: the cluster's reason and, clipped, its message
// (outside text, made safe where it is shown).
func StartWaitWords(w *fleet.StartWait) string {
	if w == nil || w.Reason == "" {
		return "no reason given"
	}
	why := WaitReason(w)
	if w.Message != "" {
		why += fmt.Sprintf(" (%q)", WaitMessage(w))
	}
	switch {
	case w.Unschedulable():
		return "not scheduled: " + why
	case w.Init:
		return fmt.Sprintf("init container %q has not finished: %s", WaitContainer(w), why)
	}
	return fmt.Sprintf("container %q waiting: %s", WaitContainer(w), why)
}

// WaitReason, WaitMessage and WaitContainer are the wait's texts as far as
// a verdict carries them (see BoundWait).
func WaitReason(w *fleet.StartWait) string {
	if w == nil {
		return ""
	}
	return clipBytes(w.Reason, maxWaitReason)
}

// WaitMessage: see WaitReason.
func WaitMessage(w *fleet.StartWait) string {
	if w == nil {
		return ""
	}
	return clip(w.Message, maxWaitMessage)
}

// WaitContainer: see WaitReason.
func WaitContainer(w *fleet.StartWait) string {
	if w == nil {
		return ""
	}
	return clipBytes(w.Container, maxWaitContainer)
}

// BoundWait is w with its texts redacted by redact (nil redacts nothing),
// then cut to what a verdict carries; w is not changed. The cut comes after
// the redaction, which matches whole secrets: cut first, a secret across
// the cut would be shown as a prefix no redactor knows. The sweep passes
// every pod's wait through it before the pods are judged, so that the
// evidence, the action line, the Event and the audit are built from it.
func BoundWait(w *fleet.StartWait, redact func(string) string) *fleet.StartWait {
	if w == nil {
		return nil
	}
	if redact == nil {
		redact = func(s string) string { return s }
	}
	b := *w
	b.Reason = clipBytes(redact(w.Reason), maxWaitReason)
	b.Message = clip(redact(w.Message), maxWaitMessage)
	b.Container = clipBytes(redact(w.Container), maxWaitContainer)
	return &b
}

// maxWaitMessage bounds how much of the cluster's message a verdict's
// evidence carries: a kubelet's says what it needs in a line, and anyone
// who may write a pod's status could make it megabytes, which every action
// line, Event and record of it would repeat. The reason is a word, and a
// container's name at most a DNS subdomain's length, bounded likewise.
const (
	maxWaitMessage   = 300
	maxWaitReason    = 128
	maxWaitContainer = 253
)

// clipBytes is s cut to at most n bytes, at a rune's edge, marked where it
// was cut (the mark included in the n).
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// clip is s cut to at most n runes, marked where it was cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// scopeFromOwners gives each pod whose EphemeralRunner was observed that
// EphemeralRunner's scope: its githubConfigUrl is where ARC registered the
// runner, whatever the pod's labels say, so that the runner's id and name
// are judged against the list that holds them. An EphemeralRunner whose
// URL names no scope the reaper can read (another GitHub host, a proxy in
// REAPER_GITHUB_API_URL) leaves its pod with none: judged against the
// labels' list, a healthy runner of another GitHub could be taken for a
// zombie. The pods whose labels and EphemeralRunner disagree and whose
// EphemeralRunner names no configured scope are returned for the sweep
// to warn about. pods is not changed.
func scopeFromOwners(pods []fleet.Pod, ers runnerIndex, lists map[string]ScopeList) ([]fleet.Pod, []string) {
	if len(ers.runners) == 0 {
		return pods, nil
	}
	// The pods are the caller's: they are copied before the first change,
	// and only then, since a fleet's EphemeralRunners nearly always agree
	// with their pods' labels and a copy of 100,000 pods is 24 MB.
	out := pods
	var lost []string
	for i := range out {
		p := &out[i]
		owner := ownerRunner(ers, p)
		if owner == nil || owner.ScopeKey == p.ScopeKey {
			continue
		}
		if _, configured := lists[owner.ScopeKey]; !configured {
			lost = append(lost, p.Namespace+"/"+p.Name)
		}
		if &out[0] == &pods[0] {
			out = slices.Clone(pods)
			p = &out[i]
		}
		p.ScopeKey = owner.ScopeKey
	}
	return out, lost
}

// jobOf is the job a pod's runner is known to have held: what ARC's
// listener recorded on its EphemeralRunner, else what the pool's
// dispatcher wrote on the pod.
func jobOf(p *fleet.Pod, owner *fleet.EphemeralRunner) *fleet.Job {
	if owner != nil && owner.Job != nil {
		return owner.Job
	}
	return p.Job
}

// ownerRunner is the observed EphemeralRunner that controls the pod, or
// nil: the pod has no ARC owner, or ARC's objects are not watched.
func ownerRunner(ers runnerIndex, p *fleet.Pod) *fleet.EphemeralRunner {
	if p.Owner == nil || p.Owner.APIVersion != fleet.EphemeralRunnerAPIVersion || p.Owner.Kind != fleet.EphemeralRunnerKind {
		return nil
	}
	if er := ers.byUID(p.Owner.UID); er != nil && er.Namespace == p.Namespace && er.Name == p.Owner.Name {
		return er
	}
	return nil
}

// known is the runner id a pod's finding carries, whether its scope's list
// proves that registration gone (the id is known, the list complete, and
// neither it nor the runner's name matched a registration), and whether
// the same holds of a list that moved, which proves no absence: then a
// look-up by name must prove it before anything rests on it.
func known(id int64, m match, listed, proves bool) (int64, bool, bool) {
	if m.reg != nil {
		return m.reg.ID, false, false
	}
	// The list that proves it is the pod's scope's, which is its
	// EphemeralRunner's where one was observed (scopeFromOwners).
	absent := id != 0 && listed && !m.ambiguous
	return id, absent && proves, absent && !proves
}

// stuckHolders says what holds an EphemeralRunner stuck deleting: ARC's
// finalizers, another controller's (which the reaper never removes), its
// registration as the list showed it, its pod, and the job ARC recorded.
func stuckHolders(er *fleet.EphemeralRunner, pod *fleet.Pod, reg *fleet.Registration, list string) string {
	var held []string
	var arc []string
	for _, f := range er.Finalizers {
		if fleet.IsARCFinalizer(f) {
			arc = append(arc, f)
		}
	}
	if len(arc) > 0 {
		held = append(held, fmt.Sprintf("ARC's finalizers %v", arc))
	}
	if foreign := fleet.ForeignFinalizers(er.Finalizers); len(foreign) > 0 {
		held = append(held, fmt.Sprintf("other controllers' finalizers %v, which the reaper never removes", foreign))
	}
	if reg != nil {
		busy := "idle"
		if reg.Busy {
			busy = "busy"
		}
		held = append(held, fmt.Sprintf("its registration %d, listed %s and %s on the %s", reg.ID, onlineWord(reg.Online), busy, list))
	}
	if pod != nil {
		held = append(held, fmt.Sprintf("its pod %s/%s (phase %s)", pod.Namespace, pod.Name, pod.Phase))
	}
	if er.Job != nil {
		held = append(held, "a job ARC recorded on it")
	}
	return strings.Join(held, "; ")
}

// runnerIndex is the observed EphemeralRunners by UID, which is how a
// pod's owner reference names its EphemeralRunner.
type runnerIndex struct {
	runners []fleet.EphemeralRunner
	uids    positions[string]
}

func newRunnerIndex(ers []fleet.EphemeralRunner) runnerIndex {
	return runnerIndex{runners: ers, uids: newPositions(len(ers), nil, func(i int32) string { return ers[i].UID }, strings.Compare)}
}

// byUID is the EphemeralRunner with the UID (the last listed, were one
// listed twice), or nil.
func (x runnerIndex) byUID(uid string) *fleet.EphemeralRunner {
	if at, ok := x.uids.last(uid); ok {
		return &x.runners[at]
	}
	return nil
}

// classifyARC judges ARC's own leaks. An EphemeralRunner that still has a
// pod is left to the pod's verdict, which removes it through its owner, so
// that one object is never acted on twice in a sweep; unless it is being
// deleted, when its pod has no verdict (see Classify) and only the
// deletion that does not finish is judged.
func classifyARC(obs Observation, pol Policy, lists map[string]listIndex) []Finding {
	pods := obs.Pods
	owners := newPositions(len(pods), func(i int) bool { return pods[i].Owner != nil && pods[i].HasRunner },
		func(i int32) string { return pods[i].Owner.UID }, strings.Compare)
	var out []Finding
	for i := range obs.EphemeralRunners {
		er := &obs.EphemeralRunners[i]
		var pod *fleet.Pod
		if at, ok := owners.last(er.UID); ok {
			pod = &pods[at]
		}
		if pod != nil && er.DeletingSince.IsZero() {
			continue
		}
		// Only an EphemeralRunner of a configured scope whose list
		// serves verdicts this sweep is judged: one of another scope (another
		// team's, in a shared namespace) is none of the reaper's, and
		// without the list there is no busy check for rule 2.
		list, listed := lists[er.ScopeKey]
		if !listed {
			continue
		}
		f := Finding{Key: fleet.EphemeralRunnerMarkKey(er.UID), ScopeKey: er.ScopeKey, EphemeralRunner: er, Since: er.CreatedAt.Time(), Job: er.Job}
		if er.RunnerID != 0 {
			f.Registration = list.byID(er.RunnerID)
			if f.Registration != nil && f.Registration.Name != er.Name {
				// An id and a name that disagree tie the EphemeralRunner
				// to nothing (see identities.match): deleting by the id
				// would remove another runner's registration, and ARC,
				// once the EphemeralRunner is deleted, would ask the
				// service to remove that runner too. One already stuck
				// deleting is still judged, with no registration and no
				// proof: it is reported, or its finalizers removed where
				// that is allowed.
				if er.DeletingSince.IsZero() {
					continue
				}
				f.Registration = nil
			} else {
				f.RunnerID = er.RunnerID
				f.RegistrationAbsent = f.Registration == nil && list.proves
				f.AbsenceUnproven = f.Registration == nil && !list.proves
			}
		}
		name := fmt.Sprintf("EphemeralRunner %s/%s", er.Namespace, er.Name)
		switch {
		case !er.DeletingSince.IsZero():
			waited := max(obs.Now.Sub(er.DeletingSince.Time()), 0)
			if !obs.past(er.DeletingSince.Time(), er.DeletingSince.Time(), pol.ARCStuckDeletingAfter) || len(er.Finalizers) == 0 {
				continue
			}
			skew := ""
			if !obs.ClocksAgree() {
				// Neither clock alone may hurry it: the deletion must
				// have waited the whole limit in this reaper's sight.
				f.MinHold = pol.ARCStuckDeletingAfter
				skew = fmt.Sprintf("; %s, so the verdict must hold for the whole %s from this reaper's first sighting before anything is done", obs.skewWords(), pol.ARCStuckDeletingAfter)
			}
			held := stuckHolders(er, pod, f.Registration, listWord(list.proves))
			// With its pod still there, a registration that exists may
			// be running a job, which ARC waits for (the service's
			// JobStillRunning): such a deletion is reported, with what
			// holds it, and nothing is done for it.
			reportOnly := pod != nil && f.Registration != nil
			// Otherwise its pod goes with it once ARC can finish: it is
			// carried on the finding, so that the pod counts in the
			// bound and in rule 4's alarm, and its runner is looked up
			// by name right before (a list can be complete and still
			// wrong).
			if pod != nil && pod.Namespace == er.Namespace && !reportOnly {
				f.Pod = pod
			} else if pod != nil && !reportOnly {
				continue
			}
			// Deleting already: there is no registration to remove
			// first, only a finalizer that cannot finish.
			f.Verdict, f.Registration, f.Since, f.ReportOnly = fleet.ARCStuckDeleting, nil, er.DeletingSince.Time(), reportOnly
			f.Evidence = fmt.Sprintf("%s deleted %s ago, still held by %s%s", name, waited.Round(time.Second), held, skew)
		case f.Registration != nil && f.Registration.Busy:
			continue // rule 2: GitHub says a job runs on it
		case er.Phase == "Failed":
			f.Verdict = fleet.ARCFailed
			f.Evidence = fmt.Sprintf("%s is in phase Failed (reason %q, message %q) with no pod", name, er.Reason(), er.Message())
		default:
			f.Verdict = fleet.ARCPodless
			f.Evidence = fmt.Sprintf("%s (phase %q) has no pod and is not being deleted", name, er.Phase)
		}
		out = append(out, f)
	}
	return out
}
