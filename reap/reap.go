// Package reap is the one choke point every delete passes through. It
// enforces the sweep's bounds and dry-run in one place, so that no code path
// can remove a runner without being counted. Dry-run walks the very same
// path up to the first write: the pre-flight of the Kubernetes write (a
// server-side dry run, which changes nothing) and the re-check by name run
// in both modes, so that dry-run makes the decisions a real sweep would;
// only where a real sweep would write does dry-run answer would-delete.
package reap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// Registrations deletes runner registrations on GitHub, and finds one by
// name to re-check an absence right before acting on it.
type Registrations interface {
	DeleteRunner(ctx context.Context, scope fleet.Scope, id int64) (fleet.Result, error)
	FindRunner(ctx context.Context, scope fleet.Scope, name string) (*fleet.Registration, error)
}

// Kubernetes is the cluster the choke point acts on: its writes, the
// Events that say why, recorded on the object acted on, and the same writes
// as server-side dry runs.
type Kubernetes interface {
	fleet.Writes
	RecordEvent(ctx context.Context, p fleet.Pod, reason, message string) error
	RecordEphemeralRunnerEvent(ctx context.Context, er fleet.EphemeralRunner, reason, message string) error
	// DryRun is these writes, each sent as a server-side dry run: the
	// pre-flight. The choke point takes it from the port itself, so that
	// no wiring can hand it a pre-flight that writes.
	DryRun() fleet.Writes
}

// Options configure a Reaper.
type Options struct {
	DryRun bool
	Limits reconcile.Limits
	// DeleteServiceAccount removes a bare pod's same-named ServiceAccount
	// after the pod.
	DeleteServiceAccount bool
	// Concurrency bounds parallel Kubernetes deletes; GitHub deletes are
	// always serial, as GitHub asks of mutating calls.
	Concurrency int
	// Scopes resolves a finding's scope key to the scope to call.
	Scopes map[string]fleet.Scope
	// Spare is the time before the context's deadline after which no new
	// action starts, so that one begun can finish and the sweep can still
	// report (a Lambda's invocation deadline, the sweep's own deadline).
	Spare time.Duration
	// ActionTimeout bounds each step of an action once begun: the
	// pre-flight and registration delete get one such budget, and the
	// Kubernetes writes that must follow get another of their own. An
	// action runs detached from the sweep's context, so that neither the
	// deadline nor a signal cuts it between its registration delete and
	// its Kubernetes delete; this is what bounds it instead. Zero leaves
	// only each request's own timeout.
	ActionTimeout time.Duration
	// EventTimeout bounds the Event recorded once the object's writes are
	// done; zero means DefaultEventTimeout. The Event is optional: it gets
	// a budget of its own, after the writes that must finish, so that a
	// throttled or slow Event (an admission webhook, API priority and
	// fairness) can never take their time.
	EventTimeout time.Duration
	// RemoveFinalizers lets the reaper clear the finalizers of an
	// EphemeralRunner stuck deleting; without it such objects are only
	// reported.
	RemoveFinalizers bool
	// Jobs asks GitHub about a job a running runner is known to have held,
	// before anything is deleted for it. Without it such a runner is never
	// acted on (job-unchecked): the guard fails closed.
	Jobs Jobs
	// RunnerLogs reads a running runner's log before an action on it when
	// nothing else says whether it holds a job (needsLogRead); nil reads
	// none (REAPER_READ_RUNNER_LOG=false), and such runners rest on
	// GitHub's flags and the 422 alone.
	RunnerLogs RunnerLogs
}

// DefaultSpare is the spare time of every entry point: enough for an action
// begun to finish and for the report to be written before the deadline.
const DefaultSpare = 5 * time.Second

// DefaultEventTimeout is the Event's own budget: an Event create answers in
// milliseconds when the API server is well, and one that takes longer is
// given up rather than allowed to hold the sweep.
const DefaultEventTimeout = 2 * time.Second

// Reaper carries out admitted candidates.
type Reaper struct {
	gh   Registrations
	kube Kubernetes
	// check is kube's writes as server-side dry runs: the pre-flight.
	check fleet.Writes
	opts  Options
	// limit is GitHub's rate limit once it has been met in this sweep:
	// from then on no GitHub call is made (see HoldGitHub).
	limit *fleet.RateLimitError
	// looping are the groups in a reap loop (see HoldLoops).
	looping map[fleet.Group]bool
}

// HoldLoops tells the reaper which groups are in a reap loop as the sweep
// began (package loops): of each, at most one candidate whose verdict
// needs confirmation acts this sweep (reconcile.Budget.LoopHeld); the
// others are loop-held, their marks kept. A broken template makes such
// runners as fast as they go, and acting on every one would only churn
// the cluster; its terminal pods still go, as they cost nothing to free.
func (r *Reaper) HoldLoops(looping map[fleet.Group]bool) { r.looping = looping }

// HoldGitHub tells the reaper that GitHub rate-limited this sweep before it
// acts (while the lists were read). A candidate that needs a GitHub call
// (a registration delete, a re-check by name) is then not attempted and is
// reported rate-limited, its mark kept; one that needs none still goes. A
// limit met while acting has the same effect on the candidates after it.
func (r *Reaper) HoldGitHub(limit *fleet.RateLimitError) { r.limit = limit }

// New returns a Reaper that writes through kube, and proves each write
// first through kube.DryRun().
func New(gh Registrations, kube Kubernetes, opts Options) *Reaper {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	return &Reaper{gh: gh, kube: kube, check: kube.DryRun(), opts: opts}
}

