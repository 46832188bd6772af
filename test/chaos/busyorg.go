package chaos

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// The busy org (hazard BusyOrg, issue 20): the first scope, which holds our
// multi-page fleet, is also where other teams run their runners by the
// hundred or the thousand. Every simulated second one of them flips busy or
// status, and now and then one joins or leaves; every GitHub request takes
// a simulated 150 ms, so that a list of the scope's many pages spans
// seconds and the flips land between its page reads. No request waits for
// real: the busy org keeps a clock of its own for each sweep, advanced by
// each request the sweep sends, so the world's clock and everything judged
// by it stay where they are.
//
// The promise under test: a runner that flipped while the list was read is
// no cause to skip the scope, so its leaks are cleaned within the usual
// bound (Liveness), and a skip as inconsistent with nothing but flags
// changed is no documented cause of delay (excusedSkip). A runner joining
// or leaving mid-read may still cost the scope a sweep: the list is read
// again, and only a second move skips it.
const (
	busyScope  = "org:alpha"
	busyPrefix = "busy-"
	// busyLatency is one GitHub round trip on the busy org's clock.
	busyLatency = 150 * time.Millisecond
	// busyTick is how often one of the busy org's runners flips.
	busyTick = time.Second
	// busyMove is the chance that, in a tick, a runner also joins or
	// leaves: about one every 40 s.
	busyMove = 1.0 / 40
	// DefaultBusyOrgRunners is the busy org's size when Config leaves it
	// zero: with our own runners, three pages, a list and its revalidation
	// of 750 ms, during which a flip lands in three sweeps of four;
	// small enough that a run with every hazard stays fast (every page the
	// simulator serves sorts the whole scope). Config.BusyOrgRunners (the
	// command's -busy-org-runners) runs the thousands.
	DefaultBusyOrgRunners = 100
)

// BusyOrgStats is what the busy org's scope met over a run.
type BusyOrgStats struct {
	// Runners is the busy org's size.
	Runners int
	// Sweeps counts every sweep, overlapping ones included; Listed those
	// that asked for the busy scope's list.
	Sweeps, Listed int
	// Skipped counts sweeps that skipped the busy scope as inconsistent;
	// FlagSkips those of them where no runner joined or left and no fault
	// was armed while it was read: only flags flipped.
	Skipped, FlagSkips int
	// Moved counts sweeps in which a runner joined or left between two of
	// the busy scope's list requests.
	Moved int
	// TimeToClean holds, per leak of the busy scope whose verdict rests
	// on GitHub's list (every kind but terminal, which the kubelet's word
	// alone decides), the sweep intervals from the moment it could be
	// acted on to its removal.
	TimeToClean []int
	// Open is those leaks open after the last sweep, and OldestOpen the
	// age of the oldest, in sweep intervals.
	Open, OldestOpen int
}

// BusyOrgSummary is the busy org's line: how often its scope was skipped,
// and how long its leaks took.
func (s *Stats) BusyOrgSummary() string {
	b := s.BusyOrg
	rate := 0.0
	if b.Sweeps > 0 {
		rate = float64(b.Skipped) / float64(b.Sweeps)
	}
	return fmt.Sprintf("chaos: busy org of %d runners: skipped as inconsistent in %d of %d sweeps (%.1f%%), %d with only flags flipped; a runner joined or left mid-read in %d; %d of its leaks that rest on the list cleaned (p50 %d, p95 %d, max %d sweeps), %d open at the end (oldest %d sweeps)",
		b.Runners, b.Skipped, b.Sweeps, 100*rate, b.FlagSkips, b.Moved,
		len(b.TimeToClean), percentile(b.TimeToClean, 0.5), percentile(b.TimeToClean, 0.95), percentile(b.TimeToClean, 1), b.Open, b.OldestOpen)
}

// orgSweep is what one sweep's GitHub requests met: the busy org's clock
// and runners, the scopes whose list met an armed fault, and the list call
// the ByteStrictRevalidation Break is judging.
type orgSweep struct {
	started bool
	elapsed time.Duration
	ticks   int
	// ids are the busy org's runners, kept as they join and leave.
	ids []int64
	// lists counts the busy scope's list requests so far.
	lists int
	// moved: a runner joined or left between two of the busy scope's list
	// requests, so its list may have moved under the read.
	moved bool
	// faulted holds the scopes whose list met an armed fault;
	// faultElsewhere says a failure or a short page met a scope other
	// than the busy one.
	faulted        map[string]bool
	faultElsewhere bool
	strict         *strictCall
}

// curable reports whether the sweep's failures and short pages all met the
// busy scope while it moved under its read: the product may then have read
// that list again, which the spent fault no longer meets.
func (o *orgSweep) curable() bool { return o.moved && !o.faultElsewhere }

func (w *world) busySize() int {
	if w.cfg.BusyOrgRunners > 0 {
		return w.cfg.BusyOrgRunners
	}
	return DefaultBusyOrgRunners
}

