package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Runners that never start, and broken templates (hazard StartFaults).
//
// Never started: now and then a bare pod of the pool never starts its
// runner: the runner container waits with ErrImagePull, ImagePullBackOff,
// InvalidImageName, CreateContainerConfigError or CreateContainerError, an
// init container never finishes, or the scheduler finds no room
// (Unschedulable). The pod stays Pending, holding its slot; its view
// carries fleet.StartWait. From its creation plus startDeadline it is a
// leak of kind never-started, which Liveness holds to confirm-after and two
// sweeps as any other (NeverStartedCleaned names it); an Unschedulable one
// only where the reaper is told to delete those (Config.UnschedulableOptIn),
// and a pod deleted before that is wrongfully deleted.
//
// Broken templates: groups of bare pods made by a ReplicaSet (the pod's
// owner, and its pod-template-hash label) whose every pod fails the same
// way, and which the ReplicaSet replaces as soon as one is gone: one whose
// runner exits 7 at once (a runner version GitHub no longer accepts; the
// pod restarts it and sits in CrashLoopBackOff), one whose image cannot be
// pulled. The reaper deletes their pods again and again. After loopN reaps
// of a group within loopWindow the group loops: LoopReported wants the
// product to say so (read through Config.Loops), and LoopDelaysOthers that
// its churn holds back no other leak.
//
// None of this draws on the world's random source.

// The product's parameters the world holds it to, and gives its sweeper
// (runSweep): REAPER_START_DEADLINE, shorter than the product's default so
// that a run meets many, though longer than any late start of the world;
// and the loop detector's count and window, the product's defaults.
const (
	startDeadline = 5 * time.Minute
	loopN         = loops.DefaultThreshold
	loopWindow    = loops.DefaultWindow
	// loopGrace is how many sweeps after the one that made the loopN-th
	// reap the report may come: the product may count an action when its
	// ledger is saved, at the end of the sweep that made it.
	loopGrace = 1
)

// LoopReporter reads the loops a finished sweep reported: the groups it
// named, as "Kind/name" of the pods' owner ("ReplicaSet/mine-…"), from the
// sweep's result or its JSON log lines. An implementation must be
// comparable (a struct value, not a func), as Config is a map key.
type LoopReporter interface {
	LoopsReported(res sweep.Result, log []byte) []string
}

// productLoops reads the loops the product reported from the sweep's
// result: sweep.Result.Loops, the loops the sweep warns of ("reap loop")
// and the audit and the metrics show, each named by its group's kind and
// name.
type productLoops struct{}

func (productLoops) LoopsReported(res sweep.Result, _ []byte) []string {
	out := make([]string, 0, len(res.Loops))
	for _, l := range res.Loops {
		kind, _, name := l.Group.Parts()
		out = append(out, kind+"/"+name)
	}
	return out
}

