package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
)

var (
	brokenSet  = fleet.GroupOf(fleet.GroupScaleSet, "runners", "broken")
	healthySet = fleet.GroupOf(fleet.GroupScaleSet, "runners", "healthy")
)

// objectEvents keeps the loop Events the sweep records.
type objectEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *objectEvents) RecordObjectEvent(_ context.Context, ns string, o fleet.Owner, reason, msg string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, fmt.Sprintf("%s %s %s/%s %s: %s", o.APIVersion, o.Kind, ns, o.Name, reason, msg))
	return nil
}

func (e *objectEvents) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// outdated is a runner pod of g whose runner exited 7: ARC's code for a
// runner version GitHub no longer accepts, which every replacement made
// from the same template repeats.
func outdated(name string, g fleet.Group) fleet.Pod {
	return fakePod(name, func(p *fleet.Pod) {
		p.Phase, p.Group = "Failed", g
		p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 7, Reason: "Error"}}
	})
}

// unregisteredIn is a runner pod of g that has run for an hour and never
// appeared on GitHub.
func unregisteredIn(name string, g fleet.Group) fleet.Pod {
	return fakePod(name, func(p *fleet.Pod) { p.Group = g })
}

// loopSweeper is the world's sweeper with a loop threshold of three in
// 30 minutes, its Events kept, its log lines in buf.
func (w *world) loopSweeper(ev *objectEvents, buf *bytes.Buffer) *sweep.Sweeper {
	s := w.sweeper()
	s.Loops = loops.Policy{Threshold: 3, Window: 30 * time.Minute}
	s.Events = ev
	s.Log = slog.New(slog.NewJSONHandler(buf, nil))
	return s
}

// warnings are the log lines of buf with that message.
func warnings(t *testing.T, buf *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A template whose every runner exits 7 is reaped each sweep as its pods
// come back; at the third reap within the window the loop is reported:
// a warning with the group, count, window, fingerprint and fix, and an
// Event on the AutoscalingRunnerSet. The healthy group's pods, reaped as
// often with clean exits of different kinds, are no loop. A dry run then
// reports the loop the ledger holds and adds nothing to it.
func TestReapLoopIsReportedWithinThreshold(t *testing.T) {
	w := newWorld()
	ev := &objectEvents{}
	healthy := []fleet.Pod{
		outdated("healthy-0", healthySet),
		fakePod("healthy-1", func(p *fleet.Pod) {
			p.Phase, p.Group = "Succeeded", healthySet
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 0, Reason: "Completed"}}
		}),
		fakePod("healthy-2", func(p *fleet.Pod) {
			p.Phase, p.Group = "Failed", healthySet
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 137, Reason: "OOMKilled"}}
		}),
	}
	for i := range 3 {
		var buf bytes.Buffer
		w.now = t0.Add(time.Duration(i) * 5 * time.Minute)
		w.kube.pods = append(w.kube.pods, outdated(fmt.Sprintf("broken-%d", i), brokenSet), healthy[i])
		res := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.Act)
		require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
		assert.Equal(t, fleet.Deleted, results(res)[fleet.PodMarkKey(fmt.Sprintf("uid-broken-%d", i))], "terminal pods still go")
		assert.Equal(t, fleet.Deleted, results(res)[fleet.PodMarkKey(fmt.Sprintf("uid-healthy-%d", i))])
		if i < 2 {
			assert.Empty(t, res.Loops, "sweep %d: %d reaps are no loop yet", i, i+1)
			assert.Empty(t, warnings(t, &buf, "reap loop"))
			assert.Empty(t, ev.all())
			continue
		}
		require.Len(t, res.Loops, 1, "the third reap within the window is a loop")
		l := res.Loops[0]
		assert.Equal(t, brokenSet, l.Group)
		assert.Equal(t, 3, l.Count)
		assert.Equal(t, "outdated", l.Fingerprint)
		ws := warnings(t, &buf, "reap loop")
		require.Len(t, ws, 1, buf.String())
		assert.Equal(t, "AutoscalingRunnerSet runners/broken", ws[0]["group"])
		assert.EqualValues(t, 3, ws[0]["count"])
		assert.EqualValues(t, 1800, ws[0]["window_seconds"])
		assert.Equal(t, "outdated", ws[0]["fingerprint"])
		assert.Equal(t, "runner version deprecated: update the runner image", ws[0]["fix"])
		assert.Equal(t, "WARN", ws[0]["level"])
		require.Len(t, ev.all(), 1)
		assert.Equal(t, "actions.github.com/v1alpha1 AutoscalingRunnerSet runners/broken RunnerReapLoop: runner-reaper: reap loop: 3 runners of AutoscalingRunnerSet runners/broken reaped within 30m0s, each outdated: runner version deprecated: update the runner image", ev.all()[0])
	}

	l, _, err := w.ledger.Load(context.Background())
	require.NoError(t, err)
	require.Len(t, l.Loops[brokenSet.String()], 3)
	var buf bytes.Buffer
	w.now = t0.Add(16 * time.Minute)
	w.kube.pods = append(w.kube.pods, outdated("broken-dry", brokenSet))
	dry := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.DryRun)
	require.Len(t, dry.Loops, 1, "a dry run reports the loop the ledger holds")
	assert.Equal(t, 3, dry.Loops[0].Count, "and adds nothing to it")
	assert.Len(t, ev.all(), 1, "a dry run records no Event")
	again, _, err := w.ledger.Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, l.Loops, again.Loops)

	// Once the window has passed with no new reap, the loop is over.
	w.kube.pods = nil
	w.now = t0.Add(45 * time.Minute)
	buf.Reset()
	later := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.Act)
	assert.Empty(t, later.Loops)
	assert.Empty(t, warnings(t, &buf, "reap loop"))
	gone, _, err := w.ledger.Load(context.Background())
	require.NoError(t, err)
	assert.Empty(t, gone.Loops, "what aged out of the window is not kept")
}

