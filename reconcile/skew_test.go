package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// No clock skew may hold confirmation back or hurry it.

// A mark dated after now was written by a sweep whose clock ran ahead. It
// is counted from now: it neither acts at once nor waits out the skew, the
// ledger never holds last_seen before first_seen, and it is listed.
func TestConfirmMarkFromTheFuture(t *testing.T) {
	zombie := Classify(observe([]fleet.Pod{running("acme-a")}, reg(1, "acme-a", false, false)), policy(), nil)
	key := fleet.PodMarkKey("uid-acme-a")
	for _, tc := range []struct {
		name        string
		first, last time.Time
		future      bool
		ahead       time.Duration
		wantFirst   time.Time
	}{
		{"a year ahead", t0.AddDate(1, 0, 0), t0.AddDate(1, 0, 0), true, t0.AddDate(1, 0, 0).Sub(t0), t0},
		{"a minute ahead", t0.Add(time.Minute), t0.Add(time.Minute), true, time.Minute, t0},
		{"first seen long ago, last seen ahead: starts again on both clocks", t0.Add(-time.Hour), t0.Add(time.Hour), true, time.Hour, t0},
		{"no first sighting, last seen ahead: starts again", time.Time{}, t0.Add(time.Hour), true, time.Hour, t0},
		{"first seen ahead, never last seen", t0.Add(time.Hour), time.Time{}, true, time.Hour, t0},
		{"now exactly is not the future", t0, t0, false, 0, t0},
		{"a second ahead (another machine's clock) is not the future either", t0.Add(time.Second), t0.Add(time.Second), false, 0, t0.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: tc.first, FirstSeenLocal: tc.first, LastSeen: tc.last, Scope: org}}
			c := Confirm(at(t0), zombie, old, hold())
			require.Len(t, c.Candidates, 1)
			m := c.Marks[key]
			assert.Equal(t, tc.wantFirst, m.FirstSeen)
			assert.Equal(t, maxTime(t0, tc.wantFirst), m.LastSeen)
			assert.False(t, m.LastSeen.Before(m.FirstSeen), "last_seen is never before first_seen")
			if tc.future {
				assert.Equal(t, []FutureMark{{Key: key, FirstSeen: tc.first, LastSeen: tc.last, Ahead: tc.ahead}}, c.FromFuture)
			} else {
				assert.Empty(t, c.FromFuture)
			}
			// The ledger as it was loaded is not changed.
			assert.Equal(t, tc.first, old[key].FirstSeen)
			if tc.wantFirst.Equal(t0) {
				assert.False(t, c.Candidates[0].Ready, "a mark from the future never acts on the sweep that finds it")
				// Counted from now: it matures confirm-after later, not a year later.
				later := Confirm(at(t0.Add(hold().ConfirmAfter)), zombie, c.Marks, hold())
				require.Len(t, later.Candidates, 1)
				assert.True(t, later.Candidates[0].Ready, "the leak is not held for the length of the skew")
			}
		})
	}
}

// A mark from the future whose verdict no longer holds, or whose scope is
// skipped, is cleared or held as any mark is; a held one is held at now.
func TestConfirmHeldMarkFromTheFutureIsBroughtToNow(t *testing.T) {
	obs := observe([]fleet.Pod{running("acme-a")})
	obs.Lists[org] = ScopeList{Scope: fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}, Problem: "502"}
	c := Classify(obs, policy(), nil)
	key := fleet.PodMarkKey("uid-acme-a")
	ahead := t0.AddDate(1, 0, 0)
	out := Confirm(at(t0), c, map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: ahead, LastSeen: ahead, Scope: org}}, hold())
	assert.Equal(t, []string{key}, out.Held)
	assert.Equal(t, t0, out.Marks[key].FirstSeen)
	assert.Equal(t, t0, out.Marks[key].LastSeen)
	require.Len(t, out.FromFuture, 1)
}

