package reconcile

import (
	"fmt"
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

// scheduledAt is w with the pod scheduled at when.
func scheduledAt(w *fleet.StartWait, when time.Time) *fleet.StartWait {
	w.ScheduledAt = fleet.StampOf(when)
	return w
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
		minHold    time.Duration
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
		{name: "no verdict: old, but scheduled within the deadline", pod: waiting("acme-a", scheduledAt(pullBackOff(), t0.Add(-14*time.Minute)))},
		{name: "no verdict: pulling its image since it was scheduled, within the deadline",
			pod: waiting("acme-a", scheduledAt(&fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}, t0.Add(-14*time.Minute)))},
		{name: "no verdict: nothing said but when it was scheduled, within the deadline", pod: waiting("acme-a", scheduledAt(&fleet.StartWait{}, t0.Add(-14*time.Minute)))},
		{name: "counted from scheduling past the deadline", pod: waiting("acme-a", scheduledAt(pullBackOff(), t0.Add(-16*time.Minute))),
			want: fleet.NeverStarted, evidence: []string{"runner container not started 16m0s after the pod was scheduled (created 1h0m0s ago), past the 15m0s start deadline"}},
		{name: "a scheduling before the creation counts from the creation", pod: waiting("acme-a", scheduledAt(pullBackOff(), t0.Add(-2*time.Hour))),
			want: fleet.NeverStarted, evidence: []string{"not started 1h0m0s after the pod's creation"}},
		{name: "a scheduling in the future counts from the creation, and must hold the whole deadline", pod: waiting("acme-a", scheduledAt(pullBackOff(), t0.Add(time.Hour))),
			want: fleet.NeverStarted, minHold: 15 * time.Minute, evidence: []string{"not started 1h0m0s after the pod's creation", "when it was scheduled lies in the future"}},
		{name: "waiting for room counts from the creation", pod: waiting("acme-a", scheduledAt(noRoom(), t0.Add(-time.Minute))),
			want: fleet.NeverStarted, reportOnly: true},
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
			assert.Equal(t, tc.minHold, f.MinHold)
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

// TestNeverStartedFromSchedulingUnderClockSkew: the time the pod was
// scheduled is read on both clocks as its creation is: where they
// disagree, either clock past the deadline since the scheduling makes the
// verdict, which must then hold for the whole deadline.
func TestNeverStartedFromSchedulingUnderClockSkew(t *testing.T) {
	pol := startPolicy()
	pod := waiting("acme-a", scheduledAt(pullBackOff(), t0.Add(-10*time.Minute)))
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
			assert.Contains(t, c.Findings[0].Evidence, "after the pod was scheduled")
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

// TestNeverStartedCountsFromScheduling: a pod that waited for a node far
// longer than the start deadline, then got one and pulls its image, is
// judged by the time since it was scheduled, over sweeps as the reaper
// runs them: with or without REAPER_DELETE_UNSCHEDULABLE, nothing is
// ready until the deadline has passed since its scheduling and the mark
// made then has held for confirm-after; a mark made while it waited for
// room (where that acts) is cleared once it is scheduled, not carried on.
func TestNeverStartedCountsFromScheduling(t *testing.T) {
	created := t0.Add(-30 * time.Minute)
	scheduled := t0.Add(2 * time.Minute)
	podAt := func(now time.Time) fleet.Pod {
		w := noRoom()
		if !now.Before(scheduled) {
			w = scheduledAt(&fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}, scheduled)
		}
		return waiting("acme-a", w, func(p *fleet.Pod) { p.CreatedAt = fleet.StampOf(created) })
	}
	key := fleet.PodMarkKey("uid-acme-a")
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("delete unschedulable %v", optIn), func(t *testing.T) {
			pol := startPolicy()
			pol.DeleteUnschedulable = optIn
			var marks map[string]fleet.Mark
			var firstReady time.Time
			for now := t0; now.Before(t0.Add(40 * time.Minute)); now = now.Add(5 * time.Minute) {
				obs := observe([]fleet.Pod{podAt(now)})
				obs.Now = now
				conf := Confirm(at(now), Classify(obs, pol, marks), marks, hold())
				marks = conf.Marks
				switch now {
				case t0:
					_, marked := marks[key]
					assert.Equal(t, optIn, marked, "waiting for room: marked only where it may act")
				case t0.Add(5 * time.Minute):
					assert.Empty(t, conf.Candidates, "3m after it got a node: young")
					assert.NotContains(t, marks, key)
					if optIn {
						assert.Equal(t, []string{key}, conf.Cleared, "the mark made while it waited for room is cleared")
					}
				}
				for _, c := range conf.Candidates {
					if c.Ready && !c.ReportOnly && firstReady.IsZero() {
						firstReady = now
						assert.Contains(t, c.Evidence, "after the pod was scheduled")
					}
				}
			}
			// Past the deadline 17m after it was scheduled (t0+20m),
			// marked then, ready one confirm-after later.
			assert.Equal(t, t0.Add(25*time.Minute), firstReady)
		})
	}
}

// TestBoundWaitCutsAfterRedacting: a secret across the cut of a wait's
// message is redacted whole before the cut, so no prefix of it is shown;
// the reason and the container's name are bounded too.
func TestBoundWaitCutsAfterRedacting(t *testing.T) {
	secret := "ghs_" + strings.Repeat("S", 36)
	msg := strings.Repeat("m", maxWaitMessage-10) + secret + " and more"
	w := &fleet.StartWait{Reason: strings.Repeat("R", 100_000), Message: msg, Container: strings.Repeat("c", 1000), Init: true}
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }
	b := BoundWait(w, redact)
	assert.Equal(t, msg, w.Message, "the view's wait is not changed")
	assert.NotContains(t, b.Message, "ghs_", "no prefix of the secret")
	assert.Equal(t, strings.Repeat("m", maxWaitMessage-10)+"[REDACTED]…", b.Message)
	assert.LessOrEqual(t, len(b.Reason), maxWaitReason)
	assert.LessOrEqual(t, len(b.Container), maxWaitContainer)
	assert.True(t, b.Init)
	// Built from the bounded wait, the evidence shows no prefix either.
	assert.NotContains(t, StartWaitWords(b), "ghs_")
	assert.Equal(t, b.Message, WaitMessage(b), "bounding twice changes nothing")
	assert.Equal(t, b.Reason, WaitReason(b))
	assert.Equal(t, b.Container, WaitContainer(b))
}
