package chaos

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// ARC in the world (hazard ARC): EphemeralRunnerSets that keep a number of
// EphemeralRunners, each with its registration, its pod and its JIT secret,
// and ARC's controller, which runs once per interval between sweeps on the
// virtual clock. What is modelled of ARC v0.27.6
// (controllers/actions.github.com/ephemeralrunner_controller.go and
// ephemeralrunnerset_controller.go):
//
//   - an EphemeralRunner (ER) is created with both finalizers, its runner
//     registered at once (status.runnerId, the registration online from the
//     start: the JIT registration's offline-until-connected moment is not
//     modelled), its JIT secret and its pod, named as the ER;
//   - its phase follows its pod: Running when the pod runs; a pod Succeeded
//     makes the ER Succeeded, which the set deletes; a pod in phase Failed
//     is deleted by ARC and the ER marked Failed (ARC's five retries
//     collapsed into one: a Failed ER with no pod, which the set counts and
//     never replaces); a pod whose runner container ended while the pod
//     still says Running is not noticed by ARC (a terminal leak);
//   - a pod that vanishes (node loss, eviction) is not recreated (a quota
//     or a webhook refuses it): the ER stays podless;
//   - a deleting ER: with the registration finalizer, unless Succeeded,
//     ARC asks the Actions service to remove runner status.runnerId:
//     JobStillRunning while the registration is busy (requeue), 204 when it
//     exists (removed, finalizer dropped), 404 when it does not: a failure
//     retried for ever by v0.27.6, taken as done by an ARC with PR #4399.
//     Only then its own finalizer: the pod and the JIT secret are deleted
//     and the ER goes;
//   - the set replaces every ER being deleted or gone (deleting ERs do not
//     count), never a Failed one;
//   - the listener writes the job on the ER's status when one lands
//     (jobRepositoryName, workflowRunId, jobRequestId, jobDisplayName;
//     status.jobId too for the set that stands for a newer ARC), which
//     changes its resourceVersion;
//   - someone (a person, a scale-down) deletes an ER now and then, even one
//     whose runner is running a job: ARC then waits for the job.
//
// Not modelled: ARC's pod recreation after a failure, scale-down of idle
// runners by the set, ARC's own retries' backoff (a pass per interval), the
// legacy summerwind Runner, the listener's scale decisions.

const (
	arcFailedAfter  = 5 * time.Minute
	arcPodlessAfter = 5 * time.Minute
	arcStuckAfter   = 5 * time.Minute
	// arcOwnFinalizer is ARC's own finalizer: the pod and the secret go
	// before it is dropped.
	arcOwnFinalizer = "ephemeralrunner.actions.github.com/finalizer"
)

// arcSet is an EphemeralRunnerSet: replicas kept in one scope, and which
// ARC drives them (fixed404: an ARC with PR #4399, which takes the
// service's 404 for done).
type arcSet struct {
	name     string
	scope    string
	replicas int
	fixed404 bool
}

var arcSets = []*arcSet{
	{name: "arc-beta", scope: "org:beta", replicas: 6},
	{name: "arc-web", scope: "repo:acme/web", replicas: 4, fixed404: true},
}

// ker is an EphemeralRunner as it really is.
type ker struct {
	set           *arcSet
	ns, name, uid string
	rv            int
	phase         string
	runnerID      int64
	// job is what ARC's listener wrote on the status when a job started
	// on the runner (jobs.go); nil before.
	job *fleet.Job
	// jobNext is the job the listener will write at jobAt.
	jobNext             *fleet.Job
	jobAt               time.Time
	created             time.Time
	deletingSince       time.Time
	failedAt, podGoneAt time.Time
	finalizers          []string
	pod                 *kpod
	secret              bool
	gone                bool
	goneAt              time.Time
	touchedAt           time.Time // the reaper's first delete or release
	claimedAt           time.Time // when an act of the reaper reported its release done
	// owed: the reaper deleted it with proof that its registration is
	// gone and did not report its release: no delay is excused.
	owed                   bool
	lateReported, endedRec bool
}

