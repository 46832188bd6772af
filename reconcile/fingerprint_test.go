package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// One case per row of docs/design.md's exit fingerprint table, and the lastState
// fallback.
func TestFingerprintTable(t *testing.T) {
	term := func(code, signal int32, reason string) *fleet.Termination {
		return &fleet.Termination{ExitCode: code, Signal: signal, Reason: reason}
	}
	cases := []struct {
		name     string
		c        fleet.Container
		class    ExitClass
		fromLast bool
	}{
		{"0 Completed is clean", fleet.Container{Found: true, Terminated: term(0, 0, "Completed")}, ExitClean, false},
		{"137 OOMKilled is the host cgroup", fleet.Container{Found: true, Terminated: term(137, 0, "OOMKilled")}, ExitOOMHost, false},
		{"137 Error is a SIGKILL from inside", fleet.Container{Found: true, Terminated: term(137, 0, "Error")}, ExitSIGKILL, false},
		{"143 is SIGTERM", fleet.Container{Found: true, Terminated: term(143, 0, "Error")}, ExitSIGTERM, false},
		{"signal 15 is SIGTERM whatever the code", fleet.Container{Found: true, Terminated: term(2, 15, "Error")}, ExitSIGTERM, false},
		{"7 is ARC's outdated runner", fleet.Container{Found: true, Terminated: term(7, 0, "Error")}, ExitOutdated, false},
		{"other Error is a crash", fleet.Container{Found: true, Terminated: term(139, 0, "Error")}, ExitCrash, false},
		{"lastState when state has none", fleet.Container{Found: true, LastTerminated: term(137, 0, "OOMKilled")}, ExitOOMHost, true},
		{"state wins over lastState", fleet.Container{Found: true, Terminated: term(0, 0, "Completed"), LastTerminated: term(137, 0, "OOMKilled")}, ExitClean, false},
		{"no runner container status is unknown", fleet.Container{}, ExitUnknown, false},
		{"a status with no terminated state is unknown", fleet.Container{Found: true}, ExitUnknown, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Fingerprint(tc.c)
			assert.Equal(t, tc.class, e.Class)
			assert.Equal(t, tc.fromLast, e.FromLastState)
		})
	}
}

func TestTerminalFindingCarriesFingerprint(t *testing.T) {
	p := running("acme-a", func(p *fleet.Pod) {
		p.Phase = "Failed"
		p.Runner = fleet.Container{Found: true, LastTerminated: &fleet.Termination{ExitCode: 137, Reason: "OOMKilled"}}
	})
	c := Classify(observe([]fleet.Pod{p}), policy(), nil)
	if assert.Len(t, c.Findings, 1) && assert.NotNil(t, c.Findings[0].Exit) {
		assert.Equal(t, ExitOOMHost, c.Findings[0].Exit.Class)
		assert.Contains(t, c.Findings[0].Evidence, "oom-host")
	}
}
