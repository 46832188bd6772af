package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/ghclient"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/memory"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// Config is one run: a seed, a number of sweeps, the hazards enabled, and
// the product as it is (Break None) or broken on purpose.
type Config struct {
	Seed    uint64
	Sweeps  int
	Hazards Hazard
	Break   Break
	// StopAtFirst ends the run at the first violation, so that the sweep
	// count of a failing run is the shortest reproduction for its seed.
	StopAtFirst bool
	// StopOn, when set, ends the run at the first violation of this
	// invariant: a broken product shown to be caught needs no more sweeps.
	StopOn Invariant
	// BusyOrgRunners is the busy org's size under hazard BusyOrg;
	// DefaultBusyOrgRunners when zero.
	BusyOrgRunners int
	// LogsForbidden is the world whose reaper lacks the pods/log right:
	// every runner log read is refused 403.
	LogsForbidden bool
	// UnschedulableOptIn is the reaper told to delete Unschedulable pods
	// too (REAPER_DELETE_UNSCHEDULABLE), where hazard StartFaults makes
	// them. Loops reads the loops a sweep reported, for LoopReported; nil
	// reads them from the sweep's result (productLoops), and anything else
	// is handed the sweep's JSON log lines too.
	UnschedulableOptIn bool
	Loops              LoopReporter
}

// Violation is one broken promise, with the sweep it broke in.
type Violation struct {
	Sweep     int
	Invariant Invariant
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("sweep %d: %s: %s", v.Sweep, v.Invariant, v.Detail)
}

// Stats is what a run found.
type Stats struct {
	Seed       uint64
	Sweeps     int
	Wrongful   int
	Cleaned    int
	Violations []Violation
	// TimeToClean holds, per verdict, how many sweep intervals each leak
	// took from the moment it could be acted on to its removal.
	TimeToClean map[string][]int
	// Undetected counts lists taken as complete although a runner slid
	// from page 2 to page 1 unseen while they were read; WrongMarks counts
	// verdicts of unregistered or zombie on a pod whose runner is in fact
	// registered and online.
	Shifts int
	// Repeats counts lists that met a page listing a runner twice
	// (hazard RepeatPage).
	Repeats int
	// RateLimitFailed counts rate-limited sweeps that exited 1 rather
	// than 3 (go-github's remembered limit failing later GitHub work).
	RateLimitFailed int
	// Delayed counts cleaned leaks whose deadline a documented cause
	// (bound, skipped scope, refused or failed delete, ledger wipe or
	// overlap, failed sweep) moved.
	Delayed    int
	Undetected int
	WrongMarks int
	// ARCCleaned counts the ARC leaks the reaper acted on that ended with
	// nothing left, and ARCTimeToEnd how many sweep intervals each took
	// from the moment it could be acted on; ARCMaxDeleting is the longest
	// an EphemeralRunner the reaper touched stayed deleting, in sweep
	// intervals. ARCJobStillRunning and ARC404Loops count ARC's passes
	// that met the service's JobStillRunning, and v0.27.6's 404 retried.
	ARCCleaned         int
	ARCTimeToEnd       []int
	ARCMaxDeleting     int
	ARCJobStillRunning int
	ARC404Loops        int
	// BusyOrg is what the busy org's scope met (hazard BusyOrg).
	BusyOrg BusyOrgStats
	// JobKills is what the jobs met: the job guard's answers, and the
	// jobs killed per verdict, with evidence and without (jobs.go).
	JobKills JobKillStats
	// Logs is what the runners' logs met (runnerlog.go).
	Logs LogStats
	// Starts is what the start faults met (startfaults.go).
	Starts   StartStats
	Duration time.Duration
}

// Summary is the one line `make chaos` prints.
func (s *Stats) Summary() string {
	var all []int
	for _, v := range s.TimeToClean {
		all = append(all, v...)
	}
	return fmt.Sprintf("chaos: %d sweeps, %d wrongful, %d leaks cleaned, p95 time-to-clean %d sweeps", s.Sweeps, s.Wrongful, s.Cleaned, percentile(all, 0.95))
}

