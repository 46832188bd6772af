package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func TestConfirm(t *testing.T) {
	zombie := Classify(observe([]fleet.Pod{running("acme-a")}, reg(1, "acme-a", false, false)), policy(), nil)
	stamped := Classify(observe([]fleet.Pod{running("acme-a", func(p *fleet.Pod) { p.Stamped = true })}, reg(1, "acme-a", true, false)), policy(), nil)
	key := fleet.PodMarkKey("uid-acme-a")
	mark := func(v fleet.Verdict, age time.Duration) map[string]fleet.Mark {
		return map[string]fleet.Mark{key: {Verdict: v, FirstSeen: t0.Add(-age), FirstSeenLocal: t0.Add(-age), LastSeen: t0.Add(-age), Scope: org}}
	}
	cases := []struct {
		name      string
		class     Classification
		old       map[string]fleet.Mark
		ready     bool
		firstSeen time.Time
	}{
		{"first sight marks and waits", zombie, nil, false, t0},
		{"held for less than confirm-after waits", zombie, mark(fleet.Zombie, 4*time.Minute), false, t0.Add(-4 * time.Minute)},
		{"held for exactly confirm-after acts", zombie, mark(fleet.Zombie, 5*time.Minute), true, t0.Add(-5 * time.Minute)},
		{"a mark of another verdict starts over", zombie, mark(fleet.Unregistered, time.Hour), false, t0},
		{"orphan-stamped waits for the stamp's max age", stamped, mark(fleet.OrphanStamped, 6*time.Minute), false, t0.Add(-6 * time.Minute)},
		{"orphan-stamped acts after the stamp's max age", stamped, mark(fleet.OrphanStamped, 10*time.Minute), true, t0.Add(-10 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Confirm(at(t0), tc.class, tc.old, hold())
			require.Len(t, c.Candidates, 1)
			assert.Equal(t, tc.ready, c.Candidates[0].Ready)
			assert.Equal(t, tc.firstSeen, c.Marks[key].FirstSeen)
			assert.Equal(t, t0, c.Marks[key].LastSeen)
			assert.Equal(t, org, c.Marks[key].Scope)
		})
	}
}

func TestConfirmZeroHoldStillNeedsTwoSweeps(t *testing.T) {
	c := Confirm(at(t0), Classify(observe([]fleet.Pod{running("acme-a")}, reg(1, "acme-a", false, false)), policy(), nil), nil, Hold{})
	require.Len(t, c.Candidates, 1)
	assert.False(t, c.Candidates[0].Ready, "a GitHub-based verdict never acts on the sweep that first saw it")
}

func TestConfirmTerminalNeedsNoMark(t *testing.T) {
	p := running("acme-a", func(p *fleet.Pod) {
		p.Phase = "Succeeded"
		p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{Reason: "Completed"}}
	})
	c := Confirm(at(t0), Classify(observe([]fleet.Pod{p}), policy(), nil), nil, hold())
	require.Len(t, c.Candidates, 1)
	assert.True(t, c.Candidates[0].Ready)
	assert.Empty(t, c.Marks)
}

func TestConfirmClearsMarksThatNoLongerHold(t *testing.T) {
	old := map[string]fleet.Mark{fleet.PodMarkKey("uid-acme-a"): {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour), Scope: org}}
	// The registration came back online: the verdict no longer holds.
	c := Confirm(at(t0), Classify(observe([]fleet.Pod{running("acme-a")}, reg(1, "acme-a", true, false)), policy(), old), old, hold())
	assert.Empty(t, c.Candidates)
	assert.Empty(t, c.Marks)
	assert.Equal(t, []string{fleet.PodMarkKey("uid-acme-a")}, c.Cleared)
}

// Safety rule 1: marks in a skipped scope are neither confirmed nor cleared.
func TestSafetyRule1MarksHeldInSkippedScope(t *testing.T) {
	old := map[string]fleet.Mark{
		fleet.PodMarkKey("uid-acme-a"):    {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute), Scope: org},
		fleet.RegistrationMarkKey(org, 9): {Verdict: fleet.Ghost, FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute), Scope: org},
	}
	obs := observe([]fleet.Pod{running("acme-a")})
	l := obs.Lists[org]
	l.Complete, l.Problem = false, "list failed"
	obs.Lists[org] = l
	c := Confirm(at(t0), Classify(obs, policy(), old), old, hold())
	assert.Empty(t, c.Candidates, "nothing confirmed")
	assert.Equal(t, old, c.Marks, "nothing cleared or changed")
	assert.Empty(t, c.Cleared)
	assert.Len(t, c.Held, 2)
}

// Safety rule 4: a large share of a scope's pods turning suspect at once is
// reported, and still waits for confirmation.
func TestSafetyRule4MassSuspicion(t *testing.T) {
	var pods []fleet.Pod
	var regs []fleet.Registration
	for i, n := range []string{"acme-1", "acme-2", "acme-3", "acme-4", "acme-5", "acme-6"} {
		pods = append(pods, running(n))
		regs = append(regs, reg(int64(i+1), n, i >= 4, false)) // four offline, two online
	}
	c := Confirm(at(t0), Classify(observe(pods, regs...), policy(), nil), nil, hold())
	require.Len(t, c.MassSuspicion, 1)
	assert.Equal(t, Suspicion{ScopeKey: org, NewlySuspect: 4, Pods: 6}, c.MassSuspicion[0])
	for _, cand := range c.Candidates {
		assert.False(t, cand.Ready, "mass suspicion never skips confirmation")
	}

	// Below the share, or below the minimum count: quiet.
	h := hold()
	h.MassSuspicionFraction = 0.9
	assert.Empty(t, Confirm(at(t0), Classify(observe(pods, regs...), policy(), nil), nil, h).MassSuspicion)
	h = hold()
	h.MassSuspicionMin = 5
	assert.Empty(t, Confirm(at(t0), Classify(observe(pods, regs...), policy(), nil), nil, h).MassSuspicion)
	// Suspects already marked are not new: no alarm on the confirming sweep.
	marked := Confirm(at(t0), Classify(observe(pods, regs...), policy(), nil), nil, hold()).Marks
	later := t0.Add(5 * time.Minute)
	obs := observe(pods, regs...)
	obs.Now = later
	assert.Empty(t, Confirm(at(later), Classify(obs, policy(), marked), marked, hold()).MassSuspicion)
}
