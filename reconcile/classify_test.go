package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// One case per row of docs/design.md's verdict table, plus the healthy and
// protected cases that must produce no verdict.
func TestClassifyVerdictTable(t *testing.T) {
	term := func(code int32, reason string) *fleet.Termination {
		return &fleet.Termination{ExitCode: code, Reason: reason}
	}
	cases := []struct {
		name  string
		pod   fleet.Pod
		regs  []fleet.Registration
		marks map[string]fleet.Mark
		want  fleet.Verdict // "" = no verdict
		gone  bool
	}{
		{name: "zombie: registration offline while the runner container runs",
			pod: running("acme-a"), regs: []fleet.Registration{reg(1, "acme-a", false, false)}, want: fleet.Zombie},
		{name: "zombie: registration gone, known from Kubernetes (runner id)",
			pod: running("acme-a", func(p *fleet.Pod) { p.RunnerID = 7 }), want: fleet.Zombie, gone: true},
		{name: "zombie: registration gone, known from an earlier zombie mark",
			pod: running("acme-a"), marks: map[string]fleet.Mark{fleet.PodMarkKey("uid-acme-a"): {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Minute)}},
			want: fleet.Zombie, gone: true},
		{name: "unregistered: running past the deadline, never on GitHub",
			pod: running("acme-a"), want: fleet.Unregistered},
		{name: "no verdict: young pod not yet registered",
			pod: running("acme-a", func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-time.Minute)) })},
		{name: "orphan-stamped: stamped, registered, idle",
			pod: running("acme-a", func(p *fleet.Pod) { p.Stamped = true }), regs: []fleet.Registration{reg(1, "acme-a", true, false)}, want: fleet.OrphanStamped},
		{name: "orphan-stamped: stamped, never registered",
			pod: running("acme-a", func(p *fleet.Pod) { p.Stamped = true; p.CreatedAt = fleet.StampOf(t0.Add(-time.Minute)) }), want: fleet.OrphanStamped},
		{name: "no verdict: stamped and busy (a live claim)",
			pod: running("acme-a", func(p *fleet.Pod) { p.Stamped = true }), regs: []fleet.Registration{reg(1, "acme-a", true, true)}},
		{name: "terminal: pod Succeeded",
			pod: running("acme-a", func(p *fleet.Pod) {
				p.Phase = "Succeeded"
				p.Runner = fleet.Container{Found: true, Terminated: term(0, "Completed")}
			}), want: fleet.Terminal},
		{name: "terminal: pod Failed",
			pod: running("acme-a", func(p *fleet.Pod) {
				p.Phase = "Failed"
				p.Runner = fleet.Container{Found: true, Terminated: term(1, "Error")}
			}), want: fleet.Terminal},
		{name: "terminal: runner container terminated in a Running pod",
			pod: running("acme-a", func(p *fleet.Pod) { p.Runner = fleet.Container{Found: true, Terminated: term(137, "OOMKilled")} }), want: fleet.Terminal},
		{name: "terminal even when GitHub says busy (rule 2's exception)",
			pod: running("acme-a", func(p *fleet.Pod) {
				p.Phase = "Failed"
				p.Runner = fleet.Container{Found: true, Terminated: term(137, "Error")}
			}),
			regs: []fleet.Registration{reg(1, "acme-a", true, true)}, want: fleet.Terminal},
		{name: "no verdict: healthy, online and idle",
			pod: running("acme-a"), regs: []fleet.Registration{reg(1, "acme-a", true, false)}},
		{name: "no verdict: pod being deleted already",
			pod: running("acme-a", func(p *fleet.Pod) { p.Deleting = true }), regs: []fleet.Registration{reg(1, "acme-a", false, false)}},
		{name: "no verdict: pending pod",
			pod: running("acme-a", func(p *fleet.Pod) { p.Phase = "Pending"; p.Runner = fleet.Container{} })},
		{name: "no verdict: pod whose scope is unknown",
			pod: running("acme-a", func(p *fleet.Pod) { p.ScopeKey = "" })},
		{name: "no verdict: pod whose runner name is unknown",
			pod: running("acme-a", func(p *fleet.Pod) { p.RunnerName = "" })},
		{name: "no verdict: pod whose scope is not configured",
			pod: running("acme-a", func(p *fleet.Pod) { p.ScopeKey = "org:other" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(observe([]fleet.Pod{tc.pod}, tc.regs...), policy(), tc.marks)
			if tc.want == "" {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			f := c.Findings[0]
			assert.Equal(t, tc.want, f.Verdict)
			assert.Equal(t, tc.gone, f.Gone)
			assert.NotEmpty(t, f.Evidence)
			assert.Equal(t, fleet.PodMarkKey(tc.pod.UID), f.Key)
			if len(tc.regs) > 0 && tc.want != fleet.Terminal {
				require.NotNil(t, f.Registration, "a registration that exists is deleted first")
				assert.Equal(t, tc.regs[0].ID, f.Registration.ID)
			}
		})
	}
}