// While a group loops, of its runners whose verdict needs confirmation
// one acts a sweep and the others are loop-held with their marks kept;
// another group's runners, confirmed alike, are not delayed.
func TestReapLoopBacksOffConfirmedVerdicts(t *testing.T) {
	w := newWorld()
	var seed []state.LoopEntry
	for i := range 3 {
		seed = append(seed, state.LoopEntry{At: t0.Add(time.Duration(i-3) * time.Minute), Fingerprint: "unregistered", Verdict: "unregistered"})
	}
	_, err := w.ledger.Save(context.Background(), state.Ledger{Loops: map[string][]state.LoopEntry{brokenSet.String(): seed}}, "")
	require.NoError(t, err)
	w.kube.pods = append(w.kube.pods,
		unregisteredIn("broken-a", brokenSet), unregisteredIn("broken-b", brokenSet), unregisteredIn("broken-c", brokenSet),
		unregisteredIn("healthy-a", healthySet), unregisteredIn("healthy-b", healthySet),
		outdated("broken-dead", brokenSet))
	ev := &objectEvents{}
	var buf bytes.Buffer
	first := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.Act)
	require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
	require.Len(t, first.Loops, 1, "the loop the ledger holds, and the terminal pod's reap")
	assert.Equal(t, fleet.Deleted, results(first)[fleet.PodMarkKey("uid-broken-dead")], "a terminal pod of a looping group still goes")

	w.now = t0.Add(6 * time.Minute)
	buf.Reset()
	res := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.Act)
	require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
	got := results(res)
	var deleted, held []string
	for _, n := range []string{"broken-a", "broken-b", "broken-c"} {
		switch got[fleet.PodMarkKey("uid-"+n)] {
		case fleet.Deleted:
			deleted = append(deleted, n)
		case fleet.LoopHeld:
			held = append(held, n)
		}
	}
	assert.Equal(t, []string{"broken-a"}, deleted, "one of the looping group a sweep, the oldest first")
	assert.Equal(t, []string{"broken-b", "broken-c"}, held)
	assert.Equal(t, fleet.Deleted, got[fleet.PodMarkKey("uid-healthy-a")], "another group is not delayed")
	assert.Equal(t, fleet.Deleted, got[fleet.PodMarkKey("uid-healthy-b")])
	marks := w.marks(t)
	assert.Contains(t, marks, fleet.PodMarkKey("uid-broken-b"), "a loop-held runner keeps its mark")
	assert.NotContains(t, marks, fleet.PodMarkKey("uid-broken-a"))

	w.now = t0.Add(7 * time.Minute)
	next := w.loopSweeper(ev, &buf).Run(context.Background(), sweep.Act)
	assert.Equal(t, fleet.Deleted, results(next)[fleet.PodMarkKey("uid-broken-b")], "the next sweep takes the next one")
	assert.Equal(t, fleet.LoopHeld, results(next)[fleet.PodMarkKey("uid-broken-c")])
}