// ViolationCounts is the run's violations counted by invariant, in the
// order each first broke: "Liveness 3, ExitStatus 1"; "none" when there
// are none.
func (s *Stats) ViolationCounts() string {
	var order []Invariant
	n := map[Invariant]int{}
	for _, v := range s.Violations {
		if n[v.Invariant] == 0 {
			order = append(order, v.Invariant)
		}
		n[v.Invariant]++
	}
	if len(order) == 0 {
		return "none"
	}
	parts := make([]string, len(order))
	for i, inv := range order {
		parts[i] = fmt.Sprintf("%s %d", inv.Name(), n[inv])
	}
	return strings.Join(parts, ", ")
}

// ARCSummary is the ARC side's line: the leaks that ended, how long they
// took, and the longest an EphemeralRunner the reaper touched stayed
// deleting.
func (s *Stats) ARCSummary() string {
	return fmt.Sprintf("chaos: ARC: %d leaks ended with nothing left (p50 %d, p95 %d, max %d sweeps), max time deleting %d sweeps, %d JobStillRunning answers, %d v0.27.6 404 retries",
		s.ARCCleaned, percentile(s.ARCTimeToEnd, 0.5), percentile(s.ARCTimeToEnd, 0.95), percentile(s.ARCTimeToEnd, 1), s.ARCMaxDeleting, s.ARCJobStillRunning, s.ARC404Loops)
}

// Distribution prints the time-to-clean per verdict, one line each.
func (s *Stats) Distribution() string {
	verdicts := make([]string, 0, len(s.TimeToClean))
	for v := range s.TimeToClean {
		verdicts = append(verdicts, v)
	}
	sort.Slice(verdicts, func(i, j int) bool {
		return fleet.Verdict(verdicts[i]).Priority() < fleet.Verdict(verdicts[j]).Priority()
	})
	var b strings.Builder
	for _, v := range verdicts {
		d := s.TimeToClean[v]
		fmt.Fprintf(&b, "  %-15s n=%-6d p50=%d p95=%d max=%d sweeps\n", v, len(d), percentile(d, 0.5), percentile(d, 0.95), percentile(d, 1))
	}
	return b.String()
}

