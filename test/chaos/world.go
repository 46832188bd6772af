// Package chaos is a deterministic, in-process simulation of many sweeps, in
// the style of simulation testing: the real sweep (classify, confirm, bound
// and reap) runs against the real GitHub client and the real GitHub
// simulator, served without sockets, and against in-memory Kubernetes fakes
// with real preconditions, on a virtual clock and in a world driven by one
// seeded random source. After every sweep the invariants docs/design.md promises
// are checked against the world's ground truth, not against what the sweep
// believed.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// The world's fixed shape. Everything the reaper may touch carries the
// prefix "mine-"; everything else must never be touched.
const (
	nsRunners = "runners"
	nsOther   = "team-b"
	ourPrefix = "mine-"

	interval     = time.Minute
	confirmAfter = 3 * time.Minute
	stampMaxAge  = 10 * time.Minute
	regDeadline  = 10 * time.Minute
	maxActions   = 10
	maxFraction  = 0.1
)

// scopeShape is one GitHub scope of the world and how many runners live in it.
type scopeShape struct {
	key        string
	configured bool
	ours       int // runner pods of ours kept alive
	theirs     int // other teams' registrations kept in the scope
}

// The first scope holds more than one page (per_page is 100), so that pages
// can shift under a sweep.
var shapes = []scopeShape{
	{key: "org:alpha", configured: true, ours: 95, theirs: 25},
	{key: "org:beta", configured: true, ours: 25, theirs: 8},
	{key: "repo:acme/web", configured: true, ours: 8},
	{key: "org:gamma", configured: false, ours: 5},
}

// kpod is a pod as it really is. The reaper sees it only through the fake
// lister, as a fleet.Pod.
type kpod struct {
	ns, name, uid string
	rv            int
	selected      bool // matches the reaper's label selector
	scope         string
	created       time.Time
	startAt       time.Time // when its runner container starts
	started       time.Time
	phase         string
	running       bool
	found         bool
	term, last    *fleet.Termination
	termAt        time.Time
	stamped       bool
	stampAt       time.Time
	claimAt       time.Time // when the stamp's claim lands; zero: never
	regID         int64
	registerAt    time.Time // zero: its runner never registers
	removedAt     time.Time // when its registration vanished
	// regReaped: the reaper deleted its registration (judged then), so
	// its pod is a leak from that moment.
	regReaped bool
	offlineAt time.Time
	jobUntil  time.Time
	lagUntil  time.Time
	gone      bool
	goneAt    time.Time
	// er is the EphemeralRunner that owns the pod, for ARC's pods.
	er *ker
	// annotated: the pod belongs to the pool whose dispatcher writes the
	// job it gives the runner on the pod (REAPER_JOB_FROM); job is that
	// annotation once written. simJob is the simulator's job running on
	// the pod's runner, 0 when none.
	annotated bool
	job       *fleet.Job
	simJob    int64
	// log is the runner container's log (runnerlog.go); logJob the
	// display name of the job it last said it runs, empty when none.
	log    *runnerLog
	logJob string
	// neverStart: the runner never starts, waiting as startWait says;
	// group is the broken template that made the pod, and outdated says
	// its runner exits 7 (startfaults.go).
	neverStart bool
	startWait  *fleet.StartWait
	group      *brokenGroup
	outdated   bool
}

func (p *kpod) key() string { return p.ns + "/" + p.name }

// terminal is the kubelet's word: the pod or its runner has ended.
func (p *kpod) terminal() bool {
	return p.phase == "Succeeded" || p.phase == "Failed" || p.term != nil || (p.phase == "Running" && !p.running && p.last != nil)
}

// managed reports whether the reaper is meant to see the pod at all.
func (p *kpod) managed() bool { return p.ns == nsRunners && p.selected }

