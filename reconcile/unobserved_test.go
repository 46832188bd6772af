package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// A configured namespace that was not observed turns
// ghosts off, and only ghosts: pod verdicts from the namespaces that were
// observed still stand, and the classification says which namespace and why.
func TestClassifyUnobservedNamespaceTurnsGhostsOff(t *testing.T) {
	missing := []fleet.UnobservedNamespace{{Namespace: "arc-runnres", Reason: "namespace does not exist"}}
	pods := []fleet.Pod{
		running("acme-zombie"),
		running("acme-dead", func(p *fleet.Pod) {
			p.Phase = "Failed"
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
		}),
	}
	regs := []fleet.Registration{reg(1, "acme-zombie", false, false), reg(2, "acme-ghost", false, false), reg(3, "acme-dead", false, false)}
	cases := []struct {
		name       string
		unobserved []fleet.UnobservedNamespace
		want       map[string]fleet.Verdict
	}{
		{"every namespace observed: the offline registration nobody backs is a ghost", nil,
			map[string]fleet.Verdict{"acme-zombie": fleet.Zombie, "acme-dead": fleet.Terminal, "reg:acme-ghost": fleet.Ghost}},
		{"a namespace unobserved: no ghost, the pod verdicts stand", missing,
			map[string]fleet.Verdict{"acme-zombie": fleet.Zombie, "acme-dead": fleet.Terminal}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe(pods, regs...)
			obs.Unobserved = tc.unobserved
			c := Classify(obs, policy(), nil)
			assert.Equal(t, tc.want, verdicts(c))
			assert.Equal(t, tc.unobserved, c.Unobserved)
		})
	}
}

// A ghost mark is held, neither confirmed nor cleared, while a namespace is
// unobserved, as a skipped scope's marks are; other marks whose verdict is
// gone are cleared as usual.
func TestConfirmHoldsGhostMarksWhileANamespaceIsUnobserved(t *testing.T) {
	ghostKey := fleet.RegistrationMarkKey(org, 2)
	podKey := fleet.PodMarkKey("uid-acme-gone")
	old := map[string]fleet.Mark{
		ghostKey: {Verdict: fleet.Ghost, FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute), Scope: org, RunnerID: 2},
		podKey:   {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute), Scope: org},
	}
	cases := []struct {
		name       string
		unobserved []fleet.UnobservedNamespace
		held       []string
		cleared    []string
	}{
		{"every namespace observed: the ghost mark is cleared with the others", nil, nil, []string{podKey, ghostKey}},
		{"a namespace unobserved: the ghost mark is held", []fleet.UnobservedNamespace{{Namespace: "x", Reason: "r"}}, []string{ghostKey}, []string{podKey}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe(nil, reg(2, "acme-ghost", true, false))
			obs.Unobserved = tc.unobserved
			c := Confirm(at(t0), Classify(obs, policy(), nil), old, hold())
			assert.Equal(t, tc.held, c.Held)
			assert.Equal(t, tc.cleared, c.Cleared)
			for _, k := range tc.held {
				assert.Equal(t, old[k], c.Marks[k], "a held mark is untouched")
			}
		})
	}
}