// When a mark's job was last asked about orders the bounded job checks
// alone: a time from the future (one sweep under a lying Date) would put
// the runner behind every other for the length of the lie. It is brought
// back to now, without restarting the mark; a mark restarted for its own
// times keeps a past one.
func TestConfirmJobCheckedFromTheFutureIsBroughtToNow(t *testing.T) {
	obs := observe([]fleet.Pod{running("acme-a")})
	obs.Lists[org] = ScopeList{Scope: fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}, Problem: "502"}
	c := Classify(obs, policy(), nil)
	key := fleet.PodMarkKey("uid-acme-a")
	first, ahead, past := t0.Add(-time.Hour), t0.AddDate(10, 0, 0), t0.Add(-time.Minute)
	out := Confirm(at(t0), c, map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: first, FirstSeenLocal: first, LastSeen: first, Scope: org, JobCheckedAt: ahead}}, hold())
	assert.Equal(t, t0, out.Marks[key].JobCheckedAt)
	assert.Equal(t, first, out.Marks[key].FirstSeen, "the mark is not restarted")
	assert.Empty(t, out.FromFuture)

	out = Confirm(at(t0), c, map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: ahead, LastSeen: ahead, Scope: org, JobCheckedAt: past}}, hold())
	assert.Equal(t, past, out.Marks[key].JobCheckedAt)
}

// The registration deadline counts from the runner's start on its node's
// clock, bounded by the pod's creation on the API server's (the reference)
// and by now: a node clock behind never makes a runner look older than its
// pod, and one ahead never makes it look younger than zero.
func TestRegistrationDeadlineUnderNodeClockSkew(t *testing.T) {
	pol := policy() // deadline 10 minutes
	for _, tc := range []struct {
		name       string
		created    time.Time
		started    time.Time
		unregister bool
		future     bool
	}{
		{"node clock an hour behind: a runner started a minute ago is not past its deadline",
			t0.Add(-time.Minute), t0.Add(-time.Hour - time.Minute), false, false},
		{"node clock an hour behind, pod created 11 minutes ago: past its deadline by its creation",
			t0.Add(-11 * time.Minute), t0.Add(-71 * time.Minute), true, false},
		{"node clock an hour ahead, pod created a minute ago: not past its deadline",
			t0.Add(-time.Minute), t0.Add(time.Hour), false, true},
		{"node clock a year ahead, pod created an hour ago: past its deadline by its creation, not held for the skew",
			t0.Add(-time.Hour), t0.AddDate(1, 0, 0), true, true},
		{"healthy clocks: started 20 minutes ago", t0.Add(-30 * time.Minute), t0.Add(-20 * time.Minute), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := running("acme-a", func(p *fleet.Pod) { p.CreatedAt, p.StartedAt = fleet.StampOf(tc.created), fleet.StampOf(tc.started) })
			c := Classify(observe([]fleet.Pod{p}), pol, nil)
			if tc.unregister && tc.future {
				// Its true start is unknown: the verdict must hold for the
				// whole registration deadline from the first sighting, not
				// confirm-after alone.
				require.Len(t, c.Findings, 1)
				assert.Equal(t, pol.RegistrationDeadline, c.Findings[0].MinHold)
				first := Confirm(at(t0), c, nil, hold())
				afterConfirm := Confirm(at(t0.Add(hold().ConfirmAfter)), c, first.Marks, hold())
				assert.False(t, afterConfirm.Candidates[0].Ready, "confirm-after alone does not hurry it")
				afterDeadline := Confirm(at(t0.Add(pol.RegistrationDeadline)), c, first.Marks, hold())
				assert.True(t, afterDeadline.Candidates[0].Ready, "nor is it held for the length of the skew")
			}
			if tc.unregister {
				assert.Equal(t, map[string]fleet.Verdict{"acme-a": fleet.Unregistered}, verdicts(c))
			} else {
				assert.Empty(t, verdicts(c))
			}
			if tc.future {
				assert.Equal(t, []FutureStart{{Namespace: "runners", Pod: "acme-a", Ahead: tc.started.Sub(t0)}}, c.FutureStarts)
			} else {
				assert.Empty(t, c.FutureStarts)
			}
		})
	}
}