func (p *kpod) view() fleet.Pod {
	v := fleet.Pod{
		Namespace: p.ns, Name: p.name, UID: p.uid, ResourceVersion: strconv.Itoa(p.rv),
		RunnerName: p.name, ScopeKey: p.scope, Phase: p.phase, CreatedAt: fleet.StampOf(p.created), StartedAt: fleet.StampOf(p.started),
		HasRunner: true, Stamped: p.stamped,
		Runner: fleet.Container{Found: p.found, Running: p.running, Terminated: p.term, LastTerminated: p.last},
	}
	if p.er != nil {
		v.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: p.er.name, UID: p.er.uid}
	}
	if g := p.group; g != nil {
		v.Owner = &fleet.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: g.name, UID: g.uid}
		// What the kube adapter reads a controller's pod's group from.
		v.Group = fleet.GroupOf("ReplicaSet", p.ns, g.name)
	}
	switch {
	case p.startWait != nil:
		sw := *p.startWait
		v.StartWait = &sw
		// Scheduled, its status.startTime set; or, unschedulable,
		// neither scheduled nor with any container status.
		v.StartedAt = fleet.StampOf(p.created)
		v.Runner.Found = !sw.Unschedulable()
	case p.phase == "Pending" && !p.running:
		// On its way (a late start: a node scaling up, a large image):
		// scheduled at once here, its runner container creating, which
		// the kube adapter names where nothing more telling does.
		v.StartWait = &fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}
		v.StartedAt = fleet.StampOf(p.created)
	}
	if p.job != nil {
		// What kube.Mapping.job reads from the pool's annotation.
		j := *p.job
		v.Job = &j
	}
	return v
}

// leak is a leak the world knows of, and the latest time by which the
// reaper must have cleaned it.
type leak struct {
	key      string
	kind     string
	scope    string
	since    time.Time
	deadline time.Time
	cleaned  bool
	cleanAt  time.Time
	// delayed: a documented cause moved the deadline.
	delayed bool
}

// world is the ground truth: the simulator's registrations and the pods.
type world struct {
	mu  sync.Mutex
	cfg Config
	rng *rand.Rand
	// jobs is the job side's own random source (jobs.go): which pods
	// carry job evidence, and GitHub's lies. Apart from rng, so that its
	// draws do not move the world's other events.
	jobs *jobWorld
	// logs is the runner logs' own random sources (runnerlog.go).
	logs *logWorld
	// starts is the never-started pods' and broken templates' state,
	// nil unless hazard StartFaults (startfaults.go).
	starts *startWorld
	now    time.Time
	sim    *ghsim.Sim
	pods   []*kpod // alive pods, in creation order
	// byKey holds the alive pod of each namespace/name.
	byKey map[string]*kpod
	// owner maps a registration id to the pod whose runner holds it.
	owner map[int64]*kpod
	seq   int
	leaks map[string]*leak
	stats *Stats
	// stack holds the sweeps running now: an overlapping sweep runs
	// inside another's ledger load.
	stack []*sweepCtx
	// raceArmed is a runner name that registers and takes a job at the
	// next GitHub request (the re-check race).
	raceArmed string
	// excusedAt is, per scope ("" for all), the last sweep that a
	// documented cause delayed: a mark begun before it may have restarted
	// or stalled, so a leak opening later still gets a whole hold from it.
	excusedAt map[string]time.Time
	// snap, while set, is the simulator's registrations by scope and id,
	// and snapList the same by scope in the simulator's order, for loops
	// that read many and change none.
	snap     map[string]map[int64]ghsim.Runner
	snapList map[string][]ghsim.Runner
	// arc is ARC's objects and what the checks know of them.
	arc *arcRun
	// org is the busy org's runners and clock (hazard BusyOrg), made at
	// the first GitHub request.
	org *busyOrg
	// unseenPrev holds the leak keys of the runners of ours that the
	// last sweep's moved lists did not show (see after).
	unseenPrev map[string]bool
}

