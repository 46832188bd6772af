package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// The busy org (hazard BusyOrg): the first scope, which holds our
// multi-page fleet, is also where other teams run their ephemeral runners
// by the thousand, over more than 20 pages. Every half second one or two
// of them join or leave (two to four a second, three on average: a new
// registration takes the next id and is listed last, a removal slides
// every later runner back one place), jobs start and end on them, and now
// and then one goes offline or comes back. Under hazard JobLag a job's
// busy reads false for up to a minute after it started, as our own
// runners' does. Every GitHub request takes a simulated 150 ms, so a list
// of the scope's pages spans seconds, and runners join and leave between
// its page reads on nearly every sweep. No request waits for real: the
// busy org keeps a clock of its own, advanced by each request a sweep
// sends and caught up with the world's clock when a sweep starts, so the
// world's clock and everything judged by it stay where they are.
//
// The promise under test: a list that moved while it was read is served
// as moved, not skipped. The scope is judged (presence from the list,
// absence proven at act time by a look-up by name), so a skip of it as
// inconsistent or failed with no broken answer injected is a violation
// (SkippedForMovement), no skip excuses a leak's delay but one the world
// caused by breaking an answer, and its leaks are cleaned within the usual
// bound (Liveness). One delay is documented: a runner of ours that slid
// onto a page already read goes unseen in that list, and its leak waits a
// sweep (observedLister).
const (
	busyScope  = "org:alpha"
	busyPrefix = "busy-"
	// busyLatency is one GitHub round trip on the busy org's clock.
	busyLatency = 150 * time.Millisecond
	// busyTick is the busy org's step: in each, one or two runners join
	// or leave, busyJobTries runners are tried for a job to start and as
	// many for one to end, and one in four ticks flips a runner's status.
	busyTick     = 500 * time.Millisecond
	busyJobTries = 3
	// busyLagMax is the longest GitHub lists a busy-org runner idle after
	// its job started, under hazard JobLag.
	busyLagMax = time.Minute
	// DefaultBusyOrgRunners is the busy org's size (other teams' runners)
	// when Config leaves it zero: with our own runners, 22 pages. Every
	// page the simulator serves sorts the whole scope, and so does a
	// look-up by name: this size keeps a run of 1,000 sweeps with every
	// hazard under a minute or two on two cores. Config.BusyOrgRunners
	// (the command's -busy-org-runners) runs other sizes.
	DefaultBusyOrgRunners = 2000
)

// BusyOrgStats is what the busy org's scope met over a run.
type BusyOrgStats struct {
	// Runners is the busy org's size (other teams' runners); PagesMin
	// and PagesMax the fewest and most pages its list had, ours included.
	Runners            int
	PagesMin, PagesMax int
	// Sweeps counts every sweep, overlapping ones included; Listed those
	// that asked for the busy scope's list; Judged those whose
	// classification judged the scope: listed and not skipped.
	Sweeps, Listed, Judged int
	// MovedReads counts sweeps in which a runner joined or left between
	// two of the busy scope's list requests; ServedMoved those in which
	// the product served that list as moved (fleet.ErrMoved).
	MovedReads, ServedMoved int
	// Changes and Flips count the joins and leaves, and the jobs started
	// or ended and statuses flipped (a lagging busy that comes to read
	// true is not counted), between the first and the last of a
	// sweep's list requests to the busy scope; ReadTime is the time those
	// reads spanned on the busy org's clock, summed over the sweeps.
	Changes, Flips int
	ReadTime       time.Duration
	// The busy scope's skips by cause: Faulted where an armed fault met
	// its list (a broken answer, a rate limit); RateLimited where it was
	// left unlisted for a rate limit met elsewhere (or deferred);
	// ForMovement where no fault met it and runners joined or left while
	// it was read; ForFlags where no fault met it and none did.
	Faulted, RateLimited, ForMovement, ForFlags int
	// Lookups counts the look-ups by name sent to the busy scope (list
	// requests with a name= query); AllLookups those to every scope.
	Lookups, AllLookups int
	// Unseen counts runners of ours a moved list of the busy scope did
	// not show although they were registered throughout the read.
	Unseen int
	// TimeToClean holds, per leak of the busy scope whose verdict rests
	// on GitHub's list (every kind but terminal, which the kubelet's word
	// alone decides), the sweep intervals from the moment it could be
	// acted on to its removal.
	TimeToClean []int
	// Open is those leaks open after the last sweep, and OldestOpen the
	// age of the oldest, in sweep intervals.
	Open, OldestOpen int
}

