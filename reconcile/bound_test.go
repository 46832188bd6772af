package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func cand(v fleet.Verdict, name string, age time.Duration, pod bool) Candidate {
	c := Candidate{Finding: Finding{Verdict: v, Key: name}, Ready: true}
	if pod {
		p := running(name, func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-age)) })
		c.Pod, c.Since = &p, p.CreatedAt.Time()
	} else {
		c.Mark.FirstSeen = t0.Add(-age)
	}
	return c
}

func keys(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}

func TestOrderPriorityThenOldest(t *testing.T) {
	cs := []Candidate{
		cand(fleet.Ghost, "ghost-old", 5*time.Hour, false),
		cand(fleet.Unregistered, "unreg", time.Hour, true),
		cand(fleet.Zombie, "zombie-young", time.Minute, true),
		cand(fleet.Zombie, "zombie-old", time.Hour, true),
		cand(fleet.OrphanStamped, "stamped", time.Minute, true),
		cand(fleet.Terminal, "terminal-young", time.Second, true),
		cand(fleet.Terminal, "terminal-old", time.Hour, true),
		cand(fleet.Ghost, "ghost-young", time.Minute, false),
	}
	Order(cs)
	assert.Equal(t, []string{"terminal-old", "terminal-young", "stamped", "zombie-old", "zombie-young", "unreg", "ghost-old", "ghost-young"}, keys(cs))
}

func TestBudget(t *testing.T) {
	cases := []struct {
		name    string
		limits  Limits
		managed int
		cands   []Candidate
		admit   int
	}{
		{"absolute cap", Limits{MaxActions: 2, MaxFraction: 1}, 100,
			[]Candidate{cand(fleet.Zombie, "a", 0, true), cand(fleet.Zombie, "b", 0, true), cand(fleet.Zombie, "c", 0, true)}, 2},
		{"fraction of managed pods", Limits{MaxActions: 10, MaxFraction: 0.25}, 8,
			[]Candidate{cand(fleet.Zombie, "a", 0, true), cand(fleet.Zombie, "b", 0, true), cand(fleet.Zombie, "c", 0, true)}, 2},
		{"fraction rounds up so one dead pod of three can go", Limits{MaxActions: 10, MaxFraction: 0.25}, 3,
			[]Candidate{cand(fleet.Terminal, "a", 0, true), cand(fleet.Terminal, "b", 0, true)}, 1},
		{"ghosts are not pods: only the absolute cap applies", Limits{MaxActions: 3, MaxFraction: 0.1}, 1,
			[]Candidate{cand(fleet.Zombie, "a", 0, true), cand(fleet.Ghost, "g1", 0, false), cand(fleet.Ghost, "g2", 0, false), cand(fleet.Ghost, "g3", 0, false)}, 3},
		{"no managed pods: no pod may go", Limits{MaxActions: 3, MaxFraction: 0.5}, 0,
			[]Candidate{cand(fleet.Terminal, "a", 0, true)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(tc.limits, tc.managed)
			n := 0
			for _, c := range tc.cands {
				if b.Admit(c) {
					n++
				}
			}
			assert.Equal(t, tc.admit, n)
		})
	}
}

// TestBudgetHoldsLoopingGroups: of a group in a reap loop, one candidate
// whose verdict needs confirmation is admitted a sweep, and the rest are
// held; terminal pods, other groups and pods in no group are not.
func TestBudgetHoldsLoopingGroups(t *testing.T) {
	loop := fleet.GroupOf(fleet.GroupScaleSet, "arc", "broken")
	other := fleet.GroupOf(fleet.GroupScaleSet, "arc", "healthy")
	in := func(g fleet.Group, v fleet.Verdict, name string) Candidate {
		c := cand(v, name, 0, true)
		c.Pod.Group = g
		return c
	}
	cases := []struct {
		name    string
		looping map[fleet.Group]bool
		cands   []Candidate
		held    []string
	}{
		{"one never-started of a looping group acts, the next is held", map[fleet.Group]bool{loop: true},
			[]Candidate{in(loop, fleet.NeverStarted, "a"), in(loop, fleet.NeverStarted, "b")}, []string{"b"}},
		{"the one a sweep counts across the verdicts that back off", map[fleet.Group]bool{loop: true},
			[]Candidate{in(loop, fleet.Zombie, "a"), in(loop, fleet.Unregistered, "b"), in(loop, fleet.NeverStarted, "c")}, []string{"b", "c"}},
		{"terminal pods are never held, nor counted", map[fleet.Group]bool{loop: true},
			[]Candidate{in(loop, fleet.Terminal, "t1"), in(loop, fleet.Terminal, "t2"), in(loop, fleet.Unregistered, "a"), in(loop, fleet.Terminal, "t3")}, nil},
		{"another group is not held", map[fleet.Group]bool{loop: true},
			[]Candidate{in(loop, fleet.Zombie, "a"), in(other, fleet.Zombie, "b"), in(other, fleet.Zombie, "c")}, nil},
		{"a pod in no group is not held", map[fleet.Group]bool{loop: true},
			[]Candidate{in(fleet.Group{}, fleet.Zombie, "a"), in(fleet.Group{}, fleet.Zombie, "b")}, nil},
		{"no loop, no hold", nil,
			[]Candidate{in(loop, fleet.Zombie, "a"), in(loop, fleet.Zombie, "b")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(Limits{MaxActions: 100, MaxFraction: 1}, 100)
			b.HoldLoops(tc.looping)
			var held []string
			for _, c := range tc.cands {
				if b.LoopHeld(c) {
					held = append(held, c.Key)
					continue
				}
				assert.True(t, b.Admit(c), c.Key)
			}
			assert.Equal(t, tc.held, held)
		})
	}
}