func (e *ker) key() string { return e.ns + "/" + e.name }

func (e *ker) has(f string) bool { return slices.Contains(e.finalizers, f) }

func (e *ker) drop(f string) {
	e.finalizers = slices.DeleteFunc(e.finalizers, func(x string) bool { return x == f })
	e.rv++
}

func (e *ker) podAlive() bool { return e.pod != nil && !e.pod.gone }

func (e *ker) view() fleet.EphemeralRunner {
	return fleet.EphemeralRunner{
		Namespace: e.ns, Name: e.name, UID: e.uid, ResourceVersion: strconv.Itoa(e.rv),
		ScopeKey: e.set.scope, Phase: e.phase, RunnerID: e.runnerID, CreatedAt: fleet.StampOf(e.created),
		DeletingSince: fleet.StampOf(e.deletingSince), Finalizers: slices.Clone(e.finalizers), Job: cloneJob(e.job),
	}
}

// object is how an outcome names the ER (reap.Object).
func (e *ker) object() string { return fleet.EphemeralRunnerKind + " " + e.key() }

// actKey is the key an act on the ER counts under in the bound: its pod's
// while it has one (the candidate is the pod's), else its own.
func (e *ker) actKey() string {
	if e.podAlive() {
		return fleet.PodMarkKey(e.pod.uid)
	}
	return fleet.EphemeralRunnerMarkKey(e.uid)
}

// arcRun is what a run knows of ARC across sweeps.
type arcRun struct {
	ers   []*ker // alive, in creation order
	byKey map[string]*ker
	byUID map[string]*ker
	// leaks are the ARC leaks by ER UID: open until the ER, its pod, its
	// JIT secret and its registration are all gone.
	leaks map[string]*leak
	// touched holds the ERs the reaper deleted or released, until gone.
	touched map[string]*ker
}

func (w *world) arcOn() bool { return w.cfg.Hazards.Has(ARC) }

// newARC builds the sets with their runners up and registered.
func (w *world) newARC() {
	w.arc = &arcRun{byKey: map[string]*ker{}, byUID: map[string]*ker{}, leaks: map[string]*leak{}, touched: map[string]*ker{}}
	if !w.arcOn() {
		return
	}
	for _, s := range arcSets {
		for i := 0; i < s.replicas; i++ {
			e := w.newER(s)
			e.pod.startAt = w.now
		}
	}
}

// newER is the set creating an EphemeralRunner, and ARC its registration,
// JIT secret and pod.
func (w *world) newER(s *arcSet) *ker {
	w.seq++
	name := fmt.Sprintf("%s%s-%d", ourPrefix, s.name, w.seq)
	e := &ker{set: s, ns: nsRunners, name: name, uid: fmt.Sprintf("er-%06d", w.seq), rv: 1, phase: "Pending", created: w.now,
		finalizers: []string{fleet.ARCRegistrationFinalizer, arcOwnFinalizer}, secret: true}
	r := w.sim.AddRunner(s.scope, ghsim.Runner{Name: name, Ephemeral: true, Labels: []ghsim.Label{{Name: "self-hosted"}, {Name: "linux"}}})
	e.runnerID = r.ID
	p := w.newPod(nsRunners, name, s.scope, true)
	p.er, p.regID = e, r.ID
	w.owner[r.ID] = p
	p.startAt = w.now.Add(w.within(20 * time.Second))
	if w.chance(LateStart, 0.2) {
		p.startAt = w.now.Add(w.within(4 * time.Minute))
	}
	// The pool's stamp on ARC's pod template: a claim may come, or not.
	// Its age counts from the runner's start, as a bare pod's from its
	// registration: the sweep judges only a running pod.
	if w.chance(OrphanStamp, 0.2) {
		p.stamped, p.stampAt = true, p.startAt
		if w.rng.IntN(2) == 0 {
			p.claimAt = p.startAt.Add(w.within(stampMaxAge / 2))
		}
	}
	e.pod = p
	w.arc.ers = append(w.arc.ers, e)
	w.arc.byKey[e.key()] = e
	w.arc.byUID[e.uid] = e
	return e
}