// BusyOrgSummary is the busy org's line: how it moved under its reads, how
// often its scope was judged, why it was skipped, and how long its leaks
// took. The skips for movement and for flags are those the invariant
// SkippedForMovement reports (over every scope: SkippedForMovement).
func (s *Stats) BusyOrgSummary() string {
	b := s.BusyOrg
	rate := 0.0
	if b.ReadTime > 0 {
		rate = float64(b.Changes) / b.ReadTime.Seconds()
	}
	return fmt.Sprintf("chaos: busy org of %d runners (%d-%d pages with ours): judged in %d of %d sweeps (%.1f%%); "+
		"%d joined or left during %.0f s of reads (%.2f a second, moved in %d sweeps, served moved in %d), %d jobs or statuses flipped; "+
		"skipped in %d: %d for a fault injected, %d rate-limited, %d for movement, %d for flags (SkippedForMovement violations: %d); "+
		"%d look-ups by name (%d in all scopes), %d runners of ours unseen in a moved list; "+
		"%d of its leaks that rest on the list cleaned (p50 %d, p95 %d, max %d sweeps), %d open at the end (oldest %d sweeps)",
		b.Runners, b.PagesMin, b.PagesMax, b.Judged, b.Sweeps, 100*share(b.Judged, b.Sweeps),
		b.Changes, b.ReadTime.Seconds(), rate, b.MovedReads, b.ServedMoved, b.Flips,
		b.Faulted+b.RateLimited+b.ForMovement+b.ForFlags, b.Faulted, b.RateLimited, b.ForMovement, b.ForFlags, s.count(SkippedForMovement),
		b.Lookups, b.AllLookups, b.Unseen,
		len(b.TimeToClean), percentile(b.TimeToClean, 0.5), percentile(b.TimeToClean, 0.95), percentile(b.TimeToClean, 1), b.Open, b.OldestOpen)
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// count is how many violations of inv the run found.
func (s *Stats) count(inv Invariant) int {
	n := 0
	for _, v := range s.Violations {
		if v.Invariant == inv {
			n++
		}
	}
	return n
}

// busyOrg is the busy org as it is, across sweeps.
type busyOrg struct {
	// rs are its runners, in no order: a runner that leaves takes the
	// last one's place.
	rs []orgRunner
	// at is how far its clock has been played.
	at time.Time
	// lagging are the runners GitHub lists idle although a job started
	// on them, until when.
	lagging []orgLag
}

type orgRunner struct {
	id           int64
	online, busy bool
}

type orgLag struct {
	id    int64
	until time.Time
}

// orgSweep is what one sweep's GitHub requests met: the busy scope's reads,
// the scopes whose list met an armed fault, and the list call the
// ByteStrictRevalidation Break is judging.
type orgSweep struct {
	started bool
	// lists counts the busy scope's list requests so far; readFrom and
	// readTo are the busy org's clock when the first and the latest were
	// answered.
	lists            int
	readFrom, readTo time.Time
	// changes and flips count what the busy org did between two of the
	// busy scope's list requests; moved says changes > 0.
	changes, flips int
	moved          bool
	// servedMoved says the busy scope's list came back from the product
	// as moved (fleet.ErrMoved); pages is its page count, as page 1's
	// rel="last" link gave it.
	servedMoved bool
	pages       int
	// unseen holds the leak keys of runners of ours a moved list did not
	// show though they were registered throughout its read (unseenARC
	// the UIDs of their EphemeralRunners, for ARC's runners), and
	// unseenBusy counts those of the busy scope.
	unseen     []string
	unseenARC  []string
	unseenBusy int
	// faulted holds the scopes whose list met an armed fault.
	faulted map[string]bool
	strict  *strictCall
}

// TuneGC collects garbage less often than Go's default, unless GOGC is
// set: the simulator copies and sorts the busy scope's thousands of
// runners on every page and look-up it serves, and on the run's small live
// heap the default collects every few pages; the sort's write barriers
// while the collector marks then cost most of a run. The chaos command and
// the package's tests call it; the heap stays under 100 MB.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(1000)
	}
}