func percentile(d []int, p float64) int {
	if len(d) == 0 {
		return 0
	}
	s := append([]int(nil), d...)
	sort.Ints(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

type faultKind int

const (
	faultError faultKind = iota
	faultRate
	faultShort
	faultShift
	faultRepeat
)

type slid struct {
	scope string
	id    int64
}

// sweepCtx is what one sweep met: the faults that hit it, and what it did,
// counted by the fakes as it happened.
type sweepCtx struct {
	no           int
	at           time.Time
	listFault    map[string]faultKind
	deleteFault  bool
	podListFault bool
	erListFault  bool
	overlap      bool
	skipFault    bool
	// shortPage: a list page met a fault that drops an item;
	// repeatPage one that lists a runner twice.
	shortPage, repeatPage bool
	rateLimited           bool
	shifted               bool
	slid                  []slid
	mustFail              string
	managed               int
	podDeletes            int
	acted                 map[string]bool
	deferred              []fleet.Pod
	// raced holds the pods whose runners registered after the lists
	// were read, in the re-check race: their verdicts were right then.
	raced []string
	saved bool
	res   sweep.Result
	// refSkew and localSkew are how far the reference clock (the API
	// server's Date) and this machine's clock read from the truth in this
	// sweep (the skew hazard); skewed says either does.
	refSkew, localSkew time.Duration
	skewed             bool
	// writes holds, per object written for real ("Kind ns/name", and
	// "release Kind ns/name" for a finalizer's release), whether a write
	// changed it.
	writes map[string]bool
	// org is what the sweep's GitHub requests met (busyorg.go).
	org orgSweep
	// jobKills are the jobs the sweep's writes killed (jobs.go).
	jobKills []jobKill
	// hits holds, per act key, what the sweep's first write of that act
	// met on the runner (jobs.go).
	hits map[string]actHit
	// logReads counts the sweep's runner log reads, logReadOrder names
	// the pod of each, and logs holds each pod's first answer
	// (runnerlog.go).
	logReads     int
	logReadOrder []string
	logs         map[string]logRead
	// log holds the sweep's JSON log lines where Config.Loops reads them.
	log bytes.Buffer
}

func (w *world) top() *sweepCtx { return w.stack[len(w.stack)-1] }

func (w *world) violate(inv Invariant, format string, args ...any) {
	no := -1
	if len(w.stack) > 0 {
		no = w.top().no
	}
	w.stats.Violations = append(w.stats.Violations, Violation{Sweep: no, Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	if inv.wrongful() {
		w.stats.Wrongful++
	}
}

// allowed is the exit statuses the sweep's faults permit.
func (sc *sweepCtx) allowed() []sweep.Status {
	switch {
	case sc.mustFail != "":
		return []sweep.Status{sweep.StatusFailed}
	case sc.rateLimited:
		// A rate limit holds the rest of the sweep's GitHub work: the
		// sweep is degraded, never failed.
		return []sweep.Status{sweep.StatusDegraded}
	case sc.skipFault || sc.repeatPage:
		// A failed list, or one that contradicts itself, is skipped.
		return []sweep.Status{sweep.StatusDegraded}
	case sc.shortPage:
		// A page short of an item lists fewer runners than total_count,
		// as a list does that a runner slid back on while it was read:
		// served as moved, or skipped as inconsistent.
		return []sweep.Status{sweep.StatusComplete, sweep.StatusDegraded}
	}
	// Runners joining or leaving while a list is read (a busy org, a
	// shift) are no cause for a skip: the list is served as moved.
	return []sweep.Status{sweep.StatusComplete}
}

// ledger is the sweep's state.Store over an in-memory ledger that can be
// wiped, and that can let another sweep run to its end between this one's
// load and its save.
type ledger struct {
	w       *world
	mem     *memory.Store
	overlap func()
}

func (l *ledger) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	led, v, err := l.mem.Load(ctx)
	if f := l.overlap; f != nil {
		l.overlap = nil
		f()
	}
	return led, v, err
}

func (l *ledger) Save(ctx context.Context, led state.Ledger, v state.Version) (state.Version, error) {
	nv, err := l.mem.Save(ctx, led, v)
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	if err != nil {
		l.w.top().mustFail = "another sweep saved the ledger first"
	} else {
		l.w.top().saved = true
	}
	return nv, err
}

// observedLister passes lists through and counts a list taken as complete
// though a runner slid unseen while it was read. Of a list served as moved
// it notes the runners of ours that it did not show though they were
// registered throughout the read (none of ours joins or leaves during a
// list call): each slid onto a page already read, which a moved list
// allows, so its leak, if it has one, may wait a sweep (a documented
// delay: the list proves no absence, and what it did not show it cannot
// judge by presence).
type observedLister struct {
	inner runnerLister
	w     *world
}

func (o observedLister) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, c, err := o.inner.ListRunners(ctx, scope, cache)
	if errors.Is(err, fleet.ErrMoved) && c != nil {
		o.w.mu.Lock()
		defer o.w.mu.Unlock()
		o.w.noteMoved(scope.Key(), regs)
		return regs, c, err
	}
	if err != nil {
		return regs, c, err
	}
	o.w.mu.Lock()
	defer o.w.mu.Unlock()
	for _, s := range o.w.top().slid {
		if s.scope != scope.Key() {
			continue
		}
		found := false
		for _, r := range regs {
			found = found || r.ID == s.id
		}
		if !found {
			o.w.stats.Undetected++
		}
	}
	return regs, c, err
}

// noteMoved records a list of scope served as moved, with its
// registrations: the runners of ours it did not show.
func (w *world) noteMoved(scope string, regs []fleet.Registration) {
	sc := w.top()
	shown := make(map[int64]bool, len(regs))
	for _, r := range regs {
		shown[r.ID] = true
	}
	if scope == busyScope {
		sc.org.servedMoved = true
	}
	for _, r := range w.sim.Runners(scope) {
		if shown[r.ID] || !strings.HasPrefix(r.Name, ourPrefix) {
			continue
		}
		key := fleet.RegistrationMarkKey(scope, r.ID)
		if p := w.owner[r.ID]; p != nil && !p.gone {
			key = fleet.PodMarkKey(p.uid)
		} else if e := w.erOfRunner(scope, r.ID); e != nil {
			sc.org.unseenARC = append(sc.org.unseenARC, e.uid)
		}
		sc.org.unseen = append(sc.org.unseen, key)
		if scope == busyScope {
			sc.org.unseenBusy++
		}
	}
}

// swallowed is the broken lister that reads a failed list as empty.
type swallowed struct{ inner runnerLister }

func (s swallowed) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, c, err := s.inner.ListRunners(ctx, scope, cache)
	if err != nil {
		return nil, nil, nil //nolint:nilerr // the bug this broken lister plants: a failed list read as empty
	}
	return regs, c, nil
}

// dropping is the broken lister that loses every seventh registration.
type dropping struct{ inner runnerLister }

func (d dropping) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, c, err := d.inner.ListRunners(ctx, scope, cache)
	kept := regs[:0:0]
	for _, r := range regs {
		if r.ID%7 != 0 {
			kept = append(kept, r)
		}
	}
	return kept, c, err
}