// errOwnerUnobserved is why the pod of an EphemeralRunner that the sweep
// did not list (REAPER_ARC_LEAKS off) is only reported: without its
// EphemeralRunner there is no proof to release ARC's registration
// finalizer with, nor a resourceVersion to hold the delete to, and a
// delete of one already deleting would change nothing; acting would leave
// ARC asking for a removed registration for ever, the EphemeralRunner, its
// pod and its JIT secret with it.
var errOwnerUnobserved = errors.New("its EphemeralRunner was not listed: set REAPER_ARC_LEAKS=true (k8s-cronjob/components/arc) for the reaper to act on ARC's scale-set runners")

// Action is what the protocol does for a candidate; its words are part of
// the log contract.
type Action string

const (
	DeletePod                             Action = "delete-pod"
	DeleteRegistrationThenPod             Action = "delete-registration-then-pod"
	DeleteEphemeralRunner                 Action = "delete-ephemeralrunner"
	DeleteRegistrationThenEphemeralRunner Action = "delete-registration-then-ephemeralrunner"
	// DeleteRunner and DeleteRegistrationThenRunner remove a legacy
	// (actions.summerwind.dev) Runner, the owner of its pod.
	DeleteRunner                 Action = "delete-runner"
	DeleteRegistrationThenRunner Action = "delete-registration-then-runner"
	// DeleteRegistration is a ghost's: there is no Kubernetes object.
	DeleteRegistration Action = "delete-registration"
	// RemoveFinalizers clears an EphemeralRunner stuck deleting; without
	// Options.RemoveFinalizers such an object is only reported (Report).
	RemoveFinalizers Action = "remove-finalizers"
	// ReleaseRegistration removes only ARC's registration finalizer from
	// an EphemeralRunner stuck deleting whose registration is proven gone
	// (fleet.ARCRegistrationFinalizer), so that ARC finishes the rest.
	ReleaseRegistration Action = "release-registration"
	Report              Action = "report"
)

// Action names what the protocol does for a candidate.
func (r *Reaper) Action(c reconcile.Candidate) Action {
	first := c.Registration != nil
	pick := func(alone, afterRegistration Action) Action {
		if first {
			return afterRegistration
		}
		return alone
	}
	switch {
	case c.ReportOnly && c.Verdict != fleet.ARCStuckDeleting:
		// A finding made to be reported (a never-started pod that only
		// waits for room in the cluster) acts on nothing.
		return Report
	case c.EphemeralRunner != nil && c.Verdict == fleet.ARCStuckDeleting:
		// ARC's registration finalizer still waits on the Actions
		// service: it is released on proof that the registration is
		// gone (an absence a moved list could not prove is looked up by
		// name first, proveAbsence), or, where the operator allows it,
		// removed with ARC's other finalizer while the registration is
		// not known to be gone. Anything else (a registration finalizer
		// already released, another controller's finalizer, a pod and a
		// registration both still there) is reported with what holds it.
		waiting := slices.Contains(c.EphemeralRunner.Finalizers, fleet.ARCRegistrationFinalizer)
		switch {
		case c.ReportOnly || !waiting:
			return Report
		case c.RegistrationAbsent || c.AbsenceUnproven:
			return ReleaseRegistration
		case r.opts.RemoveFinalizers:
			return RemoveFinalizers
		}
		return Report
	case c.EphemeralRunner != nil:
		return pick(DeleteEphemeralRunner, DeleteRegistrationThenEphemeralRunner)
	case c.Pod == nil:
		return DeleteRegistration
	case c.Pod.Owner.ARCOwned() && c.Pod.Owner.Kind == fleet.LegacyRunnerKind:
		return pick(DeleteRunner, DeleteRegistrationThenRunner)
	case c.Pod.Owner.ARCOwned() && c.OwnerRunner == nil:
		// See errOwnerUnobserved.
		return Report
	case c.Pod.Owner.ARCOwned():
		return pick(DeleteEphemeralRunner, DeleteRegistrationThenEphemeralRunner)
	default:
		return pick(DeletePod, DeleteRegistrationThenPod)
	}
}

// Object names the Kubernetes object the action removes or changes, which
// for a pod that ARC owns is its owner, not the pod.
func Object(c reconcile.Candidate) string {
	switch {
	case c.EphemeralRunner != nil:
		return fleet.EphemeralRunnerKind + " " + c.EphemeralRunner.Namespace + "/" + c.EphemeralRunner.Name
	case c.Pod == nil:
		return ""
	case c.Pod.Owner.ARCOwned():
		return c.Pod.Owner.Kind + " " + c.Pod.Namespace + "/" + c.Pod.Owner.Name
	default:
		return "Pod " + c.Pod.Namespace + "/" + c.Pod.Name
	}
}

// Outcome is one candidate's fate, everything the report needs.
type Outcome struct {
	Candidate reconcile.Candidate
	Action    Action
	// Object is the Kubernetes object acted on (see Object), and
	// ObjectResult what its write answered: a pod's, or an ARC owner's or
	// EphemeralRunner's when that is the object.
	Object       string
	ObjectResult fleet.Result
	Result       fleet.Result
	// Registration and ServiceAccount are what those deletes answered.
	Registration   fleet.Result
	ServiceAccount fleet.Result
	// Finalizer is what releasing ARC's registration finalizer answered,
	// after the EphemeralRunner's delete (see releases).
	Finalizer fleet.Result
	// AbsentByName is true when this action's look-up by name found no
	// such runner on GitHub under the name ARC registered it by: proof that
	// the registration is gone, whatever the candidate's list proved (it
	// is what proves it where the list moved while it was read:
	// reconcile.Finding.AbsenceUnproven).
	AbsentByName bool
	// EventErr is set when the Event could not be recorded. The Event is
	// written after the object's writes and never decides their fate;
	// the report says what became of it.
	EventErr error
	Err      error
	DryRun   bool
	// Job is what GitHub said of the candidate's job when the guard asked
	// (see checkJob); nil when it did not ask.
	Job *fleet.JobStatus
	// RunnerLog is what the runner's own log said when the guard read it
	// (see readLogs); nil when it did not read.
	RunnerLog *LogRead
	// Bounded is true when the action bound (REAPER_MAX_ACTIONS,
	// REAPER_MAX_FRACTION) deferred the candidate, as opposed to a job
	// check that did not get its turn: only the former is the bound
	// biting, which its alert counts.
	Bounded bool
}

