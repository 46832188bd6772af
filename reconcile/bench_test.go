package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// benchFleet builds n pods and n registrations spread over scopes scopes, with
// a mix of every verdict: per 100 pods, 91 healthy, 3 zombies, 2 never
// registered (their slots in the list hold 2 ghosts), 2 stamped without a
// claim, 2 terminal.
func benchFleet(n, scopes int) (Observation, map[string]fleet.Mark) {
	obs := Observation{Now: t0, Lists: make(map[string]ScopeList, scopes)}
	marks := map[string]fleet.Mark{}
	regs := make(map[string][]fleet.Registration, scopes)
	for i := 0; i < n; i++ {
		scope := fmt.Sprintf("org:acme-%03d", i%scopes)
		name := fmt.Sprintf("acme-runner-%06d", i)
		p := fleet.Pod{Namespace: "runners", Name: name, UID: fmt.Sprintf("uid-%d", i), ResourceVersion: "1",
			RunnerName: name, ScopeKey: scope, Phase: "Running", CreatedAt: fleet.StampOf(t0.Add(-time.Duration(i%120) * time.Minute)),
			Runner: fleet.Container{Found: true, Running: true}, HasRunner: true}
		r := fleet.Registration{ID: int64(i + 1), Name: name, Online: true, Labels: []string{"self-hosted", "linux"}}
		switch i % 100 {
		case 0, 1, 2:
			r.Online = false
			marks[fleet.PodMarkKey(p.UID)] = fleet.Mark{Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour), Scope: scope}
		case 3, 4:
			p.CreatedAt = fleet.StampOf(t0.Add(-time.Hour))
			r.Online, r.Name = false, "acme-ghost-"+name
		case 5, 6:
			p.Stamped = true
		case 7, 8:
			p.Phase = "Failed"
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 137, Reason: "OOMKilled"}}
		}
		obs.Pods = append(obs.Pods, p)
		regs[scope] = append(regs[scope], r)
	}
	for scope, rs := range regs {
		obs.Lists[scope] = ScopeList{Complete: true, Runners: rs}
	}
	return obs, marks
}

// BenchmarkClassifyAndPlan measures the pure part of a sweep for a large
// fleet: classify, confirm, and the bound's order and budget.
func BenchmarkClassifyAndPlan(b *testing.B) {
	obs, marks := benchFleet(10000, 100)
	pol := Policy{RegistrationDeadline: 10 * time.Minute, StampEnabled: true, GhostNamePrefix: "acme-"}
	h := Hold{ConfirmAfter: 5 * time.Minute, StampMaxAge: 10 * time.Minute, MassSuspicionFraction: 0.5, MassSuspicionMin: 5}
	b.ReportAllocs()
	b.ResetTimer()
	var ready int
	for b.Loop() {
		c := Classify(obs, pol, marks)
		conf := Confirm(at(obs.Now), c, marks, h)
		cs := make([]Candidate, 0, len(conf.Candidates))
		for _, cand := range conf.Candidates {
			if cand.Ready {
				cs = append(cs, cand)
			}
		}
		Order(cs)
		budget := NewBudget(Limits{MaxActions: 10, MaxFraction: 0.25}, c.ManagedPods)
		ready = 0
		for _, cand := range cs {
			if budget.Admit(cand) {
				ready++
			}
		}
	}
	b.ReportMetric(float64(ready), "admitted/op")
}

func TestFleetHasEveryVerdict(t *testing.T) {
	obs, marks := benchFleet(10000, 100)
	c := Classify(obs, Policy{RegistrationDeadline: 10 * time.Minute, StampEnabled: true, GhostNamePrefix: "acme-"}, marks)
	count := map[fleet.Verdict]int{}
	for _, f := range c.Findings {
		count[f.Verdict]++
	}
	want := map[fleet.Verdict]int{fleet.Zombie: 300, fleet.Unregistered: 200, fleet.OrphanStamped: 200, fleet.Terminal: 200, fleet.Ghost: 200}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("benchmark fleet verdicts = %v, want %v", count, want)
	}
}
