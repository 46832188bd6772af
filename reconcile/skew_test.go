package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 16 §4: no clock skew may hold confirmation back or hurry it.

// A mark dated after now was written by a sweep whose clock ran ahead. It
// is counted from now: it neither acts at once nor waits out the skew, the
// ledger never holds last_seen before first_seen, and it is listed.
func TestConfirmMarkFromTheFuture(t *testing.T) {
	zombie := Classify(observe([]Pod{running("acme-a")}, reg(1, "acme-a", false, false)), policy(), nil)
	key := PodMarkKey("uid-acme-a")
	for _, tc := range []struct {
		name        string
		first, last time.Time
		future      bool
		wantFirst   time.Time
	}{
		{"a year ahead", t0.AddDate(1, 0, 0), t0.AddDate(1, 0, 0), true, t0},
		{"a minute ahead", t0.Add(time.Minute), t0.Add(time.Minute), true, t0},
		{"first seen long ago, last seen ahead", t0.Add(-time.Hour), t0.Add(time.Hour), true, t0.Add(-time.Hour)},
		{"now exactly is not the future", t0, t0, false, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := map[string]Mark{key: {Verdict: Zombie, FirstSeen: tc.first, LastSeen: tc.last, Scope: org}}
			c := Confirm(t0, zombie, old, hold())
			require.Len(t, c.Candidates, 1)
			m := c.Marks[key]
			assert.Equal(t, tc.wantFirst, m.FirstSeen)
			assert.Equal(t, t0, m.LastSeen)
			assert.False(t, m.LastSeen.Before(m.FirstSeen), "last_seen is never before first_seen")
			if tc.future {
				assert.Equal(t, []FutureMark{{Key: key, FirstSeen: tc.first, LastSeen: tc.last}}, c.FromFuture)
			} else {
				assert.Empty(t, c.FromFuture)
			}
			// The ledger as it was loaded is not changed.
			assert.Equal(t, tc.first, old[key].FirstSeen)
			if tc.wantFirst.Equal(t0) {
				assert.False(t, c.Candidates[0].Ready, "a mark from the future never acts on the sweep that finds it")
				// Counted from now: it matures confirm-after later, not a year later.
				later := Confirm(t0.Add(hold().ConfirmAfter), zombie, c.Marks, hold())
				require.Len(t, later.Candidates, 1)
				assert.True(t, later.Candidates[0].Ready, "the leak is not held for the length of the skew")
			}
		})
	}
}

// A mark from the future whose verdict no longer holds, or whose scope is
// skipped, is cleared or held as any mark is; a held one is held at now.
func TestConfirmHeldMarkFromTheFutureIsBroughtToNow(t *testing.T) {
	obs := observe([]Pod{running("acme-a")})
	obs.Lists[org] = ScopeList{Scope: Scope{Kind: OrgScope, Name: "acme"}, Problem: "502"}
	c := Classify(obs, policy(), nil)
	key := PodMarkKey("uid-acme-a")
	ahead := t0.AddDate(1, 0, 0)
	out := Confirm(t0, c, map[string]Mark{key: {Verdict: Zombie, FirstSeen: ahead, LastSeen: ahead, Scope: org}}, hold())
	assert.Equal(t, []string{key}, out.Held)
	assert.Equal(t, t0, out.Marks[key].FirstSeen)
	assert.Equal(t, t0, out.Marks[key].LastSeen)
	require.Len(t, out.FromFuture, 1)
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
		{"node clock an hour ahead: started in the future, counted as now",
			t0.Add(-time.Hour), t0.Add(time.Hour), false, true},
		{"healthy clocks: started 20 minutes ago", t0.Add(-30 * time.Minute), t0.Add(-20 * time.Minute), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := running("acme-a", func(p *Pod) { p.CreatedAt, p.StartedAt = tc.created, tc.started })
			c := Classify(observe([]Pod{p}), pol, nil)
			if tc.unregister {
				assert.Equal(t, map[string]Verdict{"acme-a": Unregistered}, verdicts(c))
			} else {
				assert.Empty(t, verdicts(c))
			}
			if tc.future {
				assert.Equal(t, []FutureStart{{Namespace: "runners", Pod: "acme-a", Ahead: time.Hour}}, c.FutureStarts)
			} else {
				assert.Empty(t, c.FutureStarts)
			}
		})
	}
}