// startWaits are the ways a bare pod never starts, with the words the
// cluster says them in.
var startWaits = []fleet.StartWait{
	{Reason: "ErrImagePull", Container: "runner", Message: `failed to pull and unpack image "ghcr.io/example/runner:2.330.0": failed to resolve reference: not found`},
	{Reason: "ImagePullBackOff", Container: "runner", Message: `Back-off pulling image "ghcr.io/example/runner:2.330.0"`},
	{Reason: "InvalidImageName", Container: "runner", Message: `Failed to apply default image tag "ghcr.io/example/runner:2.330.0 ": couldn't parse image name`},
	{Reason: "CreateContainerConfigError", Container: "runner", Message: `secret "runner-token" not found`},
	{Reason: "CreateContainerError", Container: "runner", Message: `failed to create containerd container: mount /var/run/docker.sock: no such file or directory`},
	// An init container that never finishes: the runner waits behind it.
	{Reason: "PodInitializing", Container: "wait-for-docker", Init: true, Message: "init container wait-for-docker has not finished"},
	{Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."},
}

// brokenGroup is a ReplicaSet whose template is broken.
type brokenGroup struct {
	name, hash, uid string
	scope           string
	replicas        int
	// wait is how its pods wait, never started; nil for the group whose
	// runner starts and exits 7.
	wait *fleet.StartWait
	// reaps are the reaper's deletes of its pods within loopWindow;
	// loopSweep is the sweep of the loopN-th, -1 while it has not
	// looped; reported says the product has reported it.
	reaps     []time.Time
	loopSweep int
	reported  bool
	// made and reaped count its pods made and deleted by the reaper.
	made, reaped int
}

func (g *brokenGroup) owner() string { return "ReplicaSet/" + g.name }

// loopedBefore reports whether the group was looping as a sweep at t
// began: loopN of its reaps before t within loopWindow, as the product's
// window holds them when it loads it.
func (g *brokenGroup) loopedBefore(t time.Time) bool {
	n := 0
	for _, at := range g.reaps {
		if at.Before(t) && t.Sub(at) < loopWindow {
			n++
		}
	}
	return n >= loopN
}

// startWorld is the start faults' state: their own random source and the
// broken groups.
type startWorld struct {
	rng    *rand.Rand
	groups []*brokenGroup
	byUID  map[string]*brokenGroup
}

func (w *world) newStartFaults() {
	if !w.cfg.Hazards.Has(StartFaults) {
		return
	}
	seed := w.cfg.Seed
	w.starts = &startWorld{rng: rand.New(rand.NewPCG(seed^0x1f83d9abfb41bd6b, seed+0x5be0cd19137e2179)), byUID: map[string]*brokenGroup{}}
	w.starts.groups = []*brokenGroup{
		{name: ourPrefix + "runner-outdated-7d9f8c6b5", hash: "7d9f8c6b5", uid: "rs-outdated", scope: "org:beta", replicas: 2, loopSweep: -1},
		{name: ourPrefix + "runner-badimage-5c4b7f8d9", hash: "5c4b7f8d9", uid: "rs-badimage", scope: "repo:acme/web", replicas: 2, loopSweep: -1,
			wait: &fleet.StartWait{Reason: "ImagePullBackOff", Container: "runner", Message: `Back-off pulling image "ghcr.io/example/runner:2.330.0-broken"`}},
	}
	w.keepGroups()
}

// neverStarts draws whether a new bare pod never starts, and how.
func (w *world) neverStarts(p *kpod) {
	if w.starts == nil || w.starts.rng.Float64() >= 0.03 {
		return
	}
	sw := startWaits[w.starts.rng.IntN(len(startWaits))]
	p.neverStart, p.startWait = true, &sw
	p.registerAt = time.Time{}
	if w.stats.Starts.NeverStarted == nil {
		w.stats.Starts.NeverStarted = map[string]int{}
	}
	w.stats.Starts.NeverStarted[sw.Reason]++
}

// keepGroups is the ReplicaSets' controller: each broken group has its
// replicas of pods not yet gone.
func (w *world) keepGroups() {
	if w.starts == nil {
		return
	}
	for _, g := range w.starts.groups {
		n := 0
		for _, p := range w.pods {
			if p.group == g {
				n++
			}
		}
		for ; n < g.replicas; n++ {
			w.newGroupPod(g)
		}
	}
}

const suffixChars = "bcdfghjklmnpqrstvwxz2456789"

func (w *world) newGroupPod(g *brokenGroup) {
	var b strings.Builder
	for i := 0; i < 5; i++ {
		b.WriteByte(suffixChars[w.starts.rng.IntN(len(suffixChars))])
	}
	p := w.newPod(nsRunners, g.name+"-"+b.String(), g.scope, true)
	p.group = g
	g.made++
	w.starts.byUID[p.uid] = g
	if g.wait != nil {
		sw := *g.wait
		p.neverStart, p.startWait = true, &sw
		return
	}
	// The runner starts, finds its version refused, and exits 7; the
	// kubelet restarts it, and it stays in CrashLoopBackOff.
	p.startAt = w.now.Add(10 * time.Second)
	p.outdated = true
}

// startEvents is what happens to the pods of the start faults as the world
// advances to t: an outdated runner exits 7 five seconds after it starts.
func (w *world) startEvents(p *kpod, t time.Time) {
	if !p.outdated || !p.running || t.Before(p.started.Add(5*time.Second)) {
		return
	}
	w.now = p.started.Add(5 * time.Second)
	if p.log != nil {
		p.log.raw(fmt.Sprintf("Current runner version: '%s'", "2.300.0"))
		p.log.write(w.now, "An error occurred: Runner version v2.300.0 is deprecated and cannot receive messages.")
	}
	p.running, p.termAt = false, w.now
	p.last = &fleet.Termination{ExitCode: 7, Reason: "Error", FinishedAt: w.now}
	p.rv++
}

// startLeak is podLeak's answer for a pod that never started.
func (w *world) startLeak(p *kpod) (kind string, since time.Time, ok bool) {
	// A pod of a scope the reaper is not given is not its to judge, as
	// for a running one.
	if p.startWait.Unschedulable() && !w.cfg.UnschedulableOptIn || !isConfigured(p.scope) {
		return "", time.Time{}, false
	}
	since = p.created.Add(startDeadline)
	return string(fleet.NeverStarted), since, !w.now.Before(since)
}

// groupReaped records the reaper's delete of a broken group's pod.
func (w *world) groupReaped(p *kpod, sc *sweepCtx) {
	g := p.group
	if g == nil {
		return
	}
	g.reaped++
	g.reaps = append(g.reaps, w.now)
	cut := 0
	for cut < len(g.reaps) && w.now.Sub(g.reaps[cut]) >= loopWindow {
		cut++
	}
	g.reaps = g.reaps[cut:]
	if len(g.reaps) >= loopN && g.loopSweep < 0 {
		g.loopSweep = sc.no
	}
}

// StartStats is what the start faults met.
type StartStats struct {
	// NeverStarted counts the bare pods that never started, by reason.
	NeverStarted map[string]int
	// Groups is, per broken group's owner, its pods made and reaped, the
	// sweep it began to loop (-1: never) and whether it was reported.
	Groups []GroupStats
}

// GroupStats is one broken group's figures.
type GroupStats struct {
	Owner                   string
	Made, Reaped, LoopSweep int
	Reported                bool
}

// StartSummary is the start faults' lines.
func (s *Stats) StartSummary() string {
	var b strings.Builder
	reasons := make([]string, 0, len(s.Starts.NeverStarted))
	n := 0
	for r, c := range s.Starts.NeverStarted {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, c))
		n += c
	}
	sort.Strings(reasons)
	fmt.Fprintf(&b, "chaos: never started: %d bare pods (%s)\n", n, strings.Join(reasons, ", "))
	for _, g := range s.Starts.Groups {
		fmt.Fprintf(&b, "chaos: broken template %s: %d pods made, %d reaped, looping from sweep %d, reported %v\n", g.Owner, g.Made, g.Reaped, g.LoopSweep, g.Reported)
	}
	return b.String()
}