// erReg is the registration the ER's status.runnerId names, or nil.
func (w *world) erReg(e *ker) *ghsim.Runner {
	if e.runnerID == 0 {
		return nil
	}
	if w.snap != nil {
		if r, ok := w.snap[e.set.scope][e.runnerID]; ok {
			return &r
		}
		return nil
	}
	for _, r := range w.sim.Runners(e.set.scope) {
		if r.ID == e.runnerID {
			return &r
		}
	}
	return nil
}

// erHolds reports whether an ER that is still there stands for the
// registration, by runner id or name: it is then no ghost.
func (w *world) erHolds(scope string, r ghsim.Runner) bool {
	if w.arc == nil {
		return false
	}
	for _, e := range w.arc.ers {
		if e.set.scope == scope && (e.runnerID == r.ID || e.name == r.Name) {
			return true
		}
	}
	return false
}

// erOfRunner is the ER still there whose status names the registration.
func (w *world) erOfRunner(scope string, id int64) *ker {
	if w.arc == nil {
		return nil
	}
	for _, e := range w.arc.ers {
		if e.set.scope == scope && e.runnerID == id {
			return e
		}
	}
	return nil
}

func (w *world) removeER(e *ker) {
	e.gone, e.goneAt = true, w.now
	delete(w.arc.byKey, e.key())
	w.arc.ers = slices.DeleteFunc(w.arc.ers, func(x *ker) bool { return x == e })
}

// arcPass is one pass of ARC's controllers over every object.
func (w *world) arcPass() {
	if !w.arcOn() {
		return
	}
	for _, e := range append([]*ker(nil), w.arc.ers...) {
		if e.deletingSince.IsZero() {
			w.arcLive(e)
		}
		if !e.deletingSince.IsZero() {
			w.arcFinalize(e)
		}
	}
	// The sets keep their replicas: deleting ERs do not count, Failed
	// ones do.
	for _, s := range arcSets {
		n := 0
		for _, e := range w.arc.ers {
			if e.set == s && e.deletingSince.IsZero() {
				n++
			}
		}
		for ; n < s.replicas; n++ {
			w.newER(s)
		}
	}
}

// arcLive is ARC's reconcile of an ER that is not being deleted.
func (w *world) arcLive(e *ker) {
	p := e.pod
	if !e.podAlive() {
		if e.podGoneAt.IsZero() && p != nil {
			e.podGoneAt = p.goneAt
		}
		return
	}
	switch {
	case p.phase == "Succeeded":
		e.phase, e.deletingSince = "Succeeded", w.now
		e.rv += 2
	case p.phase == "Failed":
		w.kill(p)
		e.podGoneAt = w.now
		e.phase, e.failedAt = "Failed", w.now
		e.rv++
	case p.phase == "Running" && e.phase == "Pending":
		e.phase = "Running"
		e.rv++
	}
	if !e.deletingSince.IsZero() || !e.podAlive() {
		return
	}
	switch {
	case w.chance(ARC, 0.004):
		// Evicted, and ARC cannot make another (a quota).
		w.kill(p)
		e.podGoneAt = w.now
	case w.chance(ARC, 0.003):
		// Someone deletes it, a job running or not: ARC waits for
		// the job.
		e.deletingSince = w.now
		e.rv++
	}
}

