package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func er(name string, mods ...func(*fleet.EphemeralRunner)) fleet.EphemeralRunner {
	e := fleet.EphemeralRunner{Namespace: "runners", Name: name, UID: "er-" + name, ResourceVersion: "1",
		ScopeKey: org, Phase: "Running", CreatedAt: fleet.StampOf(t0.Add(-time.Hour))}
	for _, m := range mods {
		m(&e)
	}
	return e
}

func arcPolicy() Policy {
	p := policy()
	p.ARC, p.ARCStuckDeletingAfter = true, 30*time.Minute
	return p
}

func TestClassifyARCLeaks(t *testing.T) {
	owned := running("scale-a-runner-1", func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "scale-a-runner-1", UID: "er-scale-a-runner-1"}
	})
	cases := []struct {
		name   string
		er     fleet.EphemeralRunner
		pods   []fleet.Pod
		regs   []fleet.Registration
		arcOff bool
		want   fleet.Verdict
		withR  bool
	}{
		{name: "Failed with no pod", er: er("x", func(e *fleet.EphemeralRunner) {
			e.Phase, e.Note = "Failed", &fleet.StatusNote{Reason: "TooManyPodFailures"}
		}), want: fleet.ARCFailed},
		{name: "Failed with its registration: deleted first", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.RunnerID = "Failed", 42 }),
			regs: []fleet.Registration{reg(42, "x", false, false)}, want: fleet.ARCFailed, withR: true},
		{name: "no pod, not deleting", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase = "Pending" }), want: fleet.ARCPodless},
		{name: "stuck deleting past the limit with a finalizer", er: er("x", func(e *fleet.EphemeralRunner) {
			e.DeletingSince, e.Finalizers = fleet.StampOf(t0.Add(-31*time.Minute)), []string{"ephemeralrunner.actions.github.com/finalizer"}
		}), want: fleet.ARCStuckDeleting},
		{name: "deleting, not yet past the limit", er: er("x", func(e *fleet.EphemeralRunner) {
			e.DeletingSince, e.Finalizers = fleet.StampOf(t0.Add(-29*time.Minute)), []string{"f"}
		})},
		{name: "deleting with no finalizer left: the API server finishes it", er: er("x", func(e *fleet.EphemeralRunner) {
			e.DeletingSince = fleet.StampOf(t0.Add(-time.Hour))
		})},
		{name: "has a pod: the pod's verdict removes it", er: er("scale-a-runner-1", func(e *fleet.EphemeralRunner) { e.Phase = "Failed" }), pods: []fleet.Pod{owned}},
		{name: "its registration is busy (rule 2)", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.RunnerID = "Failed", 42 }),
			regs: []fleet.Registration{reg(42, "x", true, true)}},
		{name: "ARC leaks off", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase = "Failed" }), arcOff: true},
		// An id that names a registration of another name ties the
		// EphemeralRunner to nothing: deleting by it would remove
		// another runner's registration.
		{name: "its runner id names another runner's registration", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.RunnerID = "Failed", 42 }),
			regs: []fleet.Registration{reg(42, "someone-else", true, false)}},
		{name: "stuck deleting, its runner id naming another runner: judged without proof", er: er("x", func(e *fleet.EphemeralRunner) {
			e.RunnerID, e.DeletingSince, e.Finalizers = 42, fleet.StampOf(t0.Add(-time.Hour)), []string{fleet.ARCRegistrationFinalizer}
		}), regs: []fleet.Registration{reg(42, "someone-else", true, false)}, want: fleet.ARCStuckDeleting},
		// Another team's EphemeralRunner in a shared namespace, or one
		// whose URL names no scope, is none of the reaper's.
		{name: "a scope that is not configured", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.ScopeKey = "Failed", "org:other-team" })},
		{name: "no scope at all", er: er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.ScopeKey = "Failed", "" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe(tc.pods, tc.regs...)
			obs.EphemeralRunners = []fleet.EphemeralRunner{tc.er}
			pol := arcPolicy()
			pol.ARC = !tc.arcOff
			c := Classify(obs, pol, nil)
			var arc []Finding
			for _, f := range c.Findings {
				if f.EphemeralRunner != nil {
					arc = append(arc, f)
				}
			}
			if tc.want == "" {
				assert.Empty(t, arc)
				return
			}
			require.Len(t, arc, 1)
			f := arc[0]
			assert.Equal(t, tc.want, f.Verdict)
			assert.Equal(t, fleet.EphemeralRunnerMarkKey(tc.er.UID), f.Key)
			assert.Nil(t, f.Pod)
			assert.Equal(t, tc.withR, f.Registration != nil)
			assert.Contains(t, f.Evidence, "EphemeralRunner runners/"+tc.er.Name)
			for _, r := range tc.regs {
				if r.ID == tc.er.RunnerID && r.Name != tc.er.Name {
					assert.False(t, f.RegistrationAbsent, "an id that names another runner proves nothing")
					assert.Zero(t, f.RunnerID)
				}
			}
		})
	}
}