// brokenRegs bends the reaper's GitHub calls for TrustBusyFalse and
// NoRecheck.
type brokenRegs struct {
	inner reap.Registrations
	brk   Break
	w     *world
}

func (b brokenRegs) DeleteRunner(ctx context.Context, scope fleet.Scope, id int64) (fleet.Result, error) {
	res, err := b.inner.DeleteRunner(ctx, scope, id)
	if b.brk == TrustBusyFalse && res == fleet.Busy {
		return fleet.Deleted, err
	}
	if b.brk == ReleaseOn422 && res == fleet.Busy && b.w.erOfRunner(scope.Key(), id) != nil {
		return fleet.AlreadyGone, err
	}
	return res, err
}

func (b brokenRegs) FindRunner(ctx context.Context, scope fleet.Scope, name string) (*fleet.Registration, error) {
	if b.brk == NoRecheck {
		return nil, nil
	}
	return b.inner.FindRunner(ctx, scope, name)
}

var configuredScopes = func() []fleet.Scope {
	var out []fleet.Scope
	for _, s := range shapes {
		if s.configured {
			kind, name, _ := strings.Cut(s.key, ":")
			sc := fleet.Scope{Kind: fleet.ScopeKind(kind), Name: name}
			if owner, repo, ok := strings.Cut(name, "/"); ok {
				sc.Owner, sc.Name = owner, repo
			}
			out = append(out, sc)
		}
	}
	return out
}()

// ghostAllLabel is the ownership label of the GhostAll break: one GitHub
// gives every self-hosted runner, so that every registration looks owned.
const ghostAllLabel = "self-hosted"

