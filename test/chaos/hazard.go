package chaos

import (
	"fmt"
	"strings"
)

// Hazard is one of the ways the world goes wrong. A
// run enables a set of them; shrinking a failure turns them off one by one.
type Hazard uint32

const (
	JobLag          Hazard = 1 << iota // busy:false listed for a while after a job lands
	InvalidateOne                      // one registration invalidated (removed or offline)
	InvalidateScope                    // every idle registration of a scope invalidated at once
	ListError                          // a scope's list answers 500
	RateLimit                          // a scope's list is rate-limited (primary or secondary)
	ShortPage                          // a list page is short of total_count
	Shift                              // runners shift left between page reads
	KubeRace                           // pods deleted, replaced or changed between list and delete
	LateStart                          // pods start late
	LateRegister                       // runners register late, some after the deadline
	NeverRegister                      // runners that never register
	OrphanStamp                        // stamps whose claims never come
	OtherTeams                         // other teams' registrations churn in the same scope
	Overlap                            // two sweeps overlap on one ledger
	Wipe                               // the ledger is wiped
	RecheckRace                        // a runner registers and takes a job right after its re-check
	DeleteFault                        // a registration delete answers 502
	Refuse                             // a pre-flight is refused by admission
	PodListFault                       // the pod list fails
	NodeLoss                           // pods vanish with their nodes
	Crash                              // runners crash without a job
	OthersDelete                       // someone else cleans up terminal pods
	Skew                               // for one sweep a clock lies: the API server's Date, or this machine's
	ARC                                // EphemeralRunnerSets and ARC's controller; ERs evicted, deleted by someone, Failed
	BusyOrg                            // the first scope is a busy org: thousands of other teams' runners over 20 and more pages, two to four joining or leaving every second, jobs starting and ending on them, while each GitHub request takes 150 ms
	BusyLies                           // GitHub lies about a runner running a job: busy:false for up to 60 s after it starts, or for minutes in its middle, its DELETE answered 204 meanwhile; or offline while it runs
	RepeatPage                         // a list page lists a runner a second time: a list that contradicts itself, which no runner joining or leaving explains
	RunnerLogFaults                    // runner log reads fail now and then; some runners' logs are empty, end in a line cut mid-way, or forge a "Running job:" inside another line; some jobs' names read like runner lines
	StartFaults                        // bare pods that never start (each waiting reason, an init container that never finishes, Unschedulable), and two ReplicaSets with broken templates whose pods fail alike (startfaults.go)
	hazardEnd
)

// AllHazards enables every hazard.
const AllHazards = hazardEnd - 1

var hazardNames = []string{
	"job-lag", "invalidate-one", "invalidate-scope", "list-error", "rate-limit", "short-page", "shift",
	"kube-race", "late-start", "late-register", "never-register", "orphan-stamp", "other-teams", "overlap",
	"wipe", "recheck-race", "delete-fault", "refuse", "pod-list-fault", "node-loss", "crash", "others-delete",
	"skew", "arc", "busy-org", "busy-lies", "repeat-page", "runner-log", "start-faults",
}

// Has reports whether x is enabled.
func (h Hazard) Has(x Hazard) bool { return h&x != 0 }