// Reap orders the ready candidates, admits them through the sweep's budget,
// and carries out the admitted ones in order, one GitHub call at a time.
// Each admitted candidate goes through the same steps, in both modes:
//
//  1. pre-flight: its Kubernetes write is sent as a server-side dry run, so
//     that no registration is deleted for an object whose delete would be
//     refused (which would leave a runner unregistered and its pod in
//     place for good);
//  2. a registration that exists is deleted (a write); one that is absent
//     is looked up once more by name, and the Kubernetes delete follows
//     that lookup directly, with no other candidate's GitHub call between;
//  3. the Kubernetes writes (the object's delete or finalizer patch, then
//     a bare pod's ServiceAccount), under a budget of their own, with
//     bounded concurrency for candidates whose registration was deleted;
//  4. the Event, only where the object's write did something, under a
//     budget of its own again: it is optional, so it comes last and can
//     take nothing from the writes that must follow a registration delete.
//
// Dry-run stops at the first write and answers would-delete there. ctx
// only decides whether each action starts: once ctx has ended, or its
// deadline is within the spare time, the rest are not-reached; an action
// begun runs to its end under a context of its own (actionContext). It
// returns one outcome per candidate, in order.
func (r *Reaper) Reap(ctx context.Context, managedPods int, ready []reconcile.Candidate) []Outcome {
	cs := append([]reconcile.Candidate(nil), ready...)
	reconcile.Order(cs)
	budget := reconcile.NewBudget(r.opts.Limits, managedPods)
	budget.HoldLoops(r.looping)
	waiting := r.loopWaiting(cs)
	turns := r.jobCheckTurns(cs, waiting)
	logTurns := r.logTurns(cs, budget, turns, waiting)
	// The job checks ask GitHub and the log reads the API server: they go
	// together, each under its own budget, before anything is admitted.
	var reads map[int]*LogRead
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		reads = r.readLogs(ctx, cs, logTurns)
	}()
	answers := r.askJobs(ctx, cs, turns)
	readers.Wait()
	out := r.admit(ctx, cs, budget, admission{waiting: waiting, turns: turns, logTurns: logTurns, answers: answers, reads: reads})

	sem := make(chan struct{}, r.opts.Concurrency)
	var wg sync.WaitGroup
	freed := map[fleet.Group]bool{}
	for i := range out {
		o := &out[i]
		if o.Result != "" && !r.takesOver(o, freed, budget) {
			continue
		}
		// The sweep's context only decides whether an action starts.
		if r.tooLate(ctx) {
			o.Result = fleet.NotReached
			continue
		}
		if r.needsGitHub(o.Candidate) && r.held(o) {
			r.freeLoop(o, freed)
			continue
		}
		// The slot for the candidate's Kubernetes writes is taken before
		// anything is done for it, so that once GitHub has answered (the
		// registration deleted, or the look-up by name) its write starts
		// at once, never behind another candidate's writes; and before
		// its budget starts, so that waiting for the slot spends none of
		// it. The wait may have taken the sweep close to its deadline.
		sem <- struct{}{}
		if r.tooLate(ctx) {
			o.Result = fleet.NotReached
			<-sem
			continue
		}
		actx, cancel := r.actionContext(ctx, ObjectRoom)
		if !r.preflight(actx, o) {
			r.freeLoop(o, freed)
			cancel()
			<-sem
			continue
		}
		if r.needsRecheck(o.Candidate) {
			// The delete runs here, before the loop moves on to any
			// other candidate's GitHub call, because what the look-up
			// proved holds only for as long as nobody can register
			// under the name.
			found := r.recheckAbsence(actx, o)
			if o.Candidate.Registration == nil {
				// The look-up was by the pod's name: it proves the
				// EphemeralRunner's registration gone only under
				// ARC's own name for it.
				o.AbsentByName = found && (target(o.Candidate) == nil || target(o.Candidate).Name == o.Candidate.Pod.RunnerName)
				cancel()
				if found {
					r.removeWithin(ctx, o)
				}
				<-sem
				r.later(ctx, &wg, o)
				continue
			}
			// A never-started runner's offline registration, found by
			// its name: it goes first, as one the list had shown.
		}
		if r.needsProof(o.Candidate) && !r.proveAbsence(actx, o) {
			cancel()
			<-sem
			continue
		}
		if !r.unregister(actx, o) {
			cancel()
			<-sem
			continue
		}
		cancel()
		if r.opts.DryRun {
			o.Result = fleet.WouldDelete
			<-sem
			continue
		}
		// Once the registration is gone no job can land on the runner:
		// the object may go at any pace from here.
		wg.Add(1)
		go func(o *Outcome) {
			defer wg.Done()
			r.removeWithin(ctx, o)
			<-sem
			r.recordEvent(ctx, o)
		}(o)
	}
	wg.Wait()
	return out
}

