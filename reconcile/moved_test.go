package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// TestMovedListServesPresence: a list that moved while it was read gives
// the same verdicts as one that did not. What it lists counts as listed
// (an offline registration is a zombie, a busy one protects its pod, an
// offline one no pod backs is a ghost), and no scope is skipped for it;
// but every verdict, and every release of ARC's registration finalizer,
// that rests on a runner not being listed carries AbsenceUnproven instead
// of RegistrationAbsent, for the choke point to prove by name.
func TestMovedListServesPresence(t *testing.T) {
	type want struct {
		verdict          fleet.Verdict
		withRegistration bool
		absent, unproven bool
	}
	for _, tc := range []struct {
		name  string
		moved bool
	}{
		{name: "complete"},
		{name: "moved", moved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe([]fleet.Pod{
				running("acme-zombie"),
				running("acme-busy"),
				running("acme-healthy"),
				running("acme-unreg"),
				running("acme-gone", func(p *fleet.Pod) { p.RunnerID = 7 }),
				running("acme-dead", func(p *fleet.Pod) {
					p.RunnerID = 8
					p.Phase = "Failed"
					p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
				}),
			},
				reg(1, "acme-zombie", false, false),
				reg(2, "acme-busy", false, true),
				reg(3, "acme-healthy", true, false),
				reg(9, "acme-ghost", false, false),
			)
			obs.EphemeralRunners = []fleet.EphemeralRunner{er("acme-podless", func(e *fleet.EphemeralRunner) { e.RunnerID = 10 })}
			if tc.moved {
				l := obs.Lists[org]
				l.Complete, l.Moved = false, "page 2 reports total_count 6, page 1 reported 5"
				obs.Lists[org] = l
			}
			c := Classify(obs, arcPolicy(), nil)
			assert.Empty(t, c.Skipped, "a list that moved is no skip")
			assert.Equal(t, 1, c.Protected, "the busy registration protects its pod")
			got := map[string]want{}
			for _, f := range c.Findings {
				var name string
				switch {
				case f.EphemeralRunner != nil:
					name = f.EphemeralRunner.Name
				case f.Pod != nil:
					name = f.Pod.Name
				default:
					name = "reg:" + f.Registration.Name
				}
				got[name] = want{f.Verdict, f.Registration != nil, f.RegistrationAbsent, f.AbsenceUnproven}
			}
			absent, unproven := !tc.moved, tc.moved
			require.Equal(t, map[string]want{
				"acme-zombie":    {fleet.Zombie, true, false, false},
				"reg:acme-ghost": {fleet.Ghost, true, false, false},
				"acme-unreg":     {fleet.Unregistered, false, false, unproven},
				"acme-gone":      {fleet.Zombie, false, absent, unproven},
				"acme-dead":      {fleet.Terminal, false, absent, unproven},
				"acme-podless":   {fleet.ARCPodless, false, absent, unproven},
			}, got)
		})
	}
}
