package reconcile

import (
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ExitClass is how a runner process ended, from docs/design.md's exit fingerprint
// table. It is logged before a terminal pod is removed because it is the one
// datum that explains a "runner lost communication" failure, and it is gone
// once the pod is.
type ExitClass string

const (
	ExitClean    ExitClass = "clean"
	ExitOOMHost  ExitClass = "oom-host"
	ExitSIGKILL  ExitClass = "sigkill"
	ExitSIGTERM  ExitClass = "sigterm"
	ExitOutdated ExitClass = "outdated"
	ExitCrash    ExitClass = "crash"
	// ExitUnknown: no terminated state at all. That absence is itself a
	// clue: the VM or node was killed before the kubelet could record one.
	ExitUnknown ExitClass = "unknown"
)

// Exit is the fingerprint of a terminated runner container.
type Exit struct {
	Code   int32
	Signal int32
	Reason string
	Class  ExitClass
	// FromLastState is true when state.terminated was absent and the
	// fingerprint comes from lastState.terminated.
	FromLastState bool
	// FinishedAt is when the runner ended, as the kubelet recorded it:
	// with a lost-communication report, it tells which ended first.
	FinishedAt time.Time
}

// Fingerprint reads the runner container's state.terminated, falling back to
// lastState.terminated.
func Fingerprint(c fleet.Container) Exit {
	t, fromLast := c.Terminated, false
	if t == nil {
		t, fromLast = c.LastTerminated, true
	}
	if t == nil {
		return Exit{Class: ExitUnknown}
	}
	e := Exit{Code: t.ExitCode, Signal: t.Signal, Reason: t.Reason, FromLastState: fromLast, FinishedAt: t.FinishedAt}
	switch {
	case t.ExitCode == 0:
		e.Class = ExitClean
	case t.ExitCode == 137 && t.Reason == "OOMKilled":
		e.Class = ExitOOMHost
	case t.ExitCode == 143 || t.Signal == 15:
		e.Class = ExitSIGTERM
	case t.ExitCode == 137:
		e.Class = ExitSIGKILL
	case t.ExitCode == 7:
		e.Class = ExitOutdated
	default:
		e.Class = ExitCrash
	}
	return e
}
