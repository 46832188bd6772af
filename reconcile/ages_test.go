package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Every age that gates an action holds on both clocks before it acts: the
// reference (the API server's Date) and this machine's. A lie on either
// may delay an action, never hurry it, and a lasting lie holds no leak for
// ever: where the clocks disagree, the verdict is made on either clock's
// word and must then hold for the whole limit from the reaper's own first
// sighting, on both clocks.
func TestAgesHoldOnBothClocks(t *testing.T) {
	const deadline = 10 * time.Minute // policy()'s registration deadline
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		name string
		// started is how long ago, in truth (this machine's clock), the
		// runner started; skew is how far the reference clock lies
		// ahead of the truth (behind, when negative).
		started, skew time.Duration
		// verdict: whether the first sweep marks it unregistered;
		// readyAfter: the truth's time from the first sighting after
		// which it may act (never, when zero).
		verdict    bool
		readyAfter time.Duration
	}{
		{name: "clocks agree, 11 minutes: confirm-after alone", started: 11 * time.Minute, verdict: true, readyAfter: 5 * time.Minute},
		{name: "clocks agree, 5 minutes: no verdict", started: 5 * time.Minute},
		{name: "the Date a year ahead, a runner that just started: the whole deadline in this reaper's sight", started: 5 * time.Second, skew: year, verdict: true, readyAfter: deadline},
		{name: "the Date a year behind for good, 11 minutes: judged on this machine's clock, the whole deadline in its sight", started: 11 * time.Minute, skew: -year, verdict: true, readyAfter: deadline},
		{name: "the Date an hour behind, a runner that just started: neither clock says 10 minutes, no verdict", started: 5 * time.Second, skew: -time.Hour},
		{name: "the Date an hour behind, 11 minutes: judged on this machine's clock, the whole deadline", started: 11 * time.Minute, skew: -time.Hour, verdict: true, readyAfter: deadline},
		{name: "the Date an hour ahead, 5 minutes: a verdict on its word, the whole deadline", started: 5 * time.Minute, skew: time.Hour, verdict: true, readyAfter: deadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := running("acme-new", func(p *fleet.Pod) {
				p.CreatedAt = fleet.StampOf(t0.Add(-tc.started))
				p.StartedAt = fleet.StampOf(t0.Add(-tc.started))
			})
			sweep := func(truth time.Duration, marks map[string]fleet.Mark) (Classification, Confirmation) {
				obs := observe([]fleet.Pod{pod})
				obs.Local = t0.Add(truth)
				obs.Now = obs.Local.Add(tc.skew)
				c := Classify(obs, policy(), marks)
				return c, Confirm(Clocks{Ref: obs.Now, Local: obs.Local}, c, marks, hold())
			}
			c, conf := sweep(0, nil)
			if !tc.verdict {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			assert.Equal(t, fleet.Unregistered, c.Findings[0].Verdict)
			assert.False(t, conf.Candidates[0].Ready)
			marks := conf.Marks
			for _, step := range []time.Duration{time.Minute, 5 * time.Minute, 9 * time.Minute, deadline, deadline + time.Minute} {
				_, later := sweep(step, marks)
				require.Len(t, later.Candidates, 1, "at %s", step)
				assert.Equal(t, step >= tc.readyAfter, later.Candidates[0].Ready, "at %s after the first sighting", step)
			}
		})
	}
}

// An EphemeralRunner stuck deleting is judged on both clocks too: a Date a
// year ahead makes a deletion a minute old look a year old, and the
// verdict must then hold for the whole limit in this reaper's sight.
func TestStuckDeletingAgeHoldsOnBothClocks(t *testing.T) {
	pol := arcPolicy() // 30 minutes
	e := er("arc-stuck", func(e *fleet.EphemeralRunner) {
		e.DeletingSince = fleet.StampOf(t0.Add(-time.Minute))
		e.Finalizers = []string{fleet.ARCRegistrationFinalizer}
		e.RunnerID = 5
	})
	obs := observe(nil)
	obs.EphemeralRunners = []fleet.EphemeralRunner{e}
	obs.Local, obs.Now = t0, t0.AddDate(1, 0, 0)
	c := Classify(obs, pol, nil)
	require.Len(t, c.Findings, 1)
	assert.Equal(t, fleet.ARCStuckDeleting, c.Findings[0].Verdict)
	assert.Equal(t, pol.ARCStuckDeletingAfter, c.Findings[0].MinHold)

	obs.Now = t0
	assert.Empty(t, Classify(obs, pol, nil).Findings, "clocks that agree: a minute is not 30")
}