func TestClassifyGhosts(t *testing.T) {
	cases := []struct {
		name  string
		pol   Policy
		pods  []fleet.Pod
		reg   fleet.Registration
		ghost bool
	}{
		{name: "owned by prefix, offline, no pod", pol: policy(), reg: reg(9, "acme-x", false, false), ghost: true},
		{name: "owned by label", pol: Policy{GhostLabel: "reaper-owned"}, reg: reg(9, "x", false, false, "self-hosted", "Reaper-Owned"), ghost: true},
		{name: "not owned: another team's runner", pol: policy(), reg: reg(9, "build-x", false, false)},
		{name: "ghosts off: no ownership configured", pol: Policy{}, reg: reg(9, "acme-x", false, false)},
		{name: "online: not a ghost", pol: policy(), reg: reg(9, "acme-x", true, false)},
		{name: "busy: not a ghost", pol: policy(), reg: reg(9, "acme-x", false, true)},
		{name: "backed by a pod", pol: policy(), pods: []fleet.Pod{running("acme-x")}, reg: reg(9, "acme-x", false, false)},
		{name: "backed by a terminating pod", pol: policy(), pods: []fleet.Pod{running("acme-x", func(p *fleet.Pod) { p.Deleting = true })}, reg: reg(9, "acme-x", false, false)},
		{name: "backed by a pod whose scope is unknown", pol: policy(), pods: []fleet.Pod{running("acme-x", func(p *fleet.Pod) { p.ScopeKey = "" })}, reg: reg(9, "acme-x", false, false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(observe(tc.pods, tc.reg), tc.pol, nil)
			var ghosts []Finding
			for _, f := range c.Findings {
				if f.Verdict == fleet.Ghost {
					ghosts = append(ghosts, f)
				}
			}
			if !tc.ghost {
				assert.Empty(t, ghosts)
				return
			}
			require.Len(t, ghosts, 1)
			assert.Nil(t, ghosts[0].Pod)
			assert.Equal(t, fleet.RegistrationMarkKey(org, 9), ghosts[0].Key)
		})
	}
}

// Safety rule 1: a scope whose list is incomplete yields no GitHub-based
// verdict; a terminal pod in it is still judged on the kubelet's word.
func TestSafetyRule1IncompleteScopeGivesNoGitHubVerdict(t *testing.T) {
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		problem string
		skip    fleet.SkipKind
		until   time.Time
		want    fleet.SkipKind
	}{
		{"list failed: 502", fleet.SkipFailed, time.Time{}, fleet.SkipFailed},
		{"rate limited: 403 x-ratelimit-remaining 0", fleet.SkipRateLimited, until, fleet.SkipRateLimited},
		{"inconsistent: 99 of 100 items", fleet.SkipInconsistent, time.Time{}, fleet.SkipInconsistent},
		// An incomplete list that names no kind is a failure, never
		// something milder.
		{"incomplete, of no kind", "", time.Time{}, fleet.SkipFailed},
	} {
		problem := tc.problem
		t.Run(problem, func(t *testing.T) {
			obs := observe([]fleet.Pod{
				running("acme-unreg"),
				running("acme-stamped", func(p *fleet.Pod) { p.Stamped = true }),
				running("acme-dead", func(p *fleet.Pod) {
					p.Phase = "Failed"
					p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
				}),
			})
			l := obs.Lists[org]
			l.Complete, l.Problem, l.Skip, l.Until = false, problem, tc.skip, tc.until
			obs.Lists[org] = l
			c := Classify(obs, policy(), nil)
			assert.Equal(t, map[string]fleet.Verdict{"acme-dead": fleet.Terminal}, verdicts(c))
			require.Len(t, c.Skipped, 1)
			assert.Equal(t, problem, c.Skipped[0].Reason)
			assert.Equal(t, tc.want, c.Skipped[0].Kind)
			assert.Equal(t, tc.until, c.Skipped[0].Until)
			assert.Nil(t, c.Findings[0].Registration, "no registration can be known from a list that was not read")
		})
	}
}

// Safety rule 2 at the classifier: busy is never a suspect, stamped or not,
// offline or not.
func TestSafetyRule2BusyIsNeverSuspect(t *testing.T) {
	pods := []fleet.Pod{
		running("acme-offline-busy"),
		running("acme-stamped-busy", func(p *fleet.Pod) { p.Stamped = true }),
	}
	c := Classify(observe(pods, reg(1, "acme-offline-busy", false, true), reg(2, "acme-stamped-busy", true, true)), policy(), nil)
	assert.Empty(t, c.Findings)
	assert.Equal(t, 2, c.Protected)
}

func TestClassifyClaimSeam(t *testing.T) {
	pol := policy()
	pol.Claimed = func(p fleet.Pod, _ *fleet.Registration) bool { return p.Name == "acme-claimed" }
	pods := []fleet.Pod{
		running("acme-claimed", func(p *fleet.Pod) { p.Stamped = true }),
		running("acme-unclaimed", func(p *fleet.Pod) { p.Stamped = true }),
	}
	c := Classify(observe(pods, reg(1, "acme-claimed", true, false), reg(2, "acme-unclaimed", true, false)), pol, nil)
	assert.Equal(t, map[string]fleet.Verdict{"acme-unclaimed": fleet.OrphanStamped}, verdicts(c))
}

func TestClassifyStampOff(t *testing.T) {
	pol := policy()
	pol.StampEnabled = false
	c := Classify(observe([]fleet.Pod{running("acme-a", func(p *fleet.Pod) { p.Stamped = true })}, reg(1, "acme-a", true, false)), pol, nil)
	assert.Empty(t, c.Findings)
}

func TestClassifyDeadlineBoundary(t *testing.T) {
	at := func(age time.Duration) fleet.Pod {
		return running("acme-a", func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-age)) })
	}
	assert.Empty(t, Classify(observe([]fleet.Pod{at(10 * time.Minute)}), policy(), nil).Findings, "exactly at the deadline is not past it")
	assert.Len(t, Classify(observe([]fleet.Pod{at(10*time.Minute + time.Second)}), policy(), nil).Findings, 1)
}