func TestConfirmARCHolds(t *testing.T) {
	h := hold()
	h.ARCFailedAfter, h.ARCPodlessAfter = 20*time.Minute, 15*time.Minute
	for _, tc := range []struct {
		phase string
		age   time.Duration
		ready bool
	}{
		{"Failed", 19 * time.Minute, false},
		{"Failed", 20 * time.Minute, true},
		{"Pending", 14 * time.Minute, false},
		{"Pending", 15 * time.Minute, true},
	} {
		obs := observe(nil)
		obs.EphemeralRunners = []fleet.EphemeralRunner{er("x", func(e *fleet.EphemeralRunner) { e.Phase = tc.phase })}
		c := Classify(obs, arcPolicy(), nil)
		require.Len(t, c.Findings, 1)
		key := fleet.EphemeralRunnerMarkKey("er-x")
		old := map[string]fleet.Mark{key: {Verdict: c.Findings[0].Verdict, FirstSeen: t0.Add(-tc.age), FirstSeenLocal: t0.Add(-tc.age), Scope: org}}
		conf := Confirm(at(t0), c, old, h)
		require.Len(t, conf.Candidates, 1)
		assert.Equal(t, tc.ready, conf.Candidates[0].Ready, "%s held %s", tc.phase, tc.age)
		assert.Equal(t, "x", conf.Marks[key].Pod)
	}
}

// ARC's status.runnerId tells a zombie whose registration has gone from a
// pod that never registered.
func TestClassifyUsesEphemeralRunnerID(t *testing.T) {
	pod := running("set-runner-a", func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "set-runner-a", UID: "er-set-runner-a"}
	})
	for _, tc := range []struct {
		runnerID int64
		want     fleet.Verdict
		gone     bool
	}{{42, fleet.Zombie, true}, {0, fleet.Unregistered, false}} {
		obs := observe([]fleet.Pod{pod})
		obs.EphemeralRunners = []fleet.EphemeralRunner{er("set-runner-a", func(e *fleet.EphemeralRunner) { e.RunnerID = tc.runnerID })}
		c := Classify(obs, arcPolicy(), nil)
		require.Len(t, c.Findings, 1)
		assert.Equal(t, tc.want, c.Findings[0].Verdict)
		assert.Equal(t, tc.gone, c.Findings[0].Gone)
		if tc.gone {
			assert.Contains(t, c.Findings[0].Evidence, "was registered (runner id known from Kubernetes)")
		}
	}
}

// An ARC verdict needs its scope's complete list this sweep: without it
// there is no busy check (rule 2), so a deferred, skipped or rate-limited
// scope's EphemeralRunners wait, as its pods do.
func TestClassifyARCWaitsForItsScopesList(t *testing.T) {
	obs := observe(nil, reg(42, "x", true, true))
	obs.Lists[org] = ScopeList{Scope: obs.Lists[org].Scope, Problem: "deferred", Skip: fleet.SkipDeferred}
	obs.EphemeralRunners = []fleet.EphemeralRunner{er("x", func(e *fleet.EphemeralRunner) { e.Phase, e.RunnerID = "Failed", 42 })}
	c := Classify(obs, arcPolicy(), nil)
	for _, f := range c.Findings {
		assert.Nil(t, f.EphemeralRunner, "no verdict on %s while its scope was not listed", f.Key)
	}
}