// snapshot sets snap and returns the function that clears it; while one
// is set, it is kept, and the function returned does nothing.
func (w *world) snapshot() func() {
	if w.snap != nil {
		return func() {}
	}
	w.snap = map[string]map[int64]ghsim.Runner{}
	w.snapList = map[string][]ghsim.Runner{}
	for _, s := range shapes {
		rs := w.sim.Runners(s.key)
		m := make(map[int64]ghsim.Runner, len(rs))
		for _, r := range rs {
			m[r.ID] = r
		}
		w.snap[s.key], w.snapList[s.key] = m, rs
	}
	return func() { w.snap, w.snapList = nil, nil }
}

func (w *world) lastExcuse(scope string) time.Time {
	return maxTime(w.excusedAt[scope], w.excusedAt[""])
}

func newWorld(cfg Config, stats *Stats) *world {
	w := &world{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		jobs:      newJobWorld(cfg.Seed),
		logs:      newLogWorld(cfg.Seed),
		now:       time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		byKey:     map[string]*kpod{},
		owner:     map[int64]*kpod{},
		leaks:     map[string]*leak{},
		stats:     stats,
		excusedAt: map[string]time.Time{},
	}
	w.sim = ghsim.New(ghsim.Options{Token: simToken, Now: func() time.Time { return w.now }})
	for _, s := range shapes {
		w.sim.AddScope(s.key)
	}
	// Pods of another namespace and pods the selector does not match,
	// some of them finished: none may ever be touched.
	for i := 0; i < 4; i++ {
		p := w.newPod(nsOther, fmt.Sprintf("teamb-%d", i), "org:alpha", true)
		w.start(p, w.now)
		if i%2 == 0 {
			w.finish(p, fleet.Termination{ExitCode: 1, Reason: "Error"})
		}
	}
	for i := 0; i < 3; i++ {
		p := w.newPod(nsRunners, fmt.Sprintf("build-%d", i), "org:alpha", false)
		w.start(p, w.now)
		if i == 0 {
			w.finish(p, fleet.Termination{ExitCode: 0, Reason: "Completed"})
		}
	}
	for _, s := range shapes {
		for i := 0; i < s.ours; i++ {
			p := w.spawn(s.key)
			// The initial fleet is up and registered already.
			p.startAt, p.registerAt = w.now, w.now
		}
		for i := 0; i < s.theirs; i++ {
			w.addTheirs(s.key)
		}
	}
	w.newARC()
	w.newStartFaults()
	w.advanceTo(w.now)
	return w
}

func (w *world) chance(hz Hazard, p float64) bool {
	return w.cfg.Hazards.Has(hz) && w.rng.Float64() < p
}

// skew is how far a lying clock reads from the truth: a minute to two
// hours, ahead or behind.
func (w *world) skew() time.Duration {
	d := time.Minute + w.within(2*time.Hour)
	if w.rng.IntN(2) == 0 {
		return -d
	}
	return d
}

func (w *world) within(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(w.rng.Int64N(int64(d)))
}

func (w *world) newPod(ns, name, scope string, selected bool) *kpod {
	w.seq++
	p := &kpod{ns: ns, name: name, uid: fmt.Sprintf("uid-%06d", w.seq), rv: 1, selected: selected, scope: scope,
		created: w.now, phase: "Pending", found: true}
	w.newLog(p)
	w.pods = append(w.pods, p)
	w.byKey[p.key()] = p
	return p
}

// spawn adds a runner pod of ours in scope, with its start and its
// registration in the future.
func (w *world) spawn(scope string) *kpod {
	w.seq++
	p := w.newPod(nsRunners, fmt.Sprintf("%s%s-%d", ourPrefix, strings.NewReplacer(":", "-", "/", "-").Replace(scope), w.seq), scope, true)
	p.annotated = w.jobs.annotates()
	p.startAt = w.now.Add(w.within(20 * time.Second))
	if w.chance(LateStart, 0.2) {
		p.startAt = w.now.Add(w.within(4 * time.Minute))
	}
	p.registerAt = p.startAt.Add(2*time.Second + w.within(30*time.Second))
	switch {
	case w.chance(NeverRegister, 0.03):
		p.registerAt = time.Time{}
	case w.chance(LateRegister, 0.1):
		p.registerAt = p.startAt.Add(w.within(regDeadline * 3 / 2))
	}
	w.neverStarts(p)
	return p
}