// alreadyDeleting reports whether the object a candidate's action would
// delete was being deleted already when it was observed. A stuck deletion
// is a verdict of its own, whose action is not a delete.
func alreadyDeleting(c reconcile.Candidate) bool {
	switch {
	case c.Verdict == fleet.ARCStuckDeleting:
		return false
	case c.EphemeralRunner != nil:
		return !c.EphemeralRunner.DeletingSince.IsZero()
	case c.OwnerRunner != nil:
		return !c.OwnerRunner.DeletingSince.IsZero()
	}
	return false
}

// releases reports whether the candidate's action, once its EphemeralRunner
// is deleted, removes ARC's registration finalizer from it: only for an
// EphemeralRunner whose runner was registered (ARC asks the service to
// remove it only then), and only with proof that the registration is gone
// or about to be: the candidate's own registration delete (which must then
// answer 204 or 404) of the very runner the EphemeralRunner holds, or a
// complete list of the EphemeralRunner's own scope without it, or, where
// that list moved while it was read, a look-up by name that finds no such
// runner (release checks that it was made). ARC v0.27.6 would otherwise
// ask the service for ever and take its 404 for a failure.
func releases(c reconcile.Candidate) bool {
	er := target(c)
	if er == nil || c.Verdict == fleet.ARCStuckDeleting || er.RunnerID == 0 || er.ScopeKey != c.ScopeKey {
		// The proof is the candidate's scope's: an EphemeralRunner
		// registered elsewhere is left to ARC.
		return false
	}
	if !slices.Contains(er.Finalizers, fleet.ARCRegistrationFinalizer) {
		// Nothing of ARC's waits on the service: nothing to release,
		// and no request to spend finding that out.
		return false
	}
	if c.Registration != nil {
		return c.Registration.ID == er.RunnerID
	}
	return c.RegistrationAbsent || c.AbsenceUnproven
}

// proven reports whether the candidate's registration is proven gone or
// about to be, as its release needs: its own delete, its scope's complete
// list, or this action's look-up by name.
func proven(o *Outcome) bool {
	c := o.Candidate
	return c.Registration != nil || c.RegistrationAbsent || o.AbsentByName
}

// target is the EphemeralRunner the candidate's action deletes, or nil.
func target(c reconcile.Candidate) *fleet.EphemeralRunner {
	if c.EphemeralRunner != nil {
		return c.EphemeralRunner
	}
	return c.OwnerRunner
}

// tooLate reports whether a new action must not start: the sweep was
// cancelled, or its deadline is closer than the spare time, and never
// closer than minLeft whatever the spare: an action needs the report's
// reserve, its object's room and some time for GitHub.
func (r *Reaper) tooLate(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < max(r.opts.Spare, minLeft)
}

// ObjectRoom is the time before the sweep's last moment that the first step
// of an action (the pre-flight, and the registration delete or look-up)
// leaves to its Kubernetes writes: a GitHub delete that succeeded slowly
// near the deadline must not leave its pod no time to follow.
const ObjectRoom = 2 * time.Second

// minLeft is the least time before the sweep's deadline in which an action
// may start: the report's reserve, the object's room, and half a second
// for the first step.
const minLeft = ReportReserve + ObjectRoom + 500*time.Millisecond

// needsGitHub reports whether the candidate's protocol calls GitHub: a
// registration to delete, or an absence to re-check by name.
func (r *Reaper) needsGitHub(c reconcile.Candidate) bool {
	return c.Registration != nil || r.needsRecheck(c) || r.needsProof(c) && c.Verdict == fleet.ARCStuckDeleting
}

// held reports whether GitHub's rate limit holds the candidate back in this
// sweep, and if so reports it rate-limited.
func (r *Reaper) held(o *Outcome) bool {
	if r.limit == nil {
		return false
	}
	o.Result, o.Err = fleet.RateLimited, fmt.Errorf("no GitHub call this sweep: %w", r.limit)
	return true
}

// limited reports whether a GitHub call's error is a rate limit; if so the
// candidate is reported rate-limited, not failed, and no later candidate
// calls GitHub in this sweep: every further call would be refused, and
// GitHub asks clients to stop until the limit lifts.
func (r *Reaper) limited(o *Outcome, err error) bool {
	rl := fleet.AsRateLimit(err)
	if rl == nil {
		return false
	}
	r.limit = rl
	o.Result, o.Err = fleet.RateLimited, err
	return true
}

// actionContext is the context of one step of an action: detached from the
// sweep's, so that a signal or the deadline arriving while it runs cannot
// leave a registration deleted and its pod in place, and bounded instead by
// Options.ActionTimeout and by the sweep's last moment less room, the time
// the step leaves to the steps after it.
func (r *Reaper) actionContext(ctx context.Context, room time.Duration) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	var end time.Time
	if r.opts.ActionTimeout > 0 {
		end = time.Now().Add(r.opts.ActionTimeout)
	}
	if last, ok := lastMoment(ctx); ok && (end.IsZero() || last.Add(-room).Before(end)) {
		end = last.Add(-room)
	}
	if end.IsZero() {
		return context.WithCancel(detached)
	}
	return context.WithDeadline(detached, end)
}

// removeWithin carries out the candidate's Kubernetes writes under a budget
// of their own, so that a slow registration delete or look-up that
// succeeded never leaves its object without the time to follow it. Nothing
// between the registration delete and the object's write can stop it but
// that write's own answer (or its budget running out, which the next sweep
// finishes: the pod is found again, its registration gone from the list,
// its mark kept).
func (r *Reaper) removeWithin(ctx context.Context, o *Outcome) {
	kctx, cancel := r.actionContext(ctx, 0)
	defer cancel()
	r.remove(kctx, o)
}