// arcFinalize is ARC's reconcile of an ER being deleted.
func (w *world) arcFinalize(e *ker) {
	if e.has(fleet.ARCRegistrationFinalizer) {
		if e.phase == "Succeeded" {
			e.drop(fleet.ARCRegistrationFinalizer)
		} else {
			r := w.erReg(e)
			switch {
			case r != nil && r.Busy:
				w.stats.ARCJobStillRunning++
				return
			case r != nil:
				w.sim.RemoveRunner(e.set.scope, r.ID)
				if p := w.owner[r.ID]; p != nil {
					p.regID, p.removedAt = 0, w.now
					delete(w.owner, r.ID)
				}
				e.drop(fleet.ARCRegistrationFinalizer)
			case e.set.fixed404:
				e.drop(fleet.ARCRegistrationFinalizer)
			default:
				// v0.27.6: "Failed clean up runner from the
				// service", for ever.
				w.stats.ARC404Loops++
				return
			}
		}
	}
	if e.has(arcOwnFinalizer) {
		if e.podAlive() {
			w.kill(e.pod)
		}
		e.secret = false
		e.drop(arcOwnFinalizer)
	}
	if len(e.finalizers) == 0 {
		w.removeER(e)
	}
}

// erLeak says whether the ER is an ARC leak the reaper may act on, of what
// kind and since when.
func (w *world) erLeak(e *ker) (kind string, since time.Time, ok bool) {
	if e.gone {
		return "", time.Time{}, false
	}
	if !e.deletingSince.IsZero() {
		// ARC finishes it, unless v0.27.6 asks for a registration that
		// is gone: then only the reaper can, in a scope it lists.
		if e.has(fleet.ARCRegistrationFinalizer) && e.phase != "Succeeded" && !e.set.fixed404 && w.erReg(e) == nil && isConfigured(e.set.scope) {
			return string(fleet.ARCStuckDeleting), maxTime(e.deletingSince.Add(arcStuckAfter), w.now), true
		}
		return "", time.Time{}, false
	}
	if e.podAlive() {
		kind, since, ok := w.podLeak(e.pod)
		return kind, since, ok && !w.now.Before(since)
	}
	if !isConfigured(e.set.scope) {
		return "", time.Time{}, false
	}
	if r := w.erReg(e); r != nil && r.Busy {
		return "", time.Time{}, false
	}
	if e.phase == "Failed" {
		return string(fleet.ARCFailed), e.failedAt, true
	}
	return string(fleet.ARCPodless), maxTime(e.podGoneAt, e.pod.goneAt), true
}

// arcEnded reports whether nothing of the ER is left: itself, its pod, its
// JIT secret, its registration.
func (w *world) arcEnded(e *ker) bool {
	return e.gone && !e.podAlive() && !e.secret && w.erReg(e) == nil
}