// runSweep runs one real sweep against the world.
func (w *world) runSweep(sc *sweepCtx, store *ledger) error {
	// Each sweep is a new process, with a new client: go-github's memory
	// of a rate limit lasts one sweep, as in a CronJob.
	// The client keeps the one runner label ownership reads, as
	// internal/app wires it: the label GhostAll's broken policy trusts.
	ownerLabel := ""
	if w.cfg.Break == GhostAll {
		ownerLabel = ghostAllLabel
	}
	gh, err := ghclient.New(ghclient.Config{BaseURL: simBase, Token: simToken, OwnerLabel: ownerLabel, Transport: &transport{w: w, handler: w.sim.Handler()}})
	if err != nil {
		return fmt.Errorf("github client: %w", err)
	}
	w.mu.Lock()
	w.stack = append(w.stack, sc)
	w.mu.Unlock()
	var lister runnerLister = observedLister{inner: gh, w: w}
	var regs reap.Registrations = gh
	// The job guard, as internal/app wires it: the client asks GitHub.
	var jobs reap.Jobs = gh
	limits := reconcile.Limits{MaxActions: maxActions, MaxFraction: maxFraction}
	// Never-started is on in every world, as in the product: the world's
	// late starts are the healthy pods it must leave alone.
	pol := reconcile.Policy{RegistrationDeadline: regDeadline, StartDeadline: startDeadline, DeleteUnschedulable: w.cfg.UnschedulableOptIn,
		StampEnabled: true, GhostNamePrefix: ourPrefix}
	// The loop detector as internal/app wires it (REAPER_LOOP_THRESHOLD,
	// REAPER_LOOP_WINDOW): the product's defaults. Its window is on the
	// sweep's clock, which here is the world's: a sweep a simulated
	// minute, so thirty sweeps.
	loopPol := loops.Policy{Threshold: loopN, Window: loopWindow}
	hold := reconcile.Hold{ConfirmAfter: confirmAfter, StampMaxAge: stampMaxAge, MassSuspicionFraction: 0.5, MassSuspicionMin: 5}
	switch w.cfg.Break {
	case NoBounds:
		limits = reconcile.Limits{MaxActions: 1 << 20, MaxFraction: 1}
	case TrustBusyFalse:
		lister, regs = hiddenBusy{inner: lister}, brokenRegs{inner: gh, brk: TrustBusyFalse}
	case ConfirmZero:
		hold.ConfirmAfter, hold.StampMaxAge = 0, 0
	case GhostAll:
		pol.GhostNamePrefix, pol.GhostLabel = "", ghostAllLabel
	case SwallowListErrors:
		lister = swallowed{inner: lister}
	case NoRecheck:
		lister, regs = dropping{inner: lister}, brokenRegs{inner: gh, brk: NoRecheck}
	case ReleaseOn422:
		regs = brokenRegs{inner: gh, brk: ReleaseOn422, w: w}
	case ByteStrictRevalidation:
		lister = byteStrict{inner: lister, w: w}
	case NoJobGuard:
		jobs = finishedJobs{}
	case SkipMoved:
		lister = skipMoved{inner: lister}
	case NoLoopDetection:
		loopPol = loops.Policy{}
	case ShortStartDeadline:
		pol.StartDeadline = time.Second
	}
	if w.arcOn() {
		pol.ARC, pol.ARCStuckDeletingAfter = true, arcStuckAfter
		hold.ARCFailedAfter, hold.ARCPodlessAfter = arcFailedAfter, arcPodlessAfter
	}
	scopes := map[string]fleet.Scope{}
	for _, s := range configuredScopes {
		scopes[s.Key()] = s
	}
	k := kube{w: w}
	var logs reap.RunnerLogs = k
	switch w.cfg.Break {
	case NoLogGuard:
		logs = nil
	case DeafLogReader:
		logs = deafLogs{k}
	}
	var pods sweep.PodLister = k
	switch w.cfg.Break {
	case ReadEveryLog:
		pods = everyLog{k}
	case HideNeverStarted:
		pods = startedOnly{k}
	}
	logTo := io.Discard
	if w.cfg.Loops != nil {
		logTo = &sc.log
	}
	sw := &sweep.Sweeper{
		Pods:             pods,
		EphemeralRunners: k,
		Runners:          lister,
		Ledger:           store,
		Reaper: func(mode sweep.Mode) *reap.Reaper {
			return reap.New(regs, k, reap.Options{DryRun: mode != sweep.Act, Limits: limits, Concurrency: 1, Scopes: scopes, Jobs: jobs, RunnerLogs: logs})
		},
		Scopes: configuredScopes,
		Policy: pol,
		Hold:   hold,
		Loops:  loopPol,
		Log:    slog.New(slog.NewJSONHandler(logTo, nil)),
		Now:    func() time.Time { return sc.at.Add(sc.refSkew) },
		Local:  func() time.Time { return sc.at.Add(sc.localSkew) },
		GitHub: gh,
	}
	if w.cfg.Break == OneClock {
		sw.Local = nil
	}
	res := sw.Run(context.Background(), sweep.Act)

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range sc.deferred {
		w.deletePod(p)
	}
	sc.res = res
	w.stack = w.stack[:len(w.stack)-1]
	return nil
}

// arm draws the faults of one sweep and arms them in the simulator.
func (w *world) arm(sc *sweepCtx) {
	if w.chance(PodListFault, 0.005) {
		sc.podListFault = true
	}
	if w.chance(ARC, 0.005) {
		sc.erListFault = true
	}
	for _, s := range configuredScopes {
		key := s.Key()
		switch x := w.rng.Float64(); {
		case x < 0.02 && w.cfg.Hazards.Has(ListError):
			w.sim.Fault(key, ghsim.EndpointList, ghsim.Fault{Status: 500, Page: 1, Times: 1})
			sc.listFault[key] = faultError
		case x < 0.03 && w.cfg.Hazards.Has(RateLimit):
			f := ghsim.Fault{PrimaryLimit: true, Page: 1, Times: 1}
			if w.rng.IntN(2) == 0 {
				f = ghsim.Fault{Secondary: 429, Page: 1, Times: 1}
			}
			w.sim.Fault(key, ghsim.EndpointList, f)
			sc.listFault[key] = faultRate
		case x < 0.05 && w.cfg.Hazards.Has(ShortPage) && len(w.sim.Runners(key)) > 0:
			w.sim.Fault(key, ghsim.EndpointList, ghsim.Fault{DropItems: 1, Page: 1, Times: 1})
			sc.listFault[key] = faultShort
		case x < 0.10 && w.cfg.Hazards.Has(Shift) && len(w.sim.Runners(key)) > 100:
			sc.listFault[key] = faultShift
		case x >= 0.10 && x < 0.11 && w.cfg.Hazards.Has(RepeatPage) && len(w.sim.Runners(key)) > 0:
			w.sim.Fault(key, ghsim.EndpointList, ghsim.Fault{RepeatItems: 1, Page: 1, Times: 1})
			sc.listFault[key] = faultRepeat
		}
	}
	if w.chance(DeleteFault, 0.03) {
		w.sim.Fault(ghsim.Any, ghsim.EndpointDelete, ghsim.Fault{Status: 502, Times: 1})
		sc.deleteFault = true
	}
}