func (w *world) addTheirs(scope string) {
	w.seq++
	st := "online"
	if w.rng.IntN(3) == 0 {
		st = "offline"
	}
	w.sim.AddRunner(scope, ghsim.Runner{Name: fmt.Sprintf("theirs-%d", w.seq), Status: st, Busy: st == "online" && w.rng.IntN(2) == 0,
		Labels: []ghsim.Label{{Name: "self-hosted"}, {Name: "team-b"}}})
}

func (w *world) start(p *kpod, at time.Time) {
	p.phase, p.running, p.started = "Running", true, at
	p.rv++
	if p.er != nil {
		// ARC's runner has its registration from its JIT config: it
		// listens as soon as it runs.
		w.logConnected(p)
	}
}

// finish ends the pod's runner with the given fingerprint.
func (w *world) finish(p *kpod, t fleet.Termination) {
	t.FinishedAt = w.now
	p.running, p.termAt = false, w.now
	p.rv++
	w.endJob(p, t)
	if p.regID != 0 {
		w.runnerDied(p)
	}
	switch w.rng.IntN(4) {
	case 0:
		p.phase, p.term = "Succeeded", &t
		if t.ExitCode != 0 {
			p.phase = "Failed"
		}
	case 1:
		p.term = &t // the container ended, the pod still Running
	case 2:
		p.last = &t // CrashLoopBackOff: waiting after a termination
	default:
		// The node or VM was killed: no termination recorded at all.
		p.phase, p.found = "Failed", false
	}
}

// runnerDied is what GitHub does when a runner's process ends: an ephemeral
// registration is removed, or the runner goes offline.
func (w *world) runnerDied(p *kpod) {
	if p.regID == 0 {
		return
	}
	if w.rng.IntN(10) < 6 {
		w.sim.RemoveRunner(p.scope, p.regID)
		delete(w.owner, p.regID)
		p.regID, p.removedAt = 0, w.now
		return
	}
	w.sim.SetRunner(p.scope, p.regID, func(r *ghsim.Runner) { r.Status, r.Busy, r.ListedIdle = "offline", false, false })
	p.offlineAt = w.now
	p.jobUntil = time.Time{}
}

// exits are the fingerprints jobs end with: every class of
// reconcile.Fingerprint.
var exits = []fleet.Termination{
	{ExitCode: 0, Reason: "Completed"},
	{ExitCode: 137, Reason: "OOMKilled"},
	{ExitCode: 137, Reason: "Error"},
	{ExitCode: 143, Reason: "Error"},
	{ExitCode: 0, Signal: 15, Reason: "Error"},
	{ExitCode: 7, Reason: "Error"},
	{ExitCode: 1, Reason: "Error"},
}

func (w *world) reg(p *kpod) *ghsim.Runner {
	if p.regID == 0 {
		return nil
	}
	if w.snap != nil {
		if r, ok := w.snap[p.scope][p.regID]; ok {
			return &r
		}
		return nil
	}
	for _, r := range w.sim.Runners(p.scope) {
		if r.ID == p.regID {
			return &r
		}
	}
	return nil
}

func (w *world) register(p *kpod) {
	r := w.sim.AddRunner(p.scope, ghsim.Runner{Name: p.name, Ephemeral: true,
		Labels: []ghsim.Label{{Name: "self-hosted"}, {Name: "linux"}}})
	p.regID = r.ID
	w.owner[r.ID] = p
	w.logConnected(p)
	if w.chance(OrphanStamp, 0.2) {
		p.stamped, p.stampAt = true, w.now
		p.rv++
		if w.rng.IntN(2) == 0 {
			p.claimAt = w.now.Add(w.within(stampMaxAge / 2))
		}
	}
}