// An EphemeralRunner backs its registration before its pod exists (a
// quota or a webhook holding the pod back): the registration is no ghost.
func TestEphemeralRunnerWithoutPodBacksItsRegistration(t *testing.T) {
	pol := arcPolicy()
	pol.GhostNamePrefix = "x"
	for _, e := range []fleet.EphemeralRunner{
		er("x-1", func(e *fleet.EphemeralRunner) { e.RunnerID = 42 }),
		er("x-1"), // no runner id yet: its name backs it
	} {
		obs := observe(nil, reg(42, "x-1", false, false))
		obs.EphemeralRunners = []fleet.EphemeralRunner{e}
		c := Classify(obs, pol, nil)
		for _, f := range c.Findings {
			assert.NotEqual(t, fleet.Ghost, f.Verdict, "registration 42 is its EphemeralRunner's, not a ghost")
		}
	}
}

// What ARC's deletion does to the verdicts: a pod whose EphemeralRunner is
// being deleted is ARC's to remove and has no verdict of its own; the
// EphemeralRunner, once stuck, is judged even with its pod still there,
// but only when its registration is gone (or never was): one that exists
// may be running the job ARC waits for. A pod's finding carries its
// EphemeralRunner, its runner id, and whether the list proves the
// registration gone.
func TestClassifyARCDeletion(t *testing.T) {
	owned := running("set-runner-a", func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "set-runner-a", UID: "er-set-runner-a"}
	})
	stuckFor := func(d time.Duration, id int64) func(*fleet.EphemeralRunner) {
		return func(e *fleet.EphemeralRunner) {
			e.RunnerID, e.DeletingSince = id, fleet.StampOf(t0.Add(-d))
			e.Finalizers = []string{"ephemeralrunner.actions.github.com/finalizer", fleet.ARCRegistrationFinalizer}
		}
	}
	tests := []struct {
		name        string
		er          fleet.EphemeralRunner
		regs        []fleet.Registration
		want        fleet.Verdict
		wantAbsent  bool
		wantDeleted int
		// reportOnly, when set, is in the evidence of a finding that is
		// only reported: nothing is done for it, and it carries no pod.
		reportOnly string
	}{
		{name: "deleting a moment ago: the pod waits for ARC", er: er("set-runner-a", stuckFor(time.Minute, 42)), wantDeleted: 1},
		{name: "stuck, registration gone: judged with its pod", er: er("set-runner-a", stuckFor(time.Hour, 42)),
			want: fleet.ARCStuckDeleting, wantAbsent: true, wantDeleted: 1},
		{name: "stuck, never registered: judged", er: er("set-runner-a", stuckFor(time.Hour, 0)),
			want: fleet.ARCStuckDeleting, wantDeleted: 1},
		{name: "stuck, its registration busy: ARC waits for the job; reported, with what holds it", er: er("set-runner-a", stuckFor(time.Hour, 42)),
			regs: []fleet.Registration{reg(42, "set-runner-a", true, true)}, wantDeleted: 1,
			want: fleet.ARCStuckDeleting, reportOnly: "its registration 42, listed online and busy on the complete list; its pod runners/set-runner-a (phase Running)"},
		{name: "stuck, its registration idle but there: ARC's removal keeps failing; reported, with what holds it", er: er("set-runner-a", stuckFor(time.Hour, 42)),
			regs: []fleet.Registration{reg(42, "set-runner-a", false, false)}, wantDeleted: 1,
			want: fleet.ARCStuckDeleting, reportOnly: "its registration 42, listed offline and idle on the complete list; its pod runners/set-runner-a (phase Running)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := observe([]fleet.Pod{owned}, tt.regs...)
			obs.EphemeralRunners = []fleet.EphemeralRunner{tt.er}
			c := Classify(obs, arcPolicy(), nil)
			assert.Equal(t, tt.wantDeleted, c.OwnerDeleting)
			// Still a managed pod: a stuck finding carrying it counts it
			// against the fraction, which must have room for it.
			assert.Equal(t, 1, c.ManagedPods)
			if tt.want == "" {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			f := c.Findings[0]
			assert.Equal(t, tt.want, f.Verdict)
			require.NotNil(t, f.EphemeralRunner, "one finding, on the EphemeralRunner: the pod has no verdict of its own")
			assert.Equal(t, tt.reportOnly != "", f.ReportOnly)
			if tt.reportOnly != "" {
				assert.Contains(t, f.Evidence, tt.reportOnly)
				assert.Nil(t, f.Pod, "a report takes no place in the bound")
				return
			}
			require.NotNil(t, f.Pod, "its pod is carried, to count in the bound and in rule 4, and to be re-checked by name")
			assert.Equal(t, owned.UID, f.Pod.UID)
			assert.Equal(t, tt.wantAbsent, f.RegistrationAbsent)
			assert.Equal(t, tt.er.RunnerID, f.RunnerID)
		})
	}

	t.Run("a zombie's finding carries its EphemeralRunner and the proof", func(t *testing.T) {
		obs := observe([]fleet.Pod{owned})
		obs.EphemeralRunners = []fleet.EphemeralRunner{er("set-runner-a", func(e *fleet.EphemeralRunner) { e.RunnerID = 42 })}
		c := Classify(obs, arcPolicy(), nil)
		require.Len(t, c.Findings, 1)
		f := c.Findings[0]
		assert.Equal(t, fleet.Zombie, f.Verdict)
		require.NotNil(t, f.OwnerRunner)
		assert.Equal(t, "er-set-runner-a", f.OwnerRunner.UID)
		assert.EqualValues(t, 42, f.RunnerID)
		assert.True(t, f.RegistrationAbsent, "runner 42 is absent from the complete list")
	})
	// An EphemeralRunner that names another scope than its pod's labels:
	// its githubConfigUrl is where ARC registered the runner, so the pod
	// is judged in that scope; one whose URL names no scope the reaper can
	// read (another GitHub host) leaves the pod with none, and the sweep
	// warns. Either way the labels' list (org:acme's, which holds a runner
	// 42 of the same name) says nothing of it.
	for _, tc := range []struct{ scope, want string }{{"org:other", "runners/set-runner-a"}, {"", "runners/set-runner-a"}} {
		t.Run(fmt.Sprintf("an EphemeralRunner of scope %q: the labels' list says nothing of it", tc.scope), func(t *testing.T) {
			obs := observe([]fleet.Pod{owned}, reg(42, "set-runner-a", false, false))
			obs.EphemeralRunners = []fleet.EphemeralRunner{er("set-runner-a", func(e *fleet.EphemeralRunner) {
				e.RunnerID, e.ScopeKey = 42, tc.scope
			})}
			c := Classify(obs, arcPolicy(), nil)
			assert.Empty(t, c.Findings, "runner 42 of org:acme's list is not this pod's runner")
			assert.Equal(t, 1, c.Unscoped)
			if tc.want == "" {
				assert.Empty(t, c.ForeignOwners)
			} else {
				assert.Equal(t, []string{tc.want}, c.ForeignOwners, "and the sweep says so")
			}
			assert.Equal(t, org, obs.Pods[0].ScopeKey, "the caller's pods are not changed")

			dead := owned
			dead.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
			obs.Pods = []fleet.Pod{dead}
			c = Classify(obs, arcPolicy(), nil)
			require.Len(t, c.Findings, 1)
			f := c.Findings[0]
			assert.Equal(t, fleet.Terminal, f.Verdict)
			assert.Equal(t, tc.scope, f.ScopeKey)
			assert.Nil(t, f.Registration, "no registration of org:acme's list is deleted for it")
			assert.False(t, f.RegistrationAbsent, "and nothing proves its own gone")
		})
	}
	t.Run("an EphemeralRunner of another listed scope: judged in that scope", func(t *testing.T) {
		obs := observe([]fleet.Pod{owned}, reg(42, "set-runner-a", true, false))
		obs.Lists["org:other"] = ScopeList{Complete: true, Runners: []fleet.Registration{reg(77, "set-runner-a", false, false)}}
		obs.EphemeralRunners = []fleet.EphemeralRunner{er("set-runner-a", func(e *fleet.EphemeralRunner) {
			e.RunnerID, e.ScopeKey = 77, "org:other"
		})}
		c := Classify(obs, arcPolicy(), nil)
		require.Len(t, c.Findings, 1)
		f := c.Findings[0]
		assert.Equal(t, fleet.Zombie, f.Verdict, "its own registration, 77 of org:other, is offline")
		assert.Equal(t, "org:other", f.ScopeKey)
		require.NotNil(t, f.Registration)
		assert.EqualValues(t, 77, f.Registration.ID)
	})
	t.Run("an offline zombie's registration is there: no proof yet, its delete gives it", func(t *testing.T) {
		obs := observe([]fleet.Pod{owned}, reg(42, "set-runner-a", false, false))
		obs.EphemeralRunners = []fleet.EphemeralRunner{er("set-runner-a", func(e *fleet.EphemeralRunner) { e.RunnerID = 42 })}
		c := Classify(obs, arcPolicy(), nil)
		require.Len(t, c.Findings, 1)
		assert.False(t, c.Findings[0].RegistrationAbsent)
		assert.EqualValues(t, 42, c.Findings[0].RunnerID)
		assert.NotNil(t, c.Findings[0].Registration)
	})
}