// checker holds what the invariants need across sweeps: when the checker
// itself first saw each verdict, independent of the ledger.
type checker struct {
	first map[string]firstSeen
}

type firstSeen struct {
	at    time.Time
	scope string
}

func fullHold(v fleet.Verdict) time.Duration {
	switch v {
	case fleet.Terminal:
		return 0
	case fleet.OrphanStamped:
		return max(confirmAfter, stampMaxAge)
	case fleet.ARCFailed:
		return max(confirmAfter, arcFailedAfter)
	case fleet.ARCPodless:
		return max(confirmAfter, arcPodlessAfter)
	}
	return confirmAfter
}

// after checks one finished sweep.
func (w *world) after(c *checker, sc *sweepCtx) { //nolint:gocyclo // every invariant checked after a sweep, in the order its bookkeeping needs
	w.busyAfter(sc)
	res := sc.res
	w.afterJobs(sc, res)
	cands := map[string]bool{}
	for _, o := range res.Outcomes {
		// A candidate's mark may be its EphemeralRunner's (a stuck
		// deletion whose pod still runs); its log is its pod's.
		cands[o.Candidate.Key] = true
		if p := o.Candidate.Pod; p != nil {
			cands[fleet.PodMarkKey(p.UID)] = true
		}
	}
	w.afterLogs(sc, cands)
	w.afterStarts(sc, res)
	// The bounds, counted from the writes that happened.
	podCap := int(math.Ceil(maxFraction * float64(sc.managed)))
	if sc.podDeletes > podCap {
		w.violateAt(sc, Bounds, "%d pods deleted, more than %d (%.0f%% of %d)", sc.podDeletes, podCap, maxFraction*100, sc.managed)
	}
	if len(sc.acted) > maxActions {
		w.violateAt(sc, Bounds, "%d objects acted on, more than %d", len(sc.acted), maxActions)
	}
	// No scope skipped for runners moving or flipping.
	w.checkSkips(sc)
	// The exit status.
	ok := false
	for _, s := range sc.allowed() {
		ok = ok || s == res.Status
	}
	if !ok {
		w.violateAt(sc, ExitStatus, "exit %d, want one of %v (must fail: %q, rate-limited %v, list fault %v, shifted %v); err: %v",
			res.Status, sc.allowed(), sc.mustFail, sc.rateLimited, sc.skipFault, sc.shifted, res.Err)
	}
	if sc.rateLimited && res.Status == sweep.StatusFailed && sc.mustFail == "" {
		w.stats.RateLimitFailed++
	}
	// Confirmation, against the checker's own first sightings.
	for _, o := range res.Outcomes {
		v := o.Candidate.Verdict
		wrote := o.Registration == fleet.Deleted || o.ObjectResult == fleet.Deleted && o.Result == fleet.Deleted
		if !wrote || v == fleet.Terminal {
			continue
		}
		f, seen := c.first[o.Candidate.Key+"|"+string(v)]
		if !seen || sc.at.Sub(f.at) < fullHold(v) {
			held := time.Duration(0)
			if seen {
				held = sc.at.Sub(f.at)
			}
			w.violateAt(sc, Unconfirmed, "%s %s acted after %s, want %s", v, o.Candidate.Key, held, fullHold(v))
		}
	}
	if sc.saved {
		now := map[string]bool{}
		for _, cand := range res.Confirmation.Candidates {
			if cand.Verdict == fleet.Terminal {
				continue
			}
			k := cand.Key + "|" + string(cand.Verdict)
			now[k] = true
			if _, ok := c.first[k]; !ok {
				c.first[k] = firstSeen{at: sc.at, scope: cand.ScopeKey}
			}
		}
		for k, f := range c.first {
			if !now[k] && !res.Class.SkippedScope(f.scope) {
				delete(c.first, k)
			}
		}
	}
	// Wrong marks: a verdict of absence on a runner that is registered.
	clear := w.snapshot()
	for _, cand := range res.Confirmation.Candidates {
		if cand.Pod == nil || (cand.Verdict != fleet.Unregistered && cand.Verdict != fleet.Zombie) {
			continue
		}
		if p := w.byKey[cand.Pod.Namespace+"/"+cand.Pod.Name]; p != nil && p.uid == cand.Pod.UID && !slices.Contains(sc.raced, p.uid) {
			if r := w.reg(p); r != nil && r.Status == "online" && !w.lying(p, r) {
				w.stats.WrongMarks++
			}
		}
	}
	clear()
	// Time to clean, and the documented causes of delay.
	// A lying clock restarts the marks it dated from the future: a
	// documented delay (the warning "marks from the future").
	excuseAll := sc.overlap || sc.podListFault || sc.erListFault || sc.rateLimited || sc.mustFail != "" || sc.skewed
	w.afterARC(sc, res, excuseAll)
	for _, o := range res.Outcomes {
		l := w.leaks[o.Candidate.Key]
		if l == nil {
			continue
		}
		switch o.Result {
		case fleet.Deferred, fleet.NotReached, fleet.Failed, fleet.SkippedChanged:
			w.excuse(l, sc.at)
		}
		if l.cleaned {
			w.stats.Cleaned++
			if l.delayed {
				w.stats.Delayed++
			}
			w.stats.TimeToClean[string(o.Candidate.Verdict)] = append(w.stats.TimeToClean[string(o.Candidate.Verdict)],
				int(math.Ceil(float64(l.cleanAt.Sub(l.since))/float64(interval))))
			delete(w.leaks, l.key)
		}
	}
	if excuseAll {
		w.excusedAt[""] = sc.at
	}
	for _, sk := range res.Class.Skipped {
		if sc.excusedSkip(sk) {
			w.excusedAt[sk.ScopeKey] = sc.at
		}
	}
	for _, l := range w.sortedLeaks() {
		if l.cleaned {
			// Cleaned by a sweep whose outcomes did not name it (a
			// deferred delete): counted under the leak's own kind.
			w.stats.Cleaned++
			if l.delayed {
				w.stats.Delayed++
			}
			w.stats.TimeToClean[l.kind] = append(w.stats.TimeToClean[l.kind], int(math.Ceil(float64(l.cleanAt.Sub(l.since))/float64(interval))))
			delete(w.leaks, l.key)
			continue
		}
		if excuseAll || sc.skipExcuses(l.scope) {
			w.excuse(l, sc.at)
		}
	}
	// A runner of ours a moved list did not show (one that slid onto a
	// page already read, in a busy org or a shift): its leak waits. Not
	// twice in a row: a runner slides back unseen only when a removal
	// ahead of it lands between two page reads, which is rare; a list
	// that loses it sweep after sweep is no movement.
	prev := w.unseenPrev
	w.unseenPrev = map[string]bool{}
	for _, key := range sc.org.unseen {
		w.unseenPrev[key] = true
		if l := w.leaks[key]; l != nil && !l.cleaned && !prev[key] {
			w.excuse(l, sc.at)
		}
	}
	for _, uid := range sc.org.unseenARC {
		key := fleet.EphemeralRunnerMarkKey(uid)
		w.unseenPrev[key] = true
		if l := w.arc.leaks[uid]; l != nil && !prev[key] {
			excuseARC(l, sc.at)
		}
	}
}