func (w *world) busySize() int {
	if w.cfg.BusyOrgRunners > 0 {
		return w.cfg.BusyOrgRunners
	}
	return DefaultBusyOrgRunners
}

// busyRequest advances the busy org's clock by one GitHub round trip and
// plays the ticks that fall due before the request is answered. busyList
// says whether the request is one of the busy scope's list pages. The
// first request of a sweep first catches the org's clock up with the
// sweep's start (the minute since the last sweep, played tick by tick).
func (w *world) busyRequest(sc *sweepCtx, busyList bool) {
	if !w.cfg.Hazards.Has(BusyOrg) {
		return
	}
	g := w.org
	if g == nil {
		g = &busyOrg{at: sc.at}
		w.org = g
		for len(g.rs) < w.busySize() {
			w.busyJoin(g, true)
		}
	}
	o := &sc.org
	if !o.started {
		o.started = true
		// A sweep starts at any moment of the org's tick, and not
		// before the requests of a sweep it overlapped.
		w.busyPlay(g, maxTime(g.at, sc.at.Add(w.within(busyTick))))
	}
	changes, flips := w.busyPlay(g, g.at.Add(busyLatency))
	if !busyList {
		return
	}
	if o.lists > 0 {
		o.changes += changes
		o.flips += flips
		o.moved = o.moved || changes > 0
	} else {
		o.readFrom = g.at
	}
	o.lists++
	o.readTo = g.at
}

// busyPlay plays the busy org's ticks due by t, and returns how many
// runners joined or left, and how many jobs or statuses flipped.
func (w *world) busyPlay(g *busyOrg, t time.Time) (changes, flips int) {
	for tick := g.at.Truncate(busyTick).Add(busyTick); !tick.After(t); tick = tick.Add(busyTick) {
		c, f := w.busyStep(g, tick)
		changes += c
		flips += f
	}
	g.at = t
	return changes, flips
}

// busyStep is one tick at time at.
func (w *world) busyStep(g *busyOrg, at time.Time) (changes, flips int) {
	kept := g.lagging[:0]
	for _, l := range g.lagging {
		if at.Before(l.until) {
			kept = append(kept, l)
			continue
		}
		w.sim.SetRunner(busyScope, l.id, func(r *ghsim.Runner) { r.ListedIdle = false })
	}
	g.lagging = kept
	for range busyJobTries {
		if i, ok := w.busyPick(g); ok && g.rs[i].online && !g.rs[i].busy {
			lag := w.cfg.Hazards.Has(JobLag) && w.rng.IntN(2) == 0
			if w.busySet(g, i, func(r *ghsim.Runner) { r.Busy, r.ListedIdle = true, lag }) {
				g.rs[i].busy = true
				flips++
				if lag {
					g.lagging = append(g.lagging, orgLag{id: g.rs[i].id, until: at.Add(w.within(busyLagMax))})
				}
			}
		}
		if i, ok := w.busyPick(g); ok && g.rs[i].busy {
			if w.busySet(g, i, func(r *ghsim.Runner) { r.Busy, r.ListedIdle = false, false }) {
				g.rs[i].busy = false
				flips++
			}
		}
	}
	if w.rng.IntN(4) == 0 {
		if i, ok := w.busyPick(g); ok && !g.rs[i].busy {
			online := !g.rs[i].online
			if w.busySet(g, i, func(r *ghsim.Runner) { r.Status = statusOf(online) }) {
				g.rs[i].online = online
				flips++
			}
		}
	}
	for range 1 + w.rng.IntN(2) {
		switch n := len(g.rs); {
		case n < w.busySize() || n == w.busySize() && w.rng.IntN(2) == 0:
			w.busyJoin(g, false)
		default:
			i := w.rng.IntN(n)
			w.sim.RemoveRunner(busyScope, g.rs[i].id)
			g.drop(i)
		}
		changes++
	}
	return changes, flips
}

// busyPick draws one of the busy org's runners.
func (w *world) busyPick(g *busyOrg) (int, bool) {
	if len(g.rs) == 0 {
		return 0, false
	}
	return w.rng.IntN(len(g.rs)), true
}

// busySet changes runner i in the simulator; a runner that is gone there
// (another hazard removed it) leaves the busy org, and busySet reports
// false.
func (w *world) busySet(g *busyOrg, i int, mutate func(*ghsim.Runner)) bool {
	if w.sim.SetRunner(busyScope, g.rs[i].id, mutate) {
		return true
	}
	g.drop(i)
	return false
}

