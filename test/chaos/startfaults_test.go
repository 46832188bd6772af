package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// silentLoops is a LoopReporter that never finds a report: the product
// that does not report loops.
type silentLoops struct{}

func (silentLoops) LoopsReported(sweep.Result, []byte) []string { return nil }

// Under hazard StartFaults the pool's pods sometimes never start, each
// way the cluster says it, and the view the chaos kube lists carries it;
// the broken templates' pods are a ReplicaSet's, failing alike, made again
// after each delete.
func TestStartFaultsWorld(t *testing.T) {
	st := &Stats{TimeToClean: map[string][]int{}}
	w := newWorld(Config{Seed: 7, Hazards: StartFaults}, st)
	for i := 0; i < 120; i++ {
		w.step()
	}
	reasons := map[string]bool{}
	groups := map[string]int{}
	for _, p := range w.pods {
		v := p.view()
		switch {
		case p.group != nil:
			require.NotNil(t, v.Owner)
			require.Equal(t, "ReplicaSet", v.Owner.Kind)
			require.Equal(t, p.group.name, v.Owner.Name)
			require.True(t, strings.HasPrefix(p.name, p.group.name+"-"), p.name)
			require.True(t, strings.HasPrefix(p.name, ourPrefix))
			groups[p.group.name]++
			if p.group.wait != nil {
				require.Equal(t, *p.group.wait, *v.StartWait)
			} else {
				require.Nil(t, v.StartWait)
			}
		case p.neverStart:
			require.NotNil(t, v.StartWait)
			require.Equal(t, "Pending", v.Phase)
			require.False(t, v.Runner.Running)
			require.Equal(t, !v.StartWait.Unschedulable(), v.Runner.Found, "an unschedulable pod has no container status")
			require.Equal(t, v.CreatedAt, v.StartedAt)
			require.Zero(t, p.regID, "a runner that never started never registers")
			reasons[v.StartWait.Reason] = true
		case v.Phase == "Pending":
			// On its way: its runner container creating.
			require.Equal(t, &fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}, v.StartWait)
			require.Equal(t, v.CreatedAt, v.StartedAt)
		default:
			require.Nil(t, v.StartWait)
		}
		if p.group == nil {
			require.True(t, v.Group.IsZero(), "a pool's bare pod is in no group")
		} else {
			require.Equal(t, "ReplicaSet runners/"+p.group.name, v.Group.String())
		}
	}
	require.GreaterOrEqual(t, len(reasons), 4, "never-started pods wait in several ways: %v", reasons)
	require.Len(t, groups, 2)
	for name, n := range groups {
		require.Equal(t, 2, n, "group %s keeps its replicas", name)
	}

	// Nothing deletes them here; the ReplicaSet replaces what is gone.
	g := w.starts.groups[0]
	var first *kpod
	for _, p := range w.pods {
		if p.group == g {
			first = p
			break
		}
	}
	require.NotNil(t, first)
	require.True(t, first.terminal(), "the outdated runner exits 7 and waits in CrashLoopBackOff")
	require.Equal(t, int32(7), first.last.ExitCode)
	made := g.made
	w.kill(first)
	w.step()
	require.Equal(t, made+1, g.made)
}

// A broken template reaped loopN times within the window must be reported
// (LoopReported): the outdated runner's pods are terminal, reaped each
// sweep, and LoopReported reads the report through Config.Loops, so that a
// reader that finds nothing is caught as a product that reports nothing
// would be (TestBrokenProductIsCaught breaks the product's side). The
// product's own report names both groups.
func TestLoopReport(t *testing.T) {
	cfg := Config{Seed: 7, Sweeps: 200, Hazards: InvalidateOne | StartFaults}
	st, err := control(cfg)
	require.NoError(t, err)
	require.Empty(t, st.Violations)
	require.Len(t, st.Starts.Groups, 2)
	for _, g := range st.Starts.Groups {
		require.GreaterOrEqual(t, g.LoopSweep, 0, "%s looped", g.Owner)
		require.True(t, g.Reported, "%s: the product reported its loop", g.Owner)
	}

	cfg.Loops, cfg.StopOn = silentLoops{}, LoopReported
	deaf, err := Run(cfg)
	require.NoError(t, err)
	v := firstOf(deaf, LoopReported)
	require.NotNil(t, v, "violations: %v", deaf.Violations)
	t.Logf("caught at %s", v)
}

// productLoops names each loop of the sweep's result by its group's kind
// and name, as the world names a broken group's owner.
func TestProductLoops(t *testing.T) {
	res := sweep.Result{Loops: []loops.Loop{
		{Group: fleet.GroupOf("ReplicaSet", nsRunners, "mine-runner-outdated-7d9f8c6b5"), Count: 5},
		{Group: fleet.GroupOf(fleet.GroupScaleSet, "arc-systems", "linux"), Count: 7},
	}}
	require.Equal(t, []string{"ReplicaSet/mine-runner-outdated-7d9f8c6b5", "AutoscalingRunnerSet/linux"}, productLoops{}.LoopsReported(res, nil))
	require.Empty(t, productLoops{}.LoopsReported(sweep.Result{}, nil))
}

// LoopDelaysOthers: a looping group that acts on more than one pod in a
// sweep on a verdict that needs confirmation, while the bound holds back
// another leak, is caught; one act a sweep, or no leak held back, is not.
func TestLoopDelaysOthers(t *testing.T) {
	outcome := func(key string, v fleet.Verdict, res fleet.Result) reap.Outcome {
		o := reap.Outcome{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Key: key, Verdict: v}}, Result: res}
		if res == fleet.Deleted {
			o.ObjectResult = fleet.Deleted
		}
		return o
	}
	tests := []struct {
		name     string
		acts     int
		deferred bool
		want     bool
	}{
		{"two acts, another leak deferred", 2, true, true},
		{"one act, another leak deferred", 1, true, false},
		{"two acts, nothing deferred", 2, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(Config{Seed: 7, Hazards: StartFaults}, &Stats{TimeToClean: map[string][]int{}})
			g := w.starts.groups[1]
			// loopN reaps in the window before the sweep: looping as it
			// begins.
			at := w.now.Add(interval)
			for i := 0; i < loopN; i++ {
				g.reaps = append(g.reaps, at.Add(-time.Duration(i+1)*interval))
			}
			var res sweep.Result
			n := 0
			for _, p := range w.pods {
				if p.group == g && n < tt.acts {
					res.Outcomes = append(res.Outcomes, outcome(fleet.PodMarkKey(p.uid), fleet.NeverStarted, fleet.Deleted))
					n++
				}
			}
			require.Equal(t, tt.acts, n)
			if tt.deferred {
				other := "pod/uid-elsewhere"
				w.leaks[other] = &leak{key: other, kind: "unregistered"}
				res.Outcomes = append(res.Outcomes, outcome(other, fleet.Unregistered, fleet.Deferred))
			}
			w.afterStarts(&sweepCtx{no: 1, at: at}, res)
			require.Equal(t, tt.want, firstOf(w.stats, LoopDelaysOthers) != nil, "violations: %v", w.stats.Violations)
		})
	}
}