// A mark is ready only when both clocks say its hold has passed. A Date
// that jumps (a proxy, one API server replica off by an hour) moves the
// reference clock alone; a machine whose clock is off moves the local one
// alone; neither alone hurries a mark, and either alone may only hold it.
func TestConfirmNeedsBothClocks(t *testing.T) {
	zombie := Classify(observe([]fleet.Pod{running("acme-a")}, reg(1, "acme-a", false, false)), policy(), nil)
	key := fleet.PodMarkKey("uid-acme-a")
	// Marked by a healthy sweep a minute ago; confirm-after is 5 minutes.
	marked := t0.Add(-time.Minute)
	old := map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: marked, FirstSeenLocal: marked, LastSeen: marked, Scope: org}}
	for _, tc := range []struct {
		name  string
		now   Clocks
		ready bool
		// restarts: the clocks disagree about the mark's age by more
		// than ClockDrift, so one lies, and the mark starts again.
		restarts bool
	}{
		{"both a minute on: waits", Clocks{Ref: t0, Local: t0}, false, false},
		{"both ten minutes on: acts", Clocks{Ref: t0.Add(9 * time.Minute), Local: t0.Add(9 * time.Minute)}, true, false},
		{"a Date from year 9999, local a minute on: starts again", Clocks{Ref: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Local: t0}, false, true},
		{"a replica an hour ahead, local a minute on: starts again", Clocks{Ref: t0.Add(time.Hour), Local: t0}, false, true},
		{"this machine an hour ahead, the API server a minute on: starts again", Clocks{Ref: t0, Local: t0.Add(time.Hour)}, false, true},
		{"this machine 7 minutes behind, reference ten minutes on: starts again", Clocks{Ref: t0.Add(9 * time.Minute), Local: t0.Add(2 * time.Minute)}, false, true},
		{"the two 10 s apart (two nodes' clocks), ten minutes on: acts", Clocks{Ref: t0.Add(9 * time.Minute), Local: t0.Add(9*time.Minute + 10*time.Second)}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Confirm(tc.now, zombie, old, hold())
			require.Len(t, c.Candidates, 1)
			assert.Equal(t, tc.ready, c.Candidates[0].Ready)
			if tc.restarts {
				assert.Equal(t, []string{key}, c.Disagreed)
				assert.Equal(t, tc.now.Ref, c.Marks[key].FirstSeen)
				assert.Equal(t, tc.now.Local, c.Marks[key].FirstSeenLocal)
			} else {
				assert.Empty(t, c.Disagreed)
				assert.Equal(t, marked, c.Marks[key].FirstSeen, "an old mark keeps its first sighting")
			}
		})
	}

	// A backward lie on the local
	// clock at the first sighting, then a forward lie on the reference
	// clock at maturity. Each clock alone calls the mark old; the moved
	// offset between them says one lied, and the mark starts again.
	liedFirst := Confirm(Clocks{Ref: t0, Local: t0.Add(-time.Hour)}, zombie, nil, hold())
	lied := Confirm(Clocks{Ref: t0.Add(2*time.Minute + 25*time.Minute), Local: t0.Add(2 * time.Minute)}, zombie, liedFirst.Marks, hold())
	require.Len(t, lied.Candidates, 1)
	assert.False(t, lied.Candidates[0].Ready, "two lies on two clocks in two sweeps do not hurry it")
	assert.Equal(t, []string{key}, lied.Disagreed)

	// A Date that jumped back when the mark was first seen: the next
	// honest sweep finds the clocks' offset moved and starts it again.
	jumpedBack := Confirm(Clocks{Ref: t0.Add(-time.Hour), Local: t0}, zombie, nil, hold())
	honest := Confirm(Clocks{Ref: t0.Add(time.Minute), Local: t0.Add(time.Minute)}, zombie, jumpedBack.Marks, hold())
	require.Len(t, honest.Candidates, 1)
	assert.False(t, honest.Candidates[0].Ready, "a mark dated an hour back by a bad Date still waits")
	assert.Equal(t, t0.Add(6*time.Minute), honest.Candidates[0].MatureAt, "it matures a whole hold after it started again")
	// Where only one clock is known to be off (the local one, an hour
	// behind when the mark was first seen, and still), the offset holds
	// and the mark matures when the later clock says.
	behind := Confirm(Clocks{Ref: t0, Local: t0.Add(-time.Hour)}, zombie, nil, hold())
	still := Confirm(Clocks{Ref: t0.Add(time.Minute), Local: t0.Add(time.Minute - time.Hour)}, zombie, behind.Marks, hold())
	assert.Empty(t, still.Disagreed)
	assert.Equal(t, t0.Add(5*time.Minute), still.Candidates[0].MatureAt)

	// A ledger written before the local clock was kept: the local hold
	// starts at the next sweep, once.
	legacy := map[string]fleet.Mark{key: {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute), Scope: org}}
	first := Confirm(at(t0), zombie, legacy, hold())
	require.Len(t, first.Candidates, 1)
	assert.False(t, first.Candidates[0].Ready)
	assert.Equal(t, t0, first.Marks[key].FirstSeenLocal)
	assert.Equal(t, t0, first.Marks[key].FirstSeen, "it starts again on both clocks")
	later := Confirm(at(t0.Add(5*time.Minute)), zombie, first.Marks, hold())
	assert.True(t, later.Candidates[0].Ready)
}
