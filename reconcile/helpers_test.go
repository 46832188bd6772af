package reconcile

import (
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

const org = "org:acme"

// running is a healthy-looking runner pod, created an hour before t0.
func running(name string, mods ...func(*fleet.Pod)) fleet.Pod {
	p := fleet.Pod{
		Namespace: "runners", Name: name, UID: "uid-" + name, ResourceVersion: "1",
		RunnerName: name, ScopeKey: org, Phase: "Running", CreatedAt: fleet.StampOf(t0.Add(-time.Hour)),
		Runner: fleet.Container{Found: true, Running: true}, HasRunner: true,
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func reg(id int64, name string, online, busy bool, labels ...string) fleet.Registration {
	return fleet.Registration{ID: id, Name: name, Online: online, Busy: busy, Labels: labels}
}

func observe(pods []fleet.Pod, regs ...fleet.Registration) Observation {
	return Observation{Now: t0, Pods: pods, Lists: map[string]ScopeList{
		org: {Scope: fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}, Complete: true, Runners: regs},
	}}
}

func policy() Policy {
	return Policy{RegistrationDeadline: 10 * time.Minute, StampEnabled: true, GhostNamePrefix: "acme-"}
}

func hold() Hold {
	return Hold{ConfirmAfter: 5 * time.Minute, StampMaxAge: 10 * time.Minute, MassSuspicionFraction: 0.5, MassSuspicionMin: 3}
}

func verdicts(c Classification) map[string]fleet.Verdict {
	out := map[string]fleet.Verdict{}
	for _, f := range c.Findings {
		name := ""
		if f.Pod != nil {
			name = f.Pod.Name
		} else {
			name = "reg:" + f.Registration.Name
		}
		out[name] = f.Verdict
	}
	return out
}

// at is a sweep's now with both clocks agreeing, as on a healthy machine.
func at(t time.Time) Clocks { return Clocks{Ref: t, Local: t} }