func (g *busyOrg) drop(i int) {
	n := len(g.rs)
	g.rs[i] = g.rs[n-1]
	g.rs = g.rs[:n-1]
}

// busyGone removes a runner another hazard removed from the simulator.
func (w *world) busyGone(id int64) {
	if w.org == nil {
		return
	}
	for i, r := range w.org.rs {
		if r.id == id {
			w.org.drop(i)
			return
		}
	}
}

// busyJoin registers another team's runner in the busy org: online and
// idle, as an ephemeral runner registers; at the start, anywhere in the
// org's mix (one in five offline, nearly half of the rest on a job).
func (w *world) busyJoin(g *busyOrg, anyState bool) {
	w.seq++
	r := orgRunner{online: true}
	if anyState {
		r.online = w.rng.IntN(5) > 0
		r.busy = r.online && w.rng.IntN(20) < 9
	}
	added := w.sim.AddRunner(busyScope, ghsim.Runner{Name: fmt.Sprintf("%s%d", busyPrefix, w.seq), Status: statusOf(r.online), Busy: r.busy,
		Ephemeral: true, Labels: []ghsim.Label{{Name: "self-hosted"}, {Name: "team-c"}}})
	r.id = added.ID
	g.rs = append(g.rs, r)
}

func statusOf(online bool) string {
	if online {
		return "online"
	}
	return "offline"
}

// excusedSkip reports whether a scope skipped this sweep is a documented
// cause of delay for its leaks: a rate limit or the scope budget, or a
// skip as failed or inconsistent in a sweep whose armed fault met that
// scope's list. Runners joining, leaving or flipping while it was read
// excuse nothing: the product serves such a list as moved.
func (sc *sweepCtx) excusedSkip(s reconcile.Skip) bool {
	if s.Kind != fleet.SkipInconsistent && s.Kind != fleet.SkipFailed {
		return true
	}
	return sc.org.faulted[s.ScopeKey]
}

// skipExcuses reports whether scope was skipped this sweep for a documented
// cause.
func (sc *sweepCtx) skipExcuses(scope string) bool {
	for _, s := range sc.res.Class.Skipped {
		if s.ScopeKey == scope {
			return sc.excusedSkip(s)
		}
	}
	return false
}

// noteFault records that an armed fault met scope's list this sweep: an
// answer the world broke (a 500, a short page, a page that lists a runner
// twice) or a rate limit. A shift is no fault: it only moves the list.
func (sc *sweepCtx) noteFault(scope string) {
	if sc.org.faulted == nil {
		sc.org.faulted = map[string]bool{}
	}
	sc.org.faulted[scope] = true
}

// checkSkips is the invariant SkippedForMovement over one finished sweep.
func (w *world) checkSkips(sc *sweepCtx) {
	for _, s := range sc.res.Class.Skipped {
		if sc.excusedSkip(s) {
			continue
		}
		why := "no runner joined or left while it was read: only flags flipped"
		switch {
		case s.ScopeKey == busyScope && sc.org.moved:
			why = fmt.Sprintf("%d runners joined or left while it was read", sc.org.changes)
		case s.ScopeKey != busyScope && sc.shifted:
			why = "a shift moved a list while it was read"
		}
		reason := s.Reason
		if len(reason) > 300 {
			reason = reason[:300] + "..."
		}
		w.violateAt(sc, SkippedForMovement, "%s skipped as %s with no fault injected (%s): %s", s.ScopeKey, s.Kind, why, reason)
	}
}