// landJob starts a job on the pod's runner, a job of a workflow run the
// simulator keeps (jobs.go), so that the jobs endpoints tell the truth
// about it. GitHub's list keeps saying busy:false for a while (the lag),
// though a delete meets the job; under hazard BusyLies GitHub may lie
// worse (the job's Lie).
func (w *world) landJob(p *kpod) {
	lag := time.Duration(0)
	if w.cfg.Hazards.Has(JobLag) {
		lag = w.within(90 * time.Second)
	}
	p.lagUntil = w.now.Add(lag)
	p.jobUntil = w.now.Add(time.Minute + w.within(8*time.Minute))
	w.startJob(p, lag > 0)
}

// kill removes a pod the way someone else does (a node lost, a controller);
// its runner dies with it.
func (w *world) kill(p *kpod) {
	w.endJob(p, fleet.Termination{ExitCode: 143, Reason: "Error"})
	if p.regID != 0 {
		w.sim.SetRunner(p.scope, p.regID, func(r *ghsim.Runner) { r.Status, r.Busy, r.ListedIdle = "offline", false, false })
	}
	w.remove(p)
}

func (w *world) remove(p *kpod) {
	p.gone, p.goneAt = true, w.now
	delete(w.byKey, p.key())
	for i, q := range w.pods {
		if q == p {
			w.pods = append(w.pods[:i], w.pods[i+1:]...)
			break
		}
	}
}

// replace puts a new pod under the same name, as a controller recreating
// it does; the old runner's registration is removed with it.
func (w *world) replace(p *kpod) *kpod {
	w.endJob(p, fleet.Termination{ExitCode: 143, Reason: "Error"})
	if p.regID != 0 {
		w.sim.RemoveRunner(p.scope, p.regID)
		delete(w.owner, p.regID)
	}
	w.remove(p)
	q := w.newPod(p.ns, p.name, p.scope, p.selected)
	q.annotated = p.annotated
	q.startAt, q.registerAt = w.now.Add(10*time.Second), w.now.Add(30*time.Second)
	return q
}

// step advances the world by one sweep interval, event by event.
func (w *world) step() {
	from := w.now
	to := from.Add(interval)
	// Scope-wide invalidation: every idle registration of ours in a scope
	// at once, as in an outage.
	if w.chance(InvalidateScope, 0.002) {
		s := shapes[w.rng.IntN(3)]
		for _, p := range w.pods {
			if p.scope == s.key && p.managed() && p.regID != 0 && p.jobUntil.IsZero() && !p.terminal() {
				w.invalidate(p)
			}
		}
	}
	// Other teams' registrations come and go.
	if w.cfg.Hazards.Has(OtherTeams) {
		for _, s := range shapes[:2] {
			regs := w.sim.Runners(s.key)
			for _, r := range regs {
				if strings.HasPrefix(r.Name, "theirs-") && w.owner[r.ID] == nil && w.rng.Float64() < 0.03 {
					if w.rng.IntN(2) == 0 {
						w.sim.RemoveRunner(s.key, r.ID)
						w.addTheirs(s.key)
					} else {
						w.sim.SetRunner(s.key, r.ID, func(x *ghsim.Runner) {
							x.Busy = !x.Busy && x.Status == "online"
							if w.rng.IntN(2) == 0 {
								x.Status, x.Busy = "offline", false
							} else {
								x.Status = "online"
							}
						})
					}
				}
			}
		}
	}
	for _, p := range append([]*kpod(nil), w.pods...) {
		w.now = from.Add(w.within(interval))
		w.podEvents(p)
	}
	// Keep each scope's fleet at its size.
	for _, s := range shapes {
		n := 0
		for _, p := range w.pods {
			if p.scope == s.key && p.managed() && !p.terminal() && p.er == nil && p.group == nil {
				n++
			}
		}
		for ; n < s.ours; n++ {
			w.now = from.Add(w.within(interval))
			w.spawn(s.key)
		}
	}
	w.keepGroups()
	w.advanceTo(to)
	w.arcPass()
}