func (w *world) startStats() {
	if w.starts == nil {
		return
	}
	w.stats.Starts.Groups = w.stats.Starts.Groups[:0]
	for _, g := range w.starts.groups {
		w.stats.Starts.Groups = append(w.stats.Starts.Groups, GroupStats{Owner: g.owner(), Made: g.made, Reaped: g.reaped, LoopSweep: g.loopSweep, Reported: g.reported})
	}
}

// afterStarts checks one finished sweep against the broken groups:
// LoopReported through Config.Loops, and LoopDelaysOthers.
func (w *world) afterStarts(sc *sweepCtx, res sweep.Result) {
	if w.starts == nil {
		return
	}
	if sc.overlap || sc.refSkew != 0 || res.Status == sweep.StatusFailed {
		// The product's window forgets: a wiped or overtaken ledger; a
		// lying API server's Date, which dates the window's entries hours
		// away (the next sweep prunes them, or this one prunes the rest
		// as from the future or too old); a failed sweep, whose actions
		// may not reach the ledger. The count starts again, this sweep's
		// reaps left out.
		for _, g := range w.starts.groups {
			g.reaps = nil
			if !g.reported {
				g.loopSweep = -1
			}
		}
	}
	reporter := w.cfg.Loops
	if reporter == nil {
		reporter = productLoops{}
	}
	for _, name := range reporter.LoopsReported(res, sc.log.Bytes()) {
		for _, g := range w.starts.groups {
			if g.owner() == name {
				g.reported = true
			}
		}
	}
	for _, g := range w.starts.groups {
		if g.loopSweep >= 0 && !g.reported && sc.no > g.loopSweep+loopGrace {
			w.violateAt(sc, LoopReported, "%s reaped %d times within %s from sweep %d, and no sweep reported its loop", g.owner(), len(g.reaps), loopWindow, g.loopSweep)
			g.loopSweep = sc.no // once per grace, not every sweep
		}
	}
	// A group looping as the sweep began acts on one pod a sweep on a
	// verdict that needs confirmation; more, in a sweep whose bound held
	// back another leak, is its churn delaying others.
	acts := map[*brokenGroup]int{}
	deferred := ""
	for _, o := range res.Outcomes {
		g := w.starts.byUID[strings.TrimPrefix(o.Candidate.Key, fleet.PodMarkKey(""))]
		wrote := o.Registration == fleet.Deleted || o.ObjectResult == fleet.Deleted && o.Result == fleet.Deleted
		switch {
		case g != nil && wrote && o.Candidate.Verdict != fleet.Terminal && g.loopedBefore(sc.at):
			acts[g]++
		case g == nil && (o.Result == fleet.Deferred || o.Result == fleet.NotReached) && w.leaks[o.Candidate.Key] != nil:
			deferred = o.Candidate.Key
		}
	}
	for _, g := range w.starts.groups {
		if acts[g] > 1 && deferred != "" {
			w.violateAt(sc, LoopDelaysOthers, "%s, looping, acted on %d pods in one sweep while the bound held back %s", g.owner(), acts[g], deferred)
		}
	}
}

// startedOnly is the pod lister of the broken product HideNeverStarted: it
// lists only pods whose runner has started, as the product judged before
// never-started.
type startedOnly struct{ k kube }

func (s startedOnly) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	pods, err := s.k.ListPods(ctx)
	kept := pods[:0]
	for _, p := range pods {
		if p.StartWait == nil {
			kept = append(kept, p)
		}
	}
	return kept, err
}