// A sweep whose save after acting loses the race to another sweep's save
// adds its actions to the window that sweep saved, as it adds its record:
// the window is every sweep's actions, or two overlapping sweeps would
// each hide the other's share of a loop.
func TestOverlappingSaveAfterActingKeepsTheLoopWindow(t *testing.T) {
	for name, fresh := range ledgers() {
		t.Run(name, func(t *testing.T) {
			open := fresh(t)
			w := newWorld()
			w.ledger = open()
			prior := state.LoopEntry{At: t0.Add(-time.Minute), Fingerprint: "crash", Verdict: "terminal"}
			_, err := w.ledger.Save(context.Background(), state.Ledger{Loops: map[string][]state.LoopEntry{healthySet.String(): {prior}}}, "")
			require.NoError(t, err)
			w.kube.pods = append(w.kube.pods, outdated("broken-0", brokenSet), outdated("broken-1", brokenSet))

			a := w.loopSweeper(&objectEvents{}, &bytes.Buffer{})
			a.Ledger = &beforeSave{Store: open(), n: 2, hook: func() {
				// Another sweep saves between A's two saves.
				other := open()
				l, v, err := other.Load(context.Background())
				require.NoError(t, err)
				l.Loops[healthySet.String()] = append(l.Loops[healthySet.String()], state.LoopEntry{At: t0, Fingerprint: "crash", Verdict: "terminal"})
				_, err = other.Save(context.Background(), l, v)
				require.NoError(t, err)
			}}
			res := a.Run(context.Background(), sweep.Act)
			require.NoError(t, res.Err)
			require.Equal(t, 3, a.Ledger.(*beforeSave).saves, "A saved before acting, after acting (lost), and again over the other sweep's save")

			l, _, err := open().Load(context.Background())
			require.NoError(t, err)
			want := state.LoopEntry{At: t0, Fingerprint: "outdated", Verdict: "terminal"}
			assert.Equal(t, []state.LoopEntry{want, want}, l.Loops[brokenSet.String()], "A's actions are in the window")
			assert.Equal(t, []state.LoopEntry{prior, {At: t0, Fingerprint: "crash", Verdict: "terminal"}}, l.Loops[healthySet.String()], "and the other sweep's stay")
		})
	}
}