// later records the candidate's Event apart from the loop, so that an Event
// never holds up the next candidate's GitHub call.
func (r *Reaper) later(ctx context.Context, wg *sync.WaitGroup, o *Outcome) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.recordEvent(ctx, o)
	}()
}

// recordEvent records why the reaper acted, on the object it acted on, once
// that object's write has done something: an Event for a write that was
// refused, skipped or found nothing to do would say the reaper did what it
// did not. It runs under eventContext, never the object's budget.
func (r *Reaper) recordEvent(ctx context.Context, o *Outcome) {
	if r.opts.DryRun || o.ObjectResult != fleet.Deleted {
		return
	}
	ectx, cancel, ok := r.eventContext(ctx)
	defer cancel()
	if !ok {
		o.EventErr = errors.New("event not recorded: the sweep's deadline has passed")
		return
	}
	c := o.Candidate
	msg := fmt.Sprintf("runner-reaper: %s: %s", c.Verdict, c.Evidence)
	var err error
	if c.EphemeralRunner != nil {
		err = r.kube.RecordEphemeralRunnerEvent(ectx, *c.EphemeralRunner, "RunnerReaped", msg)
	} else {
		err = r.kube.RecordEvent(ectx, *c.Pod, "RunnerReaped", msg)
	}
	if err != nil {
		o.EventErr = err
	}
}

// eventContext is the Event's context: detached from a signal like the
// action it records, bounded by EventTimeout and by the sweep's last
// moment (see lastMoment). ok is false when that has already passed.
func (r *Reaper) eventContext(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	d := r.opts.EventTimeout
	if d <= 0 {
		d = DefaultEventTimeout
	}
	end := time.Now().Add(d)
	if last, ok := lastMoment(ctx); ok && last.Before(end) {
		end = last
	}
	ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	return ectx, cancel, time.Until(end) > 0
}

// ReportReserve is the time before the sweep's deadline that no write of an
// action may take: the report needs it. A Lambda is killed at its
// invocation's deadline, and a write it was in the middle of would go
// unreported; cut short here instead, the write is reported failed and the
// next sweep finishes what it left.
const ReportReserve = 500 * time.Millisecond

// lastMoment is when every write of an action must be over: the sweep's
// deadline less ReportReserve. ok is false when the sweep has no deadline.
func lastMoment(ctx context.Context) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	return deadline.Add(-ReportReserve), ok
}

// needsRecheck reports whether the candidate's pod goes with no
// registration to delete first, while its runner could still take a job: a
// pod that is not terminal. A terminal pod's runner is dead, and an
// EphemeralRunner's has no pod to run in.
func (r *Reaper) needsRecheck(c reconcile.Candidate) bool {
	return c.Registration == nil && c.Pod != nil && c.Verdict != fleet.Terminal
}

// needsProof reports whether the candidate's action would release ARC's
// registration finalizer on an absence that its scope's list, which moved
// while it was read, could not prove, and that no re-check by name proves
// already: a terminal pod's EphemeralRunner, one of ARC's own leaks
// without a pod. It costs one look-up, for a candidate that acts.
func (r *Reaper) needsProof(c reconcile.Candidate) bool {
	if !c.AbsenceUnproven || r.needsRecheck(c) {
		return false
	}
	if c.Verdict == fleet.ARCStuckDeleting {
		return c.EphemeralRunner != nil && slices.Contains(c.EphemeralRunner.Finalizers, fleet.ARCRegistrationFinalizer)
	}
	return releases(c)
}

// preflight sends the candidate's Kubernetes write, and the ServiceAccount
// delete that follows it where configured, as server-side dry runs, and
// reports whether the candidate may go on. One request proves together
// what the write needs: RBAC, admission, that the object exists, and that
// it is still the one judged. A candidate with no Kubernetes object (a
// ghost) has nothing to prove.
func (r *Reaper) preflight(ctx context.Context, o *Outcome) bool {
	c := o.Candidate
	var res fleet.Result
	var err error
	switch {
	case c.EphemeralRunner != nil && o.Action == RemoveFinalizers:
		res, err = r.check.RemoveFinalizers(ctx, *c.EphemeralRunner)
	case c.EphemeralRunner != nil && o.Action == ReleaseRegistration:
		res, err = r.check.ReleaseRegistration(ctx, *c.EphemeralRunner)
	case c.EphemeralRunner != nil:
		res, err = r.check.DeleteEphemeralRunner(ctx, *c.EphemeralRunner)
	case c.Pod == nil:
		return true
	case c.Pod.Owner.ARCOwned():
		// The owner's delete takes whatever pod it has by then, so the
		// pod judged must still be the owner's pod (ownerPodUnchanged),
		// and the owner's delete must be allowed.
		if res, err = r.ownerPodUnchanged(ctx, *c.Pod); err == nil && res == fleet.Deleted {
			res, err = r.deleteOwner(ctx, r.check, c)
		}
	default:
		res, err = r.check.DeletePod(ctx, *c.Pod)
	}
	switch {
	case err != nil:
		o.Result, o.Err = fleet.Failed, r.refused(o, err)
		return false
	case res == fleet.Changed:
		o.ObjectResult, o.Result = res, fleet.SkippedChanged
		return false
	case res == fleet.AlreadyGone:
		o.ObjectResult, o.Result = res, fleet.AlreadyGone
		return false
	}
	if releases(c) {
		// The finalizer's release must be allowed too, or the
		// registration would go and ARC be left asking for it for ever.
		if _, err := r.check.ReleaseRegistration(ctx, *target(c)); err != nil {
			o.Result, o.Err = fleet.Failed, r.refused(o, err)
			return false
		}
	}
	if r.ownServiceAccount(c) {
		// A ServiceAccount that is not there is fine: the pod still goes.
		if _, err := r.check.DeleteServiceAccount(ctx, c.Pod.Namespace, c.Pod.Name); err != nil {
			o.Result, o.Err = fleet.Failed, r.refused(o, err)
			return false
		}
	}
	return true
}