// TestPodWhoseListedEphemeralRunnerIsGoneWaitsForTheCollector: with the
// EphemeralRunners listed, a scale-set pod whose EphemeralRunner is not
// among them lost it between the two lists (ARC removes a finished
// runner's EphemeralRunner right after its pod ends): the garbage
// collector takes the pod next, so it gets no verdict, as a deleting
// owner's pod does. With ARC's objects not listed, the pod is judged.
func TestPodWhoseListedEphemeralRunnerIsGoneWaitsForTheCollector(t *testing.T) {
	dead := running("set-runner-a", func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "set-runner-a", UID: "er-set-runner-a"}
		p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 0, Reason: "Completed"}}
	})
	obs := observe([]fleet.Pod{dead})
	c := Classify(obs, arcPolicy(), nil)
	assert.Empty(t, c.Findings)
	assert.Equal(t, 1, c.OwnerDeleting)
	assert.Equal(t, 1, c.ManagedPods, "it stays in the fraction's base")

	pol := arcPolicy()
	pol.ARC = false
	c = Classify(obs, pol, nil)
	require.Len(t, c.Findings, 1)
	assert.Equal(t, fleet.Terminal, c.Findings[0].Verdict)
}

// A stuck deletion whose pod and registration are both there is reported
// each sweep and keeps no mark: should the registration then drop out of
// one list, the verdict that acts starts its confirmation from nothing,
// and a flaky list cannot act on a mark the reports built up, least of all
// one whose registration was listed busy.
func TestReportedStuckDeletionKeepsNoMark(t *testing.T) {
	owned := running("set-runner-a", func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "set-runner-a", UID: "er-set-runner-a"}
	})
	stuck := er("set-runner-a", func(e *fleet.EphemeralRunner) {
		e.RunnerID = 42
		e.DeletingSince = fleet.StampOf(t0.Add(-time.Hour))
		e.Finalizers = []string{fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer}
	})
	sweep := func(at time.Time, marks map[string]fleet.Mark, regs ...fleet.Registration) Confirmation {
		obs := observe([]fleet.Pod{owned}, regs...)
		obs.Now, obs.EphemeralRunners = at, []fleet.EphemeralRunner{stuck}
		return Confirm(Clocks{Ref: at, Local: at}, Classify(obs, arcPolicy(), marks), marks, hold())
	}
	busy := reg(42, "set-runner-a", true, true)
	first := sweep(t0, nil, busy)
	require.Len(t, first.Candidates, 1)
	assert.True(t, first.Candidates[0].ReportOnly)
	assert.True(t, first.Candidates[0].Ready, "reported at once: the age gate has waited already")
	assert.Empty(t, first.Marks, "a report keeps no mark")
	again := sweep(t0.Add(10*time.Minute), first.Marks, busy)
	assert.Empty(t, again.Marks)

	gone := sweep(t0.Add(11*time.Minute), again.Marks)
	require.Len(t, gone.Candidates, 1)
	c := gone.Candidates[0]
	assert.False(t, c.ReportOnly)
	assert.True(t, c.RegistrationAbsent)
	assert.False(t, c.Ready, "its confirmation starts now, not from the reports")
	assert.Equal(t, t0.Add(11*time.Minute), gone.Marks[c.Key].FirstSeen)
}