// A sweep that began minutes before the one that won the race merges its
// actions into that sweep's window pruned at the clock as it reads when
// it saves, not as it read when it began: the winner's actions, dated
// after this sweep's start, are not taken for a lying clock's.
func TestMergedLoopWindowKeepsALaterSweepsActions(t *testing.T) {
	tests := []struct {
		name  string
		later time.Duration
	}{
		{"the winner began a minute later", time.Minute},
		{"the winner began two minutes later", 2 * time.Minute},
		{"the winner began ten minutes later", 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open := ledgers()["file"]
			store := open(t)
			w := newWorld()
			w.ledger = store()
			w.kube.pods = append(w.kube.pods, outdated("broken-0", brokenSet))
			winner := state.LoopEntry{At: t0.Add(tt.later), Fingerprint: "crash", Verdict: "terminal"}
			a := w.loopSweeper(&objectEvents{}, &bytes.Buffer{})
			a.Ledger = &beforeSave{Store: store(), n: 2, hook: func() {
				// Another sweep, begun later, saves its actions
				// between A's two saves; A's clock has moved on as
				// much by the time it saves again.
				w.now = t0.Add(tt.later)
				other := store()
				l, v, err := other.Load(context.Background())
				require.NoError(t, err)
				l.Loops = map[string][]state.LoopEntry{healthySet.String(): {winner}}
				_, err = other.Save(context.Background(), l, v)
				require.NoError(t, err)
			}}
			res := a.Run(context.Background(), sweep.Act)
			require.NoError(t, res.Err)
			require.Equal(t, 3, a.Ledger.(*beforeSave).saves)

			l, _, err := store().Load(context.Background())
			require.NoError(t, err)
			assert.Equal(t, []state.LoopEntry{winner}, l.Loops[healthySet.String()], "the winner's action stays")
			assert.Equal(t, []state.LoopEntry{{At: t0, Fingerprint: "outdated", Verdict: "terminal"}}, l.Loops[brokenSet.String()], "A's is added")
		})
	}
}

// eventsAfterSave records, for each loop Event, whether the ledger already
// held the sweep's actions when it was asked for, and the deadline it was
// asked under.
type eventsAfterSave struct {
	ledger    state.Store
	groups    []string
	saved     []int
	deadlines []time.Time
}

func (e *eventsAfterSave) RecordObjectEvent(ctx context.Context, ns string, o fleet.Owner, _, _ string) error {
	l, _, err := e.ledger.Load(ctx)
	if err != nil {
		return err
	}
	e.groups = append(e.groups, ns+"/"+o.Name)
	e.saved = append(e.saved, len(l.Loops[fleet.GroupOf(fleet.GroupScaleSet, ns, o.Name).String()]))
	d, _ := ctx.Deadline()
	e.deadlines = append(e.deadlines, d)
	return nil
}

// The loop Events come after the save after acting, which must not wait on
// an optional request, and share one budget that stops short of the time
// the report needs; a loop is said by an Event when it first stands or
// grows, not on every sweep it stands.
func TestLoopEventsAfterTheSaveWithinOneBudget(t *testing.T) {
	sets := []fleet.Group{
		fleet.GroupOf(fleet.GroupScaleSet, "runners", "a"),
		fleet.GroupOf(fleet.GroupScaleSet, "runners", "b"),
		fleet.GroupOf(fleet.GroupScaleSet, "runners", "c"),
	}
	tests := []struct {
		name string
		// prior is each group's outdated reaps in the window before the
		// sweep; each group then has one more.
		prior  int
		events int
	}{
		{"three loops appear: three Events", 2, 3},
		{"three loops grow: three Events", 3, 3},
		{"three loops stand at the window's cap, not grown: none", 6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			window := map[string][]state.LoopEntry{}
			for i, g := range sets {
				for j := range tt.prior {
					window[g.String()] = append(window[g.String()], state.LoopEntry{At: t0.Add(-time.Duration(j+1) * time.Minute), Fingerprint: "outdated", Verdict: "terminal"})
				}
				w.kube.pods = append(w.kube.pods, outdated(fmt.Sprintf("pod-%d", i), g))
			}
			_, err := w.ledger.Save(context.Background(), state.Ledger{Loops: window}, "")
			require.NoError(t, err)
			ev := &eventsAfterSave{ledger: w.ledger}
			s := w.loopSweeper(nil, &bytes.Buffer{})
			s.Events = ev
			s.Timeout = time.Hour
			res := s.Run(context.Background(), sweep.Act)
			require.NoError(t, res.Err)
			require.Len(t, res.Loops, 3)

			require.Len(t, ev.groups, tt.events)
			for i := range ev.groups {
				assert.Equal(t, tt.prior+1, ev.saved[i], "the Event on %s came after the save", ev.groups[i])
				assert.Equal(t, ev.deadlines[0], ev.deadlines[i], "one budget for all of them")
				assert.False(t, ev.deadlines[i].IsZero())
			}
		})
	}
}