// ownServiceAccount reports whether the candidate's same-named
// ServiceAccount goes with it: only for a bare pod, only when the option is
// on, and only when the pod ran as that very ServiceAccount (never the
// namespace's "default"): a ServiceAccount that merely shares the pod's
// name is someone else's.
func (r *Reaper) ownServiceAccount(c reconcile.Candidate) bool {
	return r.opts.DeleteServiceAccount && c.Pod != nil && c.EphemeralRunner == nil && !c.Pod.Owner.ARCOwned() &&
		c.Pod.ServiceAccount == c.Pod.Name && c.Pod.Name != "default"
}

// ownerPodUnchanged asks, with a server-side dry-run delete holding the
// judged pod's UID and resourceVersion, whether the pod is still the one
// judged: Deleted when it is, Changed or AlreadyGone when ARC has replaced
// or removed it. Deleting the owner then would take a pod nobody judged.
func (r *Reaper) ownerPodUnchanged(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	return r.check.DeletePod(ctx, p)
}

// refused says that a pre-flight failed and what was therefore left alone.
func (r *Reaper) refused(o *Outcome, err error) error {
	left := "nothing was changed"
	if c := o.Candidate; c.Registration != nil {
		left = fmt.Sprintf("registration %d (%s) was left alone", c.Registration.ID, c.Registration.Name)
	}
	return fmt.Errorf("pre-flight of %s: the Kubernetes write would be refused, so %s: %w", o.Object, left, err)
}

// unregister deletes the candidate's registration, if it has one, and
// reports whether its Kubernetes object may go next. In dry-run the
// delete is the first write: it is not made, and the candidate would go.
func (r *Reaper) unregister(ctx context.Context, o *Outcome) bool {
	c := o.Candidate
	// The kubelet's word is final for the pod it is about. A pod ARC owns
	// goes by its owner's delete, and ARC may have given the owner a new
	// pod on the same registration since: for it, a 422 or an error
	// weighs as for any runner that may be running a job.
	terminal := c.Verdict == fleet.Terminal && (c.Pod == nil || !c.Pod.Owner.ARCOwned())
	if c.Registration == nil {
		return true
	}
	scope, ok := r.opts.Scopes[c.ScopeKey]
	if !ok {
		o.Result, o.Err = fleet.Failed, fmt.Errorf("delete registration %d: scope %q is not configured", c.Registration.ID, c.ScopeKey)
		return false
	}
	if r.opts.DryRun {
		return true
	}
	// A 404 answers "already gone" only because this credential has just
	// listed the scope in this sweep: a candidate's registration comes
	// only from a list read to its end (complete, or moved while it was
	// read) or from a look-up by name in it, never from a scope whose list
	// failed, was rate-limited or contradicted itself. Were that not so, a
	// 404 could as well mean a wrong scope or no access.
	res, err := r.gh.DeleteRunner(ctx, scope, c.Registration.ID)
	o.Registration = res
	switch {
	case err != nil && r.limited(o, fmt.Errorf("delete registration %d in %s: %w", c.Registration.ID, scope, err)):
		return false
	case err != nil:
		o.Err = fmt.Errorf("delete registration %d in %s: %w", c.Registration.ID, scope, err)
		// A terminal pod is dead whatever GitHub says; its registration
		// will be a ghost for a later sweep.
		if terminal {
			return true
		}
		o.Result = fleet.Failed
		return false
	case res == fleet.Busy && !terminal:
		o.Result = fleet.SparedBusy
		return false
	case c.Pod == nil && c.EphemeralRunner == nil:
		o.Result = resultOf(res)
		return false
	default:
		return true
	}
}

// recheckAbsence asks GitHub for the runner by name right before a pod
// whose registration was absent is removed. There is no registration to
// delete first, so no 422 could protect a job that landed; and a list can be
// consistent yet wrong. Only a definite "no such runner" lets the pod go; a
// runner that has appeared is not the one that was judged, and an error is
// never evidence; but for a never-started runner, an offline registration
// under its name becomes the candidate's, deleted first.
func (r *Reaper) recheckAbsence(ctx context.Context, o *Outcome) bool {
	c := o.Candidate
	scope, ok := r.opts.Scopes[c.ScopeKey]
	if !ok {
		o.Result, o.Err = fleet.Failed, fmt.Errorf("re-check runner %q: scope %q is not configured", c.Pod.RunnerName, c.ScopeKey)
		return false
	}
	found, err := r.gh.FindRunner(ctx, scope, c.Pod.RunnerName)
	switch {
	case err != nil && r.limited(o, fmt.Errorf("re-check runner %q in %s before deleting its pod: %w", c.Pod.RunnerName, scope, err)):
		return false
	case err != nil:
		o.Result, o.Err = fleet.Failed, fmt.Errorf("re-check runner %q in %s before deleting its pod: %w", c.Pod.RunnerName, scope, err)
		return false
	case found != nil && found.Busy:
		o.Registration, o.Result = fleet.Busy, fleet.SparedBusy
		return false
	case found != nil && c.Verdict == fleet.NeverStarted && !found.Online && (c.RunnerID == 0 || found.ID == c.RunnerID):
		// A runner that never started cannot have registered itself:
		// an offline registration under its name is the one its
		// controller made for it (ARC registers before the pod
		// starts), which a list that had shown it would have made the
		// candidate's. It becomes so, and goes first, so that GitHub's
		// 422 still protects a job that landed. One of another id than
		// Kubernetes knows for the runner is not that registration.
		o.Candidate.Registration = found
		o.Candidate.RegistrationAbsent, o.Candidate.AbsenceUnproven = false, false
		o.Action = r.Action(o.Candidate)
		return true
	case found != nil:
		o.Result = fleet.SkippedRegistered
		return false
	default:
		return true
	}
}