// podEvents draws what happens to one pod during an interval.
func (w *world) podEvents(p *kpod) {
	if !p.managed() {
		return
	}
	switch {
	case p.terminal():
		// Someone else cleans up now and then.
		if w.chance(OthersDelete, 0.05) {
			w.kill(p)
		}
		return
	case w.chance(NodeLoss, 0.002):
		w.kill(p)
		return
	case p.running && w.chance(Crash, 0.002):
		if p.jobUntil.IsZero() {
			w.finish(p, fleet.Termination{ExitCode: 1, Reason: "Error"})
		}
		return
	}
	if p.regID != 0 && p.jobUntil.IsZero() && p.running && !p.stamped && p.offlineAt.IsZero() && w.chance(InvalidateOne, 0.004) {
		w.invalidate(p)
		return
	}
	if p.regID != 0 && p.running && p.jobUntil.IsZero() && p.offlineAt.IsZero() {
		claim := p.stamped && !p.claimAt.IsZero() && !w.now.Before(p.claimAt)
		if claim || w.rng.Float64() < 0.05 {
			w.landJob(p)
		}
	}
}

// invalidate makes a runner's registration invalid: removed, or offline.
func (w *world) invalidate(p *kpod) {
	if w.rng.IntN(2) == 0 {
		w.sim.RemoveRunner(p.scope, p.regID)
		delete(w.owner, p.regID)
		p.regID, p.removedAt = 0, w.now
		p.registerAt = time.Time{}
		return
	}
	w.sim.SetRunner(p.scope, p.regID, func(r *ghsim.Runner) { r.Status = "offline" })
	p.offlineAt = w.now
}