// busyAfter counts what the busy scope met in a finished sweep, before
// after() retires its cleaned leaks.
func (w *world) busyAfter(sc *sweepCtx) {
	if !w.cfg.Hazards.Has(BusyOrg) {
		return
	}
	b := &w.stats.BusyOrg
	o := &sc.org
	b.Runners = w.busySize()
	b.Sweeps++
	if o.lists > 0 {
		b.Listed++
	}
	if o.moved {
		b.MovedReads++
	}
	if o.servedMoved {
		b.ServedMoved++
	}
	if o.pages > 0 {
		b.PagesMax = max(b.PagesMax, o.pages)
		if b.PagesMin == 0 || o.pages < b.PagesMin {
			b.PagesMin = o.pages
		}
	}
	b.Changes += o.changes
	b.Flips += o.flips
	b.ReadTime += o.readTo.Sub(o.readFrom)
	b.Unseen += o.unseenBusy
	skipped := false
	for _, s := range sc.res.Class.Skipped {
		if s.ScopeKey != busyScope {
			continue
		}
		skipped = true
		switch {
		case o.faulted[busyScope]:
			b.Faulted++
		case sc.excusedSkip(s):
			b.RateLimited++
		case o.moved:
			b.ForMovement++
		default:
			b.ForFlags++
		}
	}
	if _, listed := sc.res.Observation.Lists[busyScope]; listed && !skipped {
		b.Judged++
	}
	b.Open, b.OldestOpen = 0, 0
	for _, l := range w.sortedLeaks() {
		if l.scope != busyScope || l.kind == "terminal" {
			continue
		}
		if l.cleaned {
			b.TimeToClean = append(b.TimeToClean, sweepsBetween(l.since, l.cleanAt))
			continue
		}
		b.Open++
		b.OldestOpen = max(b.OldestOpen, sweepsBetween(l.since, sc.at))
	}
}

func sweepsBetween(from, to time.Time) int {
	return int(math.Ceil(float64(to.Sub(from)) / float64(interval)))
}

// skipMoved is the broken lister of SkipMoved: a list the product served
// as moved becomes a failure, as an inconsistent list, the way the product
// skipped a list that moved twice before it served moved lists.
type skipMoved struct{ inner runnerLister }

func (s skipMoved) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, c, err := s.inner.ListRunners(ctx, scope, cache)
	if errors.Is(err, fleet.ErrMoved) {
		return nil, nil, fmt.Errorf("list runners for %s: %w: moved while it was read (skip-moved): %v", scope, fleet.ErrInconsistent, err) //nolint:errorlint // not ErrMoved: this lister reads a moved list as a broken one
	}
	return regs, c, err
}

// strictCall follows one list call for the ByteStrictRevalidation Break:
// the requests sent, whether the first pass reached its last page, and
// whether the byte-strict list would have called the scope inconsistent.
type strictCall struct {
	scope  string
	sent   int
	last   bool
	failed bool
}

// byteStrict is the broken lister of ByteStrictRevalidation: the product's
// list, judged as the byte-strict list judged it. That list read every
// page, asked for every earlier page again with the ETag it got, and called
// the scope inconsistent on the first that came back changed in any byte
// the reaper reads, or on any page disagreeing with page 1; it never read
// a list twice, and never served one that moved. The transport follows
// the product's requests and fails the call at the first answer the
// byte-strict list would have failed at: a page read again that is not a
// 304 (in this world a runner's ETag changes only with a field the reaper
// reads: its busy, status or membership), or the product starting over
// before its first pass reached the last page (a page disagreed on
// total_count). A list the product returns as moved fails too. Requests
// the byte-strict list would not have sent are answered without reaching
// the simulator.
type byteStrict struct {
	inner runnerLister
	w     *world
}

func (b byteStrict) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	w := b.w
	call := &strictCall{scope: scope.Key()}
	w.mu.Lock()
	w.top().org.strict = call
	w.mu.Unlock()
	regs, c, err := b.inner.ListRunners(ctx, scope, cache)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.top().org.strict = nil
	if call.failed || errors.Is(err, fleet.ErrMoved) {
		return nil, nil, fmt.Errorf("list runners for %s: %w: a page changed while later pages were read (byte-strict)", scope, fleet.ErrInconsistent)
	}
	return regs, c, err
}

// before is the Break's look at a list request of the call it follows,
// before it is sent: whether the byte-strict list would have sent it.
func (st *strictCall) before(page int) bool {
	if page == 1 && st.sent > 0 && !st.last {
		st.failed = true
	}
	return !st.failed
}

// after is its look at the answer.
func (st *strictCall) after(resp *http.Response) {
	st.sent++
	if st.last && resp.StatusCode == http.StatusOK {
		st.failed = true
	}
	if !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		st.last = true
	}
}

// notSent answers a request the byte-strict list would not have sent.
func notSent(req *http.Request) *http.Response {
	return &http.Response{
		Status: "500 Internal Server Error", StatusCode: http.StatusInternalServerError,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(`{"message":"not sent: the byte-strict list had already failed"}`)),
		Request: req,
	}
}