func (w *world) violateAt(sc *sweepCtx, inv Invariant, format string, args ...any) {
	w.stats.Violations = append(w.stats.Violations, Violation{Sweep: sc.no, Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	if inv.wrongful() {
		w.stats.Wrongful++
	}
}

// excuse moves a leak's deadline for a documented cause of delay: the
// leak then has a whole confirmation and two sweeps again.
func (w *world) excuse(l *leak, at time.Time) {
	d := at.Add(fullHold(fleet.Verdict(l.kind)) + 2*interval)
	if d.After(l.deadline) {
		l.deadline, l.delayed = d, true
	}
}

func (w *world) sortedLeaks() []*leak {
	out := make([]*leak, 0, len(w.leaks))
	for _, l := range w.leaks {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// track brings the leak tables up to date, on one snapshot of the
// simulator (neither changes it).
func (w *world) track() {
	defer w.snapshot()()
	w.trackLeaks()
	w.trackARC()
}

// liveness reports every open leak past its deadline, once.
func (w *world) liveness(sc *sweepCtx) {
	for _, l := range w.sortedLeaks() {
		if !l.cleaned && sc.at.After(l.deadline) {
			inv := Liveness
			if l.kind == string(fleet.NeverStarted) {
				inv = NeverStartedCleaned
			}
			w.violateAt(sc, inv, "%s %s open since %s, deadline %s passed", l.kind, l.key, l.since.Format(time.TimeOnly), l.deadline.Format(time.TimeOnly))
			l.deadline = l.deadline.Add(1000 * time.Hour)
		}
	}
}

// Run runs the simulation and returns what it found; an error means the
// simulation itself could not run.
func Run(cfg Config) (*Stats, error) {
	start := time.Now()
	st := &Stats{Seed: cfg.Seed, TimeToClean: map[string][]int{}}
	w := newWorld(cfg, st)
	store := &ledger{w: w, mem: memory.New()}
	c := &checker{first: map[string]firstSeen{}}
	w.track()
	var failed error
	for i := 0; i < cfg.Sweeps && failed == nil; i++ {
		st.Sweeps++
		w.step()
		w.track()
		sc := &sweepCtx{no: i, at: w.now, listFault: map[string]faultKind{}, acted: map[string]bool{}}
		// One clock lies at a time: the reference (a proxy's or one API
		// server replica's Date) or this machine's. Two that lie alike
		// in the same sweep are the risk docs/design.md states.
		if w.chance(Skew, 0.05) {
			if w.rng.IntN(2) == 0 {
				sc.refSkew = w.skew()
			} else {
				sc.localSkew = w.skew()
			}
			sc.skewed = true
		}
		if w.chance(Wipe, 0.003) {
			store.mem = memory.New()
			// Every mark restarts: a documented delay, for the leaks
			// open now and for those whose marks were already running.
			sc.overlap = true
		}
		if w.chance(Overlap, 0.01) {
			sc.overlap = true
			store.overlap = func() {
				other := &sweepCtx{no: i, at: w.now, listFault: map[string]faultKind{}, acted: map[string]bool{}, overlap: true}
				if err := w.runSweep(other, store); err != nil {
					failed = err
					return
				}
				w.after(c, other)
			}
		} else {
			w.arm(sc)
		}
		if err := w.runSweep(sc, store); err != nil {
			return st, err
		}
		w.sim.ClearFaults()
		w.after(c, sc)
		w.track()
		w.liveness(sc)
		w.livenessARC(sc)
		if cfg.StopAtFirst && len(st.Violations) > 0 {
			break
		}
		if cfg.StopOn != "" && slices.ContainsFunc(st.Violations, func(v Violation) bool { return v.Invariant == cfg.StopOn }) {
			break
		}
	}
	w.startStats()
	st.Duration = time.Since(start)
	return st, failed
}

// Repro is a failing run made as small as shrinking could: the fewest
// sweeps and hazards that still break an invariant. It is the row to add to
// the regression table.
type Repro struct {
	Seed      uint64
	Sweeps    int
	Hazards   string
	Invariant Invariant
}

func (r Repro) String() string {
	return fmt.Sprintf("{Seed: %d, Sweeps: %d, Hazards: %q} // %s", r.Seed, r.Sweeps, r.Hazards, r.Invariant)
}

// Shrink reduces a failing run: it stops at the first violation, which
// fixes the sweep count, then turns off each hazard whose absence still
// fails.
func Shrink(cfg Config) (Repro, error) {
	cfg.StopAtFirst = true
	st, err := Run(cfg)
	if err != nil {
		return Repro{}, err
	}
	if len(st.Violations) == 0 {
		return Repro{}, fmt.Errorf("seed %d does not fail", cfg.Seed)
	}
	cfg.Sweeps = st.Violations[0].Sweep + 1
	inv := st.Violations[0].Invariant
	for i := range hazardNames {
		h := Hazard(1) << i
		if !cfg.Hazards.Has(h) {
			continue
		}
		try := cfg
		try.Hazards &^= h
		st, err := Run(try)
		if err != nil {
			return Repro{}, err
		}
		if len(st.Violations) > 0 && st.Violations[0].Invariant == inv {
			cfg.Hazards, cfg.Sweeps = try.Hazards, st.Violations[0].Sweep+1
		}
	}
	return Repro{Seed: cfg.Seed, Sweeps: cfg.Sweeps, Hazards: cfg.Hazards.String(), Invariant: inv}, nil
}