// busyRequest advances the busy org's clock by one GitHub round trip and
// plays the ticks that fall due before the request is answered. busyList
// says whether the request is one of the busy scope's list pages. The
// first request of a sweep also plays the minute since the last sweep, and
// brings the org to its size.
func (w *world) busyRequest(sc *sweepCtx, busyList bool) {
	if !w.cfg.Hazards.Has(BusyOrg) {
		return
	}
	o := &sc.org
	if !o.started {
		o.started = true
		for _, r := range w.sim.Runners(busyScope) {
			if strings.HasPrefix(r.Name, busyPrefix) {
				o.ids = append(o.ids, r.ID)
			}
		}
		for len(o.ids) < w.busySize() {
			w.busyJoin(o)
		}
		for range int(interval / busyTick) {
			w.busyStep(o)
		}
		// A sweep starts at any moment of the org's second.
		o.elapsed = w.within(busyTick)
	}
	o.elapsed += busyLatency
	mid := busyList && o.lists > 0
	if busyList {
		o.lists++
	}
	for ; o.ticks < int(o.elapsed/busyTick); o.ticks++ {
		if w.busyStep(o) && mid {
			o.moved = true
		}
	}
}

// busyStep is one tick: a runner flips busy (most often) or status, and
// now and then one joins or leaves, which it reports.
func (w *world) busyStep(o *orgSweep) bool {
	if len(o.ids) > 0 {
		id := o.ids[w.rng.IntN(len(o.ids))]
		w.sim.SetRunner(busyScope, id, func(r *ghsim.Runner) {
			switch {
			case r.Status == "online" && w.rng.IntN(5) > 0:
				r.Busy = !r.Busy
			case r.Status == "online":
				r.Status, r.Busy = "offline", false
			default:
				r.Status = "online"
			}
		})
	}
	if w.rng.Float64() >= busyMove {
		return false
	}
	if n := len(o.ids); n < w.busySize() || n == w.busySize() && w.rng.IntN(2) == 0 {
		w.busyJoin(o)
	} else {
		i := w.rng.IntN(n)
		w.sim.RemoveRunner(busyScope, o.ids[i])
		o.ids[i] = o.ids[n-1]
		o.ids = o.ids[:n-1]
	}
	return true
}

// busyJoin registers another team's runner in the busy org.
func (w *world) busyJoin(o *orgSweep) {
	w.seq++
	online := w.rng.IntN(5) > 0
	status := "offline"
	if online {
		status = "online"
	}
	r := w.sim.AddRunner(busyScope, ghsim.Runner{Name: fmt.Sprintf("%s%d", busyPrefix, w.seq), Status: status,
		Busy: online && w.rng.IntN(2) == 0, Labels: []ghsim.Label{{Name: "self-hosted"}, {Name: "team-c"}}})
	o.ids = append(o.ids, r.ID)
}

// excusedSkip reports whether a scope skipped this sweep is a documented
// cause of delay for its leaks. Every skip is, but one as inconsistent
// while the world moved nothing under the list (no armed fault met it, no
// runner joined or left while it was read): only flags flipped, which the
// list reads through since issue 20.
func (sc *sweepCtx) excusedSkip(s reconcile.Skip) bool {
	if s.Kind != fleet.SkipInconsistent {
		return true
	}
	return sc.org.faulted[s.ScopeKey] || s.ScopeKey == busyScope && sc.org.moved
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

// noteFault records that an armed fault met scope's list this sweep.
func (sc *sweepCtx) noteFault(scope string) {
	if sc.org.faulted == nil {
		sc.org.faulted = map[string]bool{}
	}
	sc.org.faulted[scope] = true
}

// busyAfter counts what the busy scope met in a finished sweep, before
// after() retires its cleaned leaks.
func (w *world) busyAfter(sc *sweepCtx) {
	if !w.cfg.Hazards.Has(BusyOrg) {
		return
	}
	b := &w.stats.BusyOrg
	b.Runners = w.busySize()
	b.Sweeps++
	if sc.org.lists > 0 {
		b.Listed++
	}
	if sc.org.moved {
		b.Moved++
	}
	for _, s := range sc.res.Class.Skipped {
		if s.ScopeKey == busyScope && s.Kind == fleet.SkipInconsistent {
			b.Skipped++
			if !sc.excusedSkip(s) {
				b.FlagSkips++
			}
		}
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

// strictCall follows one list call for the ByteStrictRevalidation Break:
// the requests sent, whether the first pass reached its last page, and
// whether the list before issue 20 would have called the scope
// inconsistent.
type strictCall struct {
	scope  string
	sent   int
	last   bool
	failed bool
}

// byteStrict is the broken lister of ByteStrictRevalidation: the product's
// list, judged as the list before issue 20 judged it. That list read every
// page, asked for every earlier page again with the ETag it got, and called
// the scope inconsistent on the first that came back changed in any byte
// the reaper reads, or on any page disagreeing with page 1; it never read
// a list twice. The transport follows the product's requests and fails the call at the first answer the old list would have failed
// at: a page read again that is not a 304 (in this world a runner's ETag
// changes only with a field the reaper reads: its busy, status or
// membership), or the product starting over before its first pass reached
// the last page (a page disagreed on total_count). Requests the old list
// would not have sent are answered without reaching the simulator.
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
	if call.failed {
		return nil, nil, fmt.Errorf("list runners for %s: %w: a page changed while later pages were read (byte-strict)", scope, fleet.ErrInconsistent)
	}
	return regs, c, err
}

// before is the Break's look at a list request of the call it follows,
// before it is sent: whether the old list would have sent it.
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

// notSent answers a request the old list would not have sent.
func notSent(req *http.Request) *http.Response {
	return &http.Response{
		Status: "500 Internal Server Error", StatusCode: http.StatusInternalServerError,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(`{"message":"not sent: the byte-strict list had already failed"}`)),
		Request: req,
	}
}