// advanceTo applies the timed transitions due by t: starts, registrations,
// the end of the busy lag, the end of jobs.
func (w *world) advanceTo(t time.Time) {
	for _, p := range append([]*kpod(nil), w.pods...) {
		if p.phase == "Pending" && !p.neverStart && !t.Before(p.startAt) {
			w.now = p.startAt
			w.start(p, p.startAt)
		}
		w.startEvents(p, t)
		if p.running && p.regID == 0 && !p.registerAt.IsZero() && !t.Before(p.registerAt) && p.removedAt.IsZero() {
			w.now = maxTime(p.registerAt, p.started)
			w.register(p)
		}
		w.listenerWrites(p, t)
		if !p.lagUntil.IsZero() && !t.Before(p.lagUntil) && p.regID != 0 {
			w.sim.SetRunner(p.scope, p.regID, func(r *ghsim.Runner) { r.ListedIdle = false })
			p.lagUntil = time.Time{}
		}
		if !p.jobUntil.IsZero() && !t.Before(p.jobUntil) {
			w.now = p.jobUntil
			p.jobUntil = time.Time{}
			w.finish(p, exits[w.rng.IntN(len(exits))])
		}
	}
	w.now = t
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// podLeak says whether the pod is a leak the reaper may act on now, what
// kind, and since when it may. A pod deleted while it is none is a
// wrongful reap.
func (w *world) podLeak(p *kpod) (kind string, since time.Time, ok bool) {
	if p.gone || !p.managed() {
		return "", time.Time{}, false
	}
	if p.neverStart {
		return w.startLeak(p)
	}
	if p.terminal() {
		return "terminal", p.termAt, true
	}
	if !p.running || !isConfigured(p.scope) {
		return "", time.Time{}, false
	}
	r := w.reg(p)
	if r != nil && r.Busy {
		return "", time.Time{}, false
	}
	switch {
	case p.stamped:
		since = p.stampAt.Add(stampMaxAge)
		kind = "orphan-stamped"
	case r != nil && r.Status == "offline":
		since, kind = p.offlineAt, "zombie"
	case r != nil:
		return "", time.Time{}, false
	case p.regReaped:
		since, kind = p.removedAt, "zombie"
	case !p.removedAt.IsZero():
		// It had a registration and it is gone: the runner can never
		// take a job again, so removing it is right from now on. The
		// reaper can tell at once only if it saw the registration
		// offline first (zombie); else it waits for the deadline.
		since, kind = p.removedAt, "zombie"
		if p.offlineAt.IsZero() {
			since, kind = maxTime(p.started.Add(regDeadline), p.removedAt), "unregistered"
		}
		return kind, since, true
	default:
		since, kind = p.started.Add(regDeadline), "unregistered"
	}
	return kind, since, !w.now.Before(since)
}

// ghostOf says whether a registration is a ghost: ours, offline, idle, and
// no pod of ours alive to back it.
func (w *world) ghostOf(scope string, r ghsim.Runner) (time.Time, bool) {
	if !strings.HasPrefix(r.Name, ourPrefix) || r.Status != "offline" || r.Busy || !isConfigured(scope) {
		return time.Time{}, false
	}
	if p := w.byKey[nsRunners+"/"+r.Name]; p != nil || w.erHolds(scope, r) {
		return time.Time{}, false
	}
	if p := w.owner[r.ID]; p != nil {
		return p.goneAt, true
	}
	return w.now, true
}

func isConfigured(scope string) bool {
	for _, s := range shapes {
		if s.key == scope {
			return s.configured
		}
	}
	return false
}

func holdOf(kind string) time.Duration {
	switch kind {
	case "terminal":
		return 0
	case "orphan-stamped":
		return max(confirmAfter, stampMaxAge) - stampMaxAge // since already counts the stamp's age
	case "arc-failed", "arc-podless":
		return fullHold(fleet.Verdict(kind))
	default:
		return confirmAfter
	}
}

// trackLeaks brings the leak table up to date with the truth: new leaks
// open with their deadline, leaks that are no more close (cleaned by the
// reaper, or resolved by the world).
func (w *world) trackLeaks() {
	defer w.snapshot()()
	seen := map[string]bool{}
	for _, p := range w.pods {
		kind, since, ok := w.podLeak(p)
		// A pod whose EphemeralRunner is being deleted is ARC's to
		// remove; its leak, if any, is the EphemeralRunner's.
		if !ok || w.now.Before(since) || p.er != nil && !p.er.deletingSince.IsZero() {
			continue
		}
		key := fleet.PodMarkKey(p.uid)
		seen[key] = true
		if l := w.leaks[key]; l == nil || l.kind != kind {
			l := &leak{key: key, kind: kind, scope: p.scope, since: since,
				deadline: maxTime(since.Add(holdOf(kind)), w.lastExcuse(p.scope).Add(fullHold(fleet.Verdict(kind)))).Add(2 * interval)}
			if g := p.group; g != nil && kind == string(fleet.NeverStarted) {
				// A looping group acts on one pod a sweep.
				l.deadline = l.deadline.Add(time.Duration(g.replicas-1) * interval)
			}
			w.leaks[key] = l
		}
	}
	for _, s := range shapes {
		if !s.configured {
			continue
		}
		for _, r := range w.snapList[s.key] {
			since, ok := w.ghostOf(s.key, r)
			if !ok {
				continue
			}
			key := fleet.RegistrationMarkKey(s.key, r.ID)
			seen[key] = true
			if w.leaks[key] == nil {
				w.leaks[key] = &leak{key: key, kind: "ghost", scope: s.key, since: since,
					deadline: maxTime(maxTime(since, w.now), w.lastExcuse(s.key)).Add(confirmAfter + 2*interval)}
			}
		}
	}
	keys := make([]string, 0, len(w.leaks))
	for k := range w.leaks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !seen[k] && !w.leaks[k].cleaned {
			delete(w.leaks, k) // resolved by the world
		}
	}
}
