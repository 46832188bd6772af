package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// waiting is a runner pod whose runner container has not started, created
// an hour before t0, waiting as w says.
func waiting(name string, w *fleet.StartWait, mods ...func(*fleet.Pod)) fleet.Pod {
	return running(name, append([]func(*fleet.Pod){func(p *fleet.Pod) {
		p.Phase = "Pending"
		p.Runner = fleet.Container{Found: true}
		p.StartWait = w
	}}, mods...)...)
}

func pullBackOff() *fleet.StartWait {
	return &fleet.StartWait{Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/acme/runner:nope"`, Container: "runner"}
}

func noRoom() *fleet.StartWait {
	return &fleet.StartWait{Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}
}

func startPolicy() Policy {
	pol := policy()
	pol.StartDeadline = 15 * time.Minute
	return pol
}

// TestNeverStarted: a runner pod whose runner container has not started
// within the start deadline, counted from its creation, is never-started
// whatever its phase, with its wait in the evidence; GitHub's word protects
// it as it protects a running runner, and a pod that only waits for room in
// the cluster is reported unless the policy lets it act.
func TestNeverStarted(t *testing.T) {
	young := func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-14 * time.Minute)) }
	cases := []struct {
		name string
		pod  fleet.Pod
		regs []fleet.Registration
		pol  func(*Policy)
		// want is the verdict, "" for none; the rest are checked only
		// with one.
		want       fleet.Verdict
		reportOnly bool
		withReg    bool
		evidence   []string
		protected  int
	}{
		{name: "image pull back-off past the deadline, never registered", pod: waiting("acme-a", pullBackOff()),
			want: fleet.NeverStarted, evidence: []string{"runner container not started 1h0m0s after the pod's creation, past the 15m0s start deadline",
				`container "runner" waiting: ImagePullBackOff ("Back-off pulling image \"ghcr.io/acme/runner:nope\"")`, `runner "acme-a" not listed`}},
		{name: "in a Running pod, a sidecar beside it running", pod: waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.Phase = "Running" }),
			want: fleet.NeverStarted},
		{name: "its registration offline goes first", pod: waiting("acme-a", pullBackOff()), regs: []fleet.Registration{reg(4, "acme-a", false, false)},
			want: fleet.NeverStarted, withReg: true, evidence: []string{`registration 4 "acme-a" is offline`}},
		{name: "no reason given", pod: waiting("acme-a", nil, func(p *fleet.Pod) { p.Runner = fleet.Container{} }),
			want: fleet.NeverStarted, evidence: []string{"past the 15m0s start deadline: no reason given;"}},
		{name: "an init container that does not finish", pod: waiting("acme-a", &fleet.StartWait{Reason: "Error", Message: "exit code 1", Container: "setup", Init: true}),
			want: fleet.NeverStarted, evidence: []string{`init container "setup" has not finished: Error ("exit code 1")`}},
		{name: "unschedulable is reported only", pod: waiting("acme-a", noRoom()),
			want: fleet.NeverStarted, reportOnly: true, evidence: []string{`not scheduled: Unschedulable ("0/3 nodes are available: 3 Insufficient cpu.")`, "reported only"}},
		{name: "unschedulable acts with the opt-in", pod: waiting("acme-a", noRoom()), pol: func(p *Policy) { p.DeleteUnschedulable = true },
			want: fleet.NeverStarted},
		{name: "no verdict: younger than the deadline", pod: waiting("acme-a", pullBackOff(), young)},
		{name: "no verdict: the deadline counts from creation, not the pod's start",
			pod: waiting("acme-a", pullBackOff(), young, func(p *fleet.Pod) { p.StartedAt = fleet.StampOf(t0.Add(-time.Hour)) })},
		{name: "no verdict: the verdict is off without a deadline", pod: waiting("acme-a", pullBackOff()), pol: func(p *Policy) { p.StartDeadline = 0 }},
		{name: "no verdict: GitHub says busy", pod: waiting("acme-a", pullBackOff()), regs: []fleet.Registration{reg(4, "acme-a", false, true)}, protected: 1},
		{name: "no verdict: online under its name", pod: waiting("acme-a", pullBackOff()), regs: []fleet.Registration{reg(4, "acme-a", true, false)}},
		{name: "no verdict: deleting", pod: waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.Deleting = true })},
		{name: "no verdict: not a runner", pod: waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.HasRunner = false })},
		{name: "no verdict: phase Unknown", pod: waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.Phase = "Unknown" })},
		{name: "no verdict: no scope to look its registration up in", pod: waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.ScopeKey = "" })},
		{name: "terminal, not never-started: the runner ended", pod: waiting("acme-a", nil, func(p *fleet.Pod) {
			p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
		}), want: fleet.Terminal},
		{name: "not judged: a running runner", pod: running("acme-a", func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-5 * time.Minute)) })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := startPolicy()
			if tc.pol != nil {
				tc.pol(&pol)
			}
			c := Classify(observe([]fleet.Pod{tc.pod}, tc.regs...), pol, nil)
			assert.Equal(t, tc.protected, c.Protected)
			if tc.want == "" {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			f := c.Findings[0]
			assert.Equal(t, tc.want, f.Verdict)
			if tc.want != fleet.NeverStarted {
				return
			}
			assert.Equal(t, tc.reportOnly, f.ReportOnly)
			assert.Equal(t, !tc.reportOnly, f.NeedsConfirmation(), "an action needs confirmation, a report none")
			assert.Equal(t, fleet.PodMarkKey(tc.pod.UID), f.Key)
			assert.Equal(t, tc.withReg, f.Registration != nil)
			assert.Equal(t, tc.pod.CreatedAt.Time(), f.Since)
			for _, e := range tc.evidence {
				assert.Contains(t, f.Evidence, e)
			}
		})
	}
}