// String lists the enabled hazards by name, comma-separated.
func (h Hazard) String() string {
	var names []string
	for i, n := range hazardNames {
		if h.Has(1 << i) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// ParseHazards reads the String form; "all" enables every hazard.
func ParseHazards(s string) (Hazard, error) {
	if s == "all" {
		return AllHazards, nil
	}
	var h Hazard
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for i, known := range hazardNames {
			if n == known {
				h |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown hazard %q", n)
		}
	}
	return h, nil
}

// Break is a deliberately broken product, to prove that each invariant can
// fire. None is the product as it is.
type Break int

const (
	None Break = iota
	// NoBounds: a reaper without the per-sweep bounds.
	NoBounds
	// TrustBusyFalse: a reaper that believes the list's busy:false, and so
	// takes GitHub's 422 for a deleted registration.
	TrustBusyFalse
	// ConfirmZero: confirm-after of zero.
	ConfirmZero
	// DeferDeletes: every pod delete waits until all candidates' GitHub
	// calls are done, as before the re-check moved next to its delete.
	DeferDeletes
	// ListAllNamespaces: a pod lister that ignores namespace and selector.
	ListAllNamespaces
	// GhostAll: an ownership rule that every registration matches.
	GhostAll
	// SwallowListErrors: a runner lister that turns a failed list into an
	// empty, complete one.
	SwallowListErrors
	// LyingDeletes: pod deletes that answer success and delete nothing.
	LyingDeletes
	// NoRecheck: a list that loses a runner, and no re-check by name.
	NoRecheck
	// OneClock: confirmation measured on the reference clock (the API
	// server's Date) alone, as before marks kept a local first sighting.
	OneClock
	// ReleaseNothing: a kube port whose ReleaseRegistration answers
	// Deleted and releases nothing: the order of before b00fe19, which
	// left ARC v0.27.6 asking for a registration that is gone for ever.
	ReleaseNothing
	// DeleteByUIDOnly: EphemeralRunner deletes held to the UID alone,
	// as the owner's delete was before b00fe19: one that started
	// deleting since it was observed is deleted "again", a no-op
	// reported deleted.
	DeleteByUIDOnly
	// ReleaseOn422: a reaper that takes GitHub's 422 for an ARC runner's
	// registration for a 404, proof that it is gone, and so deletes the
	// EphemeralRunner and releases its registration finalizer.
	ReleaseOn422
	// ByteStrictRevalidation: a runner list that calls a scope
	// inconsistent when a page read again differs in any byte the reaper
	// reads, busy and status included, or when the list moved at all, as
	// the list did before it read through flags: in a busy org some runner
	// flips or moves during nearly every read, and the scope is skipped
	// sweep after sweep.
	ByteStrictRevalidation
	// NoJobGuard: the product before the job guard. Not reap.Options.Jobs
	// nil, which holds a runner with a known job (job-unchecked), but a
	// Jobs port that answers every job finished, so that a runner with
	// job evidence rests on busy, status and the 422 alone, as every
	// runner did before.
	NoJobGuard
	// SkipMoved: a runner lister that turns a list the product served as
	// moved (fleet.ErrMoved: runners joined or left while it was read) into
	// a failure wrapping fleet.ErrInconsistent, as the product did before
	// it served moved lists: a busy org is skipped sweep after sweep.
	SkipMoved
	// ReadEveryLog: a product that reads the runner log of every pod it
	// observes, not only of the candidates it acts on: one request a pod
	// a sweep.
	ReadEveryLog
	// HideNeverStarted: a pod lister that lists only pods whose runner
	// has started, as the product judged before never-started.
	HideNeverStarted
	// NoLogGuard: the product before the runner-log guard (no
	// reap.Options.RunnerLogs): a bare runner with no job evidence rests
	// on GitHub's flags and the 422 alone. It gives the no-evidence kill
	// rate before the guard.
	NoLogGuard
	// DeafLogReader: a product that reads each acting candidate's runner
	// log and is handed nothing of it, as a parser that missed the
	// runner's lines would be.
	DeafLogReader
	// NoLoopDetection: a sweeper not told the loop policy (the zero
	// loops.Policy, as a wiring that forgets REAPER_LOOP_THRESHOLD and
	// REAPER_LOOP_WINDOW leaves it): it finds no loop, so it reports
	// none, and holds no looping group to one action a sweep, the
	// back-off resting on the loops the sweep detects.
	NoLoopDetection
	// ShortStartDeadline: a start deadline shorter than the world's late
	// starts: pods slow to start, healthy, are taken for never-started.
	ShortStartDeadline
	breakEnd
)

var breakNames = []string{
	"none", "no-bounds", "trust-busy-false", "confirm-zero", "defer-deletes", "list-all-namespaces", "ghost-all",
	"swallow-list-errors", "lying-deletes", "no-recheck", "one-clock", "release-nothing", "delete-by-uid-only",
	"release-on-422", "byte-strict-revalidation", "no-job-guard", "skip-moved", "read-every-log",
	"hide-never-started", "no-log-guard", "deaf-log-reader", "no-loop-detection", "short-start-deadline",
}

// String is the Break's name, as the chaos command's -break takes it.
func (b Break) String() string {
	if b >= 0 && int(b) < len(breakNames) {
		return breakNames[b]
	}
	return fmt.Sprintf("Break(%d)", int(b))
}

// ParseBreak reads a Break's name.
func ParseBreak(s string) (Break, error) {
	for i, n := range breakNames {
		if s == n {
			return Break(i), nil
		}
	}
	return 0, fmt.Errorf("unknown break %q (want one of %s)", s, strings.Join(breakNames, ", "))
}

// Invariant names one promise of docs/design.md's safety rules.
type Invariant string

const (
	// JobKilled: no job is killed where the reaper could know of it. That
	// is every kill but one: a registration GitHub listed idle (or
	// offline) and whose DELETE it answered 204 while a job ran on it
	// (hazard BusyLies), on a runner with no job evidence (no job
	// annotation, no job on its EphemeralRunner). That kill is measured
	// (Stats.JobKills), not a violation: GitHub's flags and its 422 are
	// all the reaper has there (design.md, rule 2). A kill after GitHub
	// said busy, by list or by 422, is wrongful with or without evidence.
	JobKilled     Invariant = "no runner or registration with a job is deleted, unless GitHub lied about it and nothing else told of the job"
	HealthyKilled Invariant = "no healthy runner is deleted"
	WrongTarget   Invariant = "nothing of another team, namespace, selector or unconfigured scope is touched"
	Bounds        Invariant = "the per-sweep bounds hold"
	ExitStatus    Invariant = "the exit status matches the sweep's faults"
	Unconfirmed   Invariant = "no GitHub-based verdict acts before its mark has held confirm-after"
	Liveness      Invariant = "every leak is cleaned within confirm-after plus two sweeps, unless a documented cause delays it"
	// ARCLeakEnds: from the moment an ARC leak may be acted on, its
	// verdict's hold plus three sweeps (two as Liveness, one for ARC's
	// pass), the same documented causes moving the deadline.
	ARCLeakEnds Invariant = "every ARC leak ends with no EphemeralRunner, pod, JIT secret or registration left, within its hold plus three sweeps, unless a documented cause delays it"
	// StaysDeleting: two sweeps after an act that reported its release
	// done; otherwise the stuck-deleting path: arc-stuck-deleting's wait,
	// confirm-after and three sweeps after the act, or the leak's own
	// deadline if later.
	StaysDeleting Invariant = "no EphemeralRunner the reaper deleted or released stays deleting past its bound"
	NoopReported  Invariant = "no write is reported deleted that changed nothing"
	// SkippedForMovement: a scope is skipped as inconsistent or failed
	// only in a sweep in which an armed fault of the world (a 500, a
	// short page, a page listing a runner twice, a rate limit) met that
	// scope's list. Runners joining or leaving while the list is read, or
	// flipping busy or status, are an ephemeral fleet's normal state: the
	// product serves such a list as moved, and judges the scope.
	SkippedForMovement Invariant = "a scope is skipped as inconsistent or failed only when the world broke an answer of its list in that sweep, never for runners joining, leaving or flipping"
	// LogReads: the runner-log guard costs one request per acting
	// candidate, never one per pod observed.
	LogReads Invariant = "a sweep reads a runner's log only for a candidate it acts on or holds, and once"
	// NeverStartedCleaned: Liveness for the never-started pods (hazard
	// StartFaults), from creation plus the start deadline;
	// Unschedulable ones only where the reaper is told to delete them.
	NeverStartedCleaned Invariant = "every never-started pod is cleaned within the start deadline plus confirm-after plus two sweeps, unless a documented cause delays it"
	// LoopReported: by the sweep after the one that made a broken
	// group's loopN-th reap within loopWindow (read through Config.Loops).
	LoopReported Invariant = "a broken template's loop is reported within N reaps"
	// LoopDelaysOthers: a looping group acts on more than one pod a
	// sweep on verdicts that need confirmation only where no other leak
	// is held back by the bound in that sweep.
	LoopDelaysOthers Invariant = "no other leak is delayed by a group's loop"
)

var invariantNames = map[Invariant]string{
	JobKilled: "JobKilled", HealthyKilled: "HealthyKilled", WrongTarget: "WrongTarget", Bounds: "Bounds",
	ExitStatus: "ExitStatus", Unconfirmed: "Unconfirmed", Liveness: "Liveness", ARCLeakEnds: "ARCLeakEnds",
	StaysDeleting: "StaysDeleting", NoopReported: "NoopReported", SkippedForMovement: "SkippedForMovement",
	LogReads: "LogReads", NeverStartedCleaned: "NeverStartedCleaned", LoopReported: "LoopReported", LoopDelaysOthers: "LoopDelaysOthers",
}

// Name is the invariant's name in this package (Liveness, ...).
func (i Invariant) Name() string {
	if n, ok := invariantNames[i]; ok {
		return n
	}
	return string(i)
}

// wrongful reports whether the invariant is about deleting the wrong thing.
func (i Invariant) wrongful() bool { return i == JobKilled || i == HealthyKilled || i == WrongTarget }