// trackARC brings the ARC leaks up to date: a leak opens when the truth
// says so and stays open until nothing of it is left; one the reaper never
// acted on and the truth no longer holds is resolved by the world.
func (w *world) trackARC() {
	if !w.arcOn() {
		return
	}
	defer w.snapshot()()
	for _, e := range w.arc.ers {
		kind, since, ok := w.erLeak(e)
		if !ok || w.now.Before(since) {
			continue
		}
		d := maxTime(since.Add(holdOf(kind)), w.lastExcuse(e.set.scope).Add(fullHold(fleet.Verdict(kind)))).Add(3 * interval)
		l := w.arc.leaks[e.uid]
		switch {
		case l == nil:
			w.arc.leaks[e.uid] = &leak{key: e.uid, kind: kind, scope: e.set.scope, since: since, deadline: d}
		case l.kind != kind:
			// A leak that turns into another (a Failed pod ARC
			// removed, a deletion that cannot finish) has the new
			// kind's whole hold.
			l.kind = kind
			if d.After(l.deadline) {
				l.deadline = d
			}
		}
	}
	for _, uid := range sortedKeys(w.arc.leaks) {
		l, e := w.arc.leaks[uid], w.arc.byUID[uid]
		if !e.deletingSince.IsZero() && e.claimedAt.IsZero() && !e.owed && e.has(fleet.ARCRegistrationFinalizer) {
			// Deleted by someone, or by the reaper without proof (its
			// scope's list not complete: a terminal pod needs none):
			// if ARC cannot finish, the stuck-deleting path does, its
			// wait, a confirmation, the act and ARC's pass.
			if d := e.deletingSince.Add(arcStuckAfter + confirmAfter + 3*interval); d.After(l.deadline) {
				l.deadline, l.delayed = d, true
			}
		}
		if w.arcEnded(e) {
			if !e.touchedAt.IsZero() {
				w.stats.ARCCleaned++
				w.stats.ARCTimeToEnd = append(w.stats.ARCTimeToEnd, int(math.Ceil(float64(w.now.Sub(l.since))/float64(interval))))
			}
			delete(w.arc.leaks, uid)
			continue
		}
		if _, _, ok := w.erLeak(e); !ok && e.touchedAt.IsZero() && (e.gone || e.deletingSince.IsZero() || e.phase == "Succeeded") {
			delete(w.arc.leaks, uid) // resolved by the world
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// excuseARC moves an ARC leak's deadline for a documented cause.
func excuseARC(l *leak, at time.Time) {
	d := at.Add(fullHold(fleet.Verdict(l.kind)) + 3*interval)
	if d.After(l.deadline) {
		l.deadline, l.delayed = d, true
	}
}

// arcTarget is the ER an outcome acted on, or nil.
func (w *world) arcTarget(c fleet.EphemeralRunner) *ker {
	if w.arc == nil {
		return nil
	}
	return w.arc.byUID[c.UID]
}

// afterARC checks the ARC side of one finished sweep: which acts claimed
// their release, the documented delays, and the no-op writes.
func (w *world) afterARC(sc *sweepCtx, res sweep.Result, excuseAll bool) {
	w.noopWrites(sc, res)
	if !w.arcOn() {
		return
	}
	for _, o := range res.Outcomes {
		c := o.Candidate
		var e *ker
		switch {
		case c.EphemeralRunner != nil:
			e = w.arcTarget(*c.EphemeralRunner)
		case c.OwnerRunner != nil:
			e = w.arcTarget(*c.OwnerRunner)
		}
		if e == nil {
			continue
		}
		released := o.Finalizer == fleet.Deleted || o.Finalizer == fleet.AlreadyGone ||
			o.Action == reap.ReleaseRegistration && (o.ObjectResult == fleet.Deleted || o.ObjectResult == fleet.AlreadyGone)
		if released && !e.touchedAt.IsZero() && e.claimedAt.IsZero() {
			e.claimedAt = sc.at
		}
		l := w.arc.leaks[e.uid]
		// An act without proof that the registration is gone (its
		// scope's list not complete this sweep: a terminal pod needs
		// none) leaves the ER to ARC; if ARC cannot finish it, the
		// stuck-deleting path does: its wait, a confirmation, the act
		// and ARC's pass. With proof and no release, no delay.
		if o.ObjectResult == fleet.Deleted && !released && (c.Registration != nil || c.RegistrationAbsent) && c.Verdict != fleet.ARCStuckDeleting {
			e.owed = true
		}
		if l != nil {
			switch o.Result {
			case fleet.Deferred, fleet.NotReached, fleet.Failed, fleet.SkippedChanged, fleet.RateLimited:
				excuseARC(l, sc.at)
			}
		}
	}
	for _, uid := range sortedKeys(w.arc.leaks) {
		l := w.arc.leaks[uid]
		if excuseAll || res.Class.SkippedScope(l.scope) {
			excuseARC(l, sc.at)
		}
	}
}

// noopWrites reports each write the sweep said deleted an object (or
// released its registration finalizer) that changed nothing.
func (w *world) noopWrites(sc *sweepCtx, res sweep.Result) {
	for _, o := range res.Outcomes {
		if o.ObjectResult == fleet.Deleted && o.Result == fleet.Deleted {
			key := o.Object
			if o.Action == reap.ReleaseRegistration {
				// The stuck one's action is the release alone.
				key = "release " + o.Object
			}
			if changed, wrote := sc.writes[key]; wrote && !changed {
				w.violateAt(sc, NoopReported, "%s %s: %s reported deleted, the write changed nothing", o.Candidate.Verdict, o.Action, o.Object)
			}
		}
		if o.Finalizer == fleet.Deleted && o.Result == fleet.Deleted {
			if changed, wrote := sc.writes["release "+o.Object]; wrote && !changed {
				w.violateAt(sc, NoopReported, "%s %s: the registration finalizer of %s reported released, the write changed nothing", o.Candidate.Verdict, o.Action, o.Object)
			}
		}
	}
}

// livenessARC reports every ARC leak past its deadline, and every ER the
// reaper deleted or released that is still deleting past its bound.
func (w *world) livenessARC(sc *sweepCtx) {
	if !w.arcOn() {
		return
	}
	defer w.snapshot()()
	for _, uid := range sortedKeys(w.arc.leaks) {
		l, e := w.arc.leaks[uid], w.arc.byUID[uid]
		if sc.at.After(l.deadline) && !e.endedRec {
			e.endedRec = true
			w.violateAt(sc, ARCLeakEnds, "%s EphemeralRunner %s open since %s, deadline %s passed: %s", l.kind, e.key(), l.since.Format(time.TimeOnly), l.deadline.Format(time.TimeOnly), w.describeER(e))
		}
	}
	for _, uid := range sortedKeys(w.arc.touched) {
		e := w.arc.touched[uid]
		if e.gone {
			if !e.deletingSince.IsZero() {
				d := int(math.Ceil(float64(e.goneAt.Sub(e.deletingSince)) / float64(interval)))
				w.stats.ARCMaxDeleting = max(w.stats.ARCMaxDeleting, d)
			}
			delete(w.arc.touched, uid)
			continue
		}
		if e.deletingSince.IsZero() || e.lateReported {
			continue
		}
		// An act that reported its release leaves ARC nothing to wait
		// for: gone at its next pass. Otherwise the stuck-deleting path
		// (its wait, a confirmation, the act, ARC's pass), moved by the
		// documented delays of the ER's leak.
		bound := e.claimedAt.Add(2 * interval)
		why := "its release was reported done"
		if e.claimedAt.IsZero() {
			bound = e.touchedAt.Add(arcStuckAfter + confirmAfter + 3*interval)
			if l := w.arc.leaks[uid]; l != nil && l.deadline.After(bound) {
				bound = l.deadline
			}
			why = "the stuck-deleting path's bound"
		}
		if sc.at.After(bound) {
			e.lateReported = true
			w.violateAt(sc, StaysDeleting, "EphemeralRunner %s touched at %s still deleting past %s (%s): %s", e.key(), e.touchedAt.Format(time.TimeOnly), bound.Format(time.TimeOnly), why, w.describeER(e))
		}
	}
}

func (w *world) describeER(e *ker) string {
	reg := "no registration"
	if r := w.erReg(e); r != nil {
		reg = fmt.Sprintf("registration %d %s busy=%v", r.ID, r.Status, r.Busy)
	}
	pod := "no pod"
	if e.podAlive() {
		pod = "pod " + e.pod.phase
	}
	return fmt.Sprintf("set %s (fixed404 %v), phase %s, deleting since %s, finalizers %v, %s, secret %v, %s",
		e.set.name, e.set.fixed404, e.phase, e.deletingSince.Format(time.TimeOnly), e.finalizers, pod, e.secret, reg)
}

// touch records the reaper's act on an ER, for the deleting bound.
func (w *world) touch(e *ker) {
	if e.touchedAt.IsZero() {
		e.touchedAt = w.now
	}
	w.arc.touched[e.uid] = e
}