// proveAbsence looks the candidate's runner up by name, for a release of
// ARC's registration finalizer that rests on an absence its scope's moved
// list could not prove (needsProof), and reports whether the action goes
// on. The name looked up is the EphemeralRunner's, which ARC registers the
// runner under; a pod that says another name gives no proof, since the
// look-up would be about another runner. Only a definite "no such runner"
// proves the absence (AbsentByName).
//
// Where the release is one step of a delete (a terminal pod's
// EphemeralRunner, one without a pod): a registration found with the
// EphemeralRunner's runner id becomes the candidate's registration, deleted
// first like any other, so that GitHub's 422 protects a job ARC may have
// given the runner since and a 204 or 404 proves it gone; a busy one, or
// one of another id, is no proof, and a busy one spares the candidate. A
// look-up that fails lets the delete go on without the release (ARC then
// removes a registration that exists itself, and one stuck on a
// registration that is gone comes back as arc-stuck-deleting), and says
// so. Where the release is the whole action (a stuck deletion), a runner
// found leaves it alone and an error fails it, its mark kept for a later
// sweep.
func (r *Reaper) proveAbsence(ctx context.Context, o *Outcome) bool {
	c := o.Candidate
	whole := o.Action == ReleaseRegistration
	er := target(c)
	name := er.Name
	noProof := func(why error) bool {
		if whole {
			o.Result, o.Err = fleet.Failed, why
			return false
		}
		o.Err = fmt.Errorf("ARC's registration finalizer is left to ARC: %w", why)
		return true
	}
	if c.Pod != nil && c.Pod.RunnerName != "" && c.Pod.RunnerName != name {
		return noProof(fmt.Errorf("pod %s/%s says runner %q, its EphemeralRunner %q: no look-up proves the registration gone", c.Pod.Namespace, c.Pod.Name, c.Pod.RunnerName, name))
	}
	scope, ok := r.opts.Scopes[c.ScopeKey]
	if !ok {
		return noProof(fmt.Errorf("look up runner %q: scope %q is not configured", name, c.ScopeKey))
	}
	if r.limit != nil {
		// GitHub's limit holds every call: no look-up, so no proof.
		if whole {
			r.held(o)
			return false
		}
		return noProof(fmt.Errorf("no look-up of runner %q: %w", name, r.limit))
	}
	found, err := r.gh.FindRunner(ctx, scope, name)
	switch {
	case err != nil:
		err = fmt.Errorf("look up runner %q in %s to prove its registration gone: %w", name, scope, err)
		if whole && r.limited(o, err) {
			return false
		}
		if rl := fleet.AsRateLimit(err); rl != nil {
			r.limit = rl
		}
		return noProof(err)
	case found != nil && found.Busy:
		o.Registration, o.Result = fleet.Busy, fleet.SparedBusy
		return false
	case found != nil && whole:
		o.Result = fleet.SkippedRegistered
		return false
	case found != nil && found.ID == er.RunnerID:
		o.Candidate.Registration = found
		o.Action = r.Action(o.Candidate)
		return true
	case found != nil:
		return noProof(fmt.Errorf("runner %q is registered with id %d, its EphemeralRunner says %d", name, found.ID, er.RunnerID))
	default:
		o.AbsentByName = true
		return true
	}
}

// remove carries out the candidate's Kubernetes writes; in dry-run they are
// where it stops.
func (r *Reaper) remove(ctx context.Context, o *Outcome) {
	switch {
	case r.opts.DryRun:
		o.Result = fleet.WouldDelete
	case o.Candidate.EphemeralRunner != nil:
		r.removeEphemeralRunner(ctx, o)
	default:
		r.removePod(ctx, o)
	}
}

// removePod deletes the pod (or its ARC owner) with its preconditions and,
// where configured, its ServiceAccount.
func (r *Reaper) removePod(ctx context.Context, o *Outcome) {
	c := o.Candidate
	p := *c.Pod
	var res fleet.Result
	var err error
	if p.Owner.ARCOwned() {
		// Checked again right before: a pod replaced while the
		// registration was deleted would go with its owner otherwise.
		res, err = r.ownerPodUnchanged(ctx, p)
		if err == nil && res != fleet.Deleted {
			// The pod judged was replaced or removed since: its owner,
			// the object of this action, is left alone and nothing is
			// reported done. The mark stays, and the next sweep judges
			// whatever pod the owner has by then.
			o.Result = fleet.SkippedChanged
			return
		}
		if err == nil {
			res, err = r.deleteOwner(ctx, r.kube, c)
		}
	} else {
		res, err = r.kube.DeletePod(ctx, p)
	}
	o.ObjectResult = res
	if !r.settle(o, res, err) {
		return
	}
	r.release(ctx, o)
	// The same-named ServiceAccount belongs to bare pods; ARC cleans up
	// after its own.
	if r.ownServiceAccount(c) {
		sa, err := r.kube.DeleteServiceAccount(ctx, p.Namespace, p.Name)
		o.ServiceAccount = sa
		if err != nil {
			o.Result, o.Err = fleet.Failed, errors.Join(o.Err, err)
		}
	}
}