// TestNeverStartedConfirms: a never-started pod is marked on its first
// sight and acts only once its mark has held for confirm-after, as
// unregistered does; one that started meanwhile clears its mark.
func TestNeverStartedConfirms(t *testing.T) {
	pol := startPolicy()
	pod := waiting("acme-a", pullBackOff())
	first := Confirm(at(t0), Classify(observe([]fleet.Pod{pod}), pol, nil), nil, hold())
	require.Len(t, first.Candidates, 1)
	assert.False(t, first.Candidates[0].Ready, "marked, not yet confirmed")
	assert.Equal(t, fleet.NeverStarted, first.Marks[fleet.PodMarkKey(pod.UID)].Verdict)

	later := t0.Add(hold().ConfirmAfter)
	obs := observe([]fleet.Pod{pod})
	obs.Now = later
	second := Confirm(at(later), Classify(obs, pol, first.Marks), first.Marks, hold())
	require.Len(t, second.Candidates, 1)
	assert.True(t, second.Candidates[0].Ready, "confirmed after confirm-after")

	// Started, and its runner online on GitHub: healthy.
	obs = observe([]fleet.Pod{running("acme-a")}, reg(4, "acme-a", true, false))
	obs.Now = later
	cleared := Confirm(at(later), Classify(obs, pol, first.Marks), first.Marks, hold())
	assert.Equal(t, []string{fleet.PodMarkKey(pod.UID)}, cleared.Cleared, "a runner that started is no longer never-started")
}

// TestNeverStartedUnderClockSkew: where the two clocks disagree, either
// clock past the deadline makes the verdict, which must then hold for the
// whole deadline from the reaper's own first sighting; a pod past it on
// neither clock has none.
func TestNeverStartedUnderClockSkew(t *testing.T) {
	pol := startPolicy()
	pod := waiting("acme-a", pullBackOff(), func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(t0.Add(-10 * time.Minute)) })
	for _, tc := range []struct {
		name  string
		local time.Time
		want  bool
	}{
		{"clocks agree, not past", t0, false},
		{"local clock ahead past the deadline", t0.Add(10 * time.Minute), true},
		{"local clock behind", t0.Add(-10 * time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe([]fleet.Pod{pod})
			obs.Local = tc.local
			c := Classify(obs, pol, nil)
			if !tc.want {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			assert.Equal(t, pol.StartDeadline, c.Findings[0].MinHold)
			assert.Contains(t, c.Findings[0].Evidence, "must hold for the whole 15m0s deadline")
		})
	}
}

// TestStartWaitWordsClipsTheMessage: a message anyone who may write a
// pod's status wrote is carried only so far.
func TestStartWaitWordsClipsTheMessage(t *testing.T) {
	long := strings.Repeat("é", maxWaitMessage+50)
	got := StartWaitWords(&fleet.StartWait{Reason: "ErrImagePull", Message: long, Container: "runner"})
	assert.Contains(t, got, strings.Repeat("é", maxWaitMessage)+"…")
	assert.NotContains(t, got, strings.Repeat("é", maxWaitMessage+1))
}