// removeEphemeralRunner acts on one of ARC's own leaks.
func (r *Reaper) removeEphemeralRunner(ctx context.Context, o *Outcome) {
	er := *o.Candidate.EphemeralRunner
	var res fleet.Result
	var err error
	switch o.Action {
	case RemoveFinalizers:
		res, err = r.kube.RemoveFinalizers(ctx, er)
	case ReleaseRegistration:
		if !proven(o) {
			// Never reached: the loop proves the absence first. A
			// release without proof would let ARC forget a
			// registration that may exist.
			o.Result, o.Err = fleet.Failed, fmt.Errorf("release %s: its registration is not proven gone", Object(o.Candidate))
			return
		}
		res, err = r.kube.ReleaseRegistration(ctx, er)
	default:
		res, err = r.kube.DeleteEphemeralRunner(ctx, er)
	}
	o.ObjectResult = res
	if r.settle(o, res, err) {
		r.release(ctx, o)
	}
}

// deleteOwner deletes the owner of an ARC pod: the EphemeralRunner as it
// was observed (its UID and resourceVersion), when ARC's objects are
// watched, so that one deleted or changed since is Changed, never deleted
// "again"; else by the owner reference's UID alone.
func (r *Reaper) deleteOwner(ctx context.Context, w fleet.Writes, c reconcile.Candidate) (fleet.Result, error) {
	if c.OwnerRunner != nil {
		return w.DeleteEphemeralRunner(ctx, *c.OwnerRunner)
	}
	return w.DeleteOwner(ctx, c.Pod.Namespace, *c.Pod.Owner)
}

// release removes ARC's registration finalizer from the EphemeralRunner
// just deleted, where the candidate has the proof releases asks for and
// the registration delete, if any, answered 204 or 404. It is part of the
// action: without it ARC v0.27.6 keeps the EphemeralRunner, its pod and
// its JIT secret for ever, so a failed release fails the action; the
// EphemeralRunner, deleting, comes back as arc-stuck-deleting.
func (r *Reaper) release(ctx context.Context, o *Outcome) {
	c := o.Candidate
	if !releases(c) || !proven(o) || o.ObjectResult != fleet.Deleted {
		return
	}
	if c.Registration != nil && o.Registration != fleet.Deleted && o.Registration != fleet.AlreadyGone {
		return
	}
	res, err := r.kube.ReleaseRegistration(ctx, *target(c))
	o.Finalizer = res
	if err != nil {
		o.Result, o.Err = fleet.Failed, errors.Join(o.Err, err)
	}
}

// settle records the result of deleting the Kubernetes object and reports
// whether it is gone.
func (r *Reaper) settle(o *Outcome, res fleet.Result, err error) bool {
	switch {
	case err != nil:
		// The adapters' errors already say what was being done to which
		// object; wrapping them again would only repeat it.
		o.Result, o.Err = fleet.Failed, errors.Join(o.Err, err)
		return false
	case res == fleet.Changed:
		o.Result = fleet.SkippedChanged
		return false
	case o.Registration == fleet.Deleted:
		o.Result = fleet.Deleted
	default:
		o.Result = resultOf(res)
	}
	return true
}

func resultOf(r fleet.Result) fleet.Result {
	switch r {
	case fleet.AlreadyGone:
		return fleet.AlreadyGone
	case fleet.Busy:
		return fleet.SparedBusy
	default:
		return fleet.Deleted
	}
}

// admission is what was settled for the candidates before any of them is
// admitted: who waits behind a looping group's first, whose job check and
// log read had a turn, and what they answered.
type admission struct {
	waiting, turns, logTurns map[int]bool
	answers                  map[int]*jobAnswer
	reads                    map[int]*LogRead
}

// admit decides, in bound order, each candidate's fate short of acting:
// admitted (Result empty), or why not. Nothing is written here.
func (r *Reaper) admit(ctx context.Context, cs []reconcile.Candidate, budget *reconcile.Budget, a admission) []Outcome {
	waiting, turns, logTurns, answers, reads := a.waiting, a.turns, a.logTurns, a.answers, a.reads
	out := make([]Outcome, len(cs))
	for i, c := range cs {
		out[i] = Outcome{Candidate: c, Action: r.Action(c), Object: Object(c), DryRun: r.opts.DryRun, Result: fleet.Deferred}
		switch {
		case out[i].Action == Report:
			out[i].Result = fleet.Reported
			if c.Pod != nil && c.EphemeralRunner == nil && !c.ReportOnly {
				out[i].Err = errOwnerUnobserved
			}
		case alreadyDeleting(c):
			// A delete of an object being deleted changes nothing: it
			// is not written, not reported done, and takes no place.
			out[i].Result = fleet.AlreadyDeleting
		case budget.LoopHeld(c) || waiting[i] && r.needsTurn(c):
			// Its group loops and has had its one action of the
			// sweep, or waits behind the group's first candidate
			// with no check or read of its own (loopWaiting): it
			// takes no place in the bound.
			out[i].Result = fleet.LoopHeld
		case !budget.Fits(c):
			out[i].Bounded = true
		case needsJobCheck(c) && r.asks(c) && !turns[i]:
			// Deferred: its mark stays for a later sweep's check.
		case needsJobCheck(c) && !r.checkJob(ctx, &out[i], answers[i]):
			// The job guard has asked before admission (askJobs), so
			// that a protected runner takes no place in the bound.
			// checkJob said why not.
		case r.needsLogRead(c) && (r.limit == nil || !r.needsGitHub(c)) && !r.logSays(ctx, &out[i], logTurns[i], reads[i]):
			// Its log was read before admission (readLogs) so that a
			// protected runner takes no place in the bound; logSays
			// said why not. One that GitHub's rate limit holds anyway
			// was not read, and is held below.
		default:
			budget.Admit(c)
			out[i].Result = ""
		}
	}
	return out
}
