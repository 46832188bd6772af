package sweep_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// podsSeen is the cluster of the world, whose EphemeralRunner list records
// the pods the sweep gave it.
type podsSeen struct {
	*fakeKube
	given [][]fleet.Pod
	// ers are the EphemeralRunners listed; listed, the list returned.
	ers    []fleet.EphemeralRunner
	listed []fleet.EphemeralRunner
}

func (k *podsSeen) ListEphemeralRunners(_ context.Context, pods []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	k.given = append(k.given, pods)
	k.listed = slices.Clone(k.ers)
	return k.listed, nil
}

// cachedGitHub answers every list from its cache, as GitHub's 304 does.
type cachedGitHub struct{ *fakeGitHub }

func (g cachedGitHub) ListRunners(_ context.Context, s fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	if cache == nil || len(cache.Pages) == 0 {
		return nil, nil, nil
	}
	return cache.Pages[0].Runners, nil, nil
}

// TestSweepSharesThePodsStrings: the sweep gives the EphemeralRunner list
// the pods it listed, and the registrations it reads from the ledger's
// cache hold the pod views' runner names, not copies of their own.
func TestSweepSharesThePodsStrings(t *testing.T) {
	w := newWorld()
	w.kube.pods = append(w.kube.pods, fakePod("acme-other"))
	ledger := state.Ledger{Lists: map[string]state.ListCache{acme.Key(): {Pages: []state.CachedPage{{
		ETag: `"1"`, TotalCount: 3,
		Runners: []fleet.Registration{{ID: 8, Name: "acme-live", Busy: true, Online: true}, {ID: 9, Name: "acme-other"}, {ID: 7, Name: "acme-zombie"}},
	}}}}}
	_, err := w.ledger.Save(context.Background(), ledger, "")
	require.NoError(t, err)
	k := &podsSeen{fakeKube: w.kube}
	s := w.sweeper()
	s.EphemeralRunners = k
	s.Runners = cachedGitHub{w.gh}
	s.Policy.ARC = true

	res := s.Run(context.Background(), sweep.Audit)
	require.NoError(t, res.Err)

	require.Len(t, k.given, 1)
	assert.Equal(t, 2, res.Observed.Pods, "the pods the sweep listed")
	regs := res.Observation.Lists[acme.Key()].Runners
	require.Len(t, regs, 3)
	pods := k.given[0]
	require.Len(t, pods, 2)
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	assert.True(t, same(regs[0].Name, pods[0].RunnerName), "acme-live is the pod view's string")
	assert.True(t, same(regs[1].Name, pods[1].RunnerName), "acme-other is the pod view's string")
	assert.Equal(t, "acme-zombie", regs[2].Name, "a name no pod has is kept")
}

// TestSweepLetsGoOfItsViews: once judged, the sweep drops the pod and
// EphemeralRunner views it listed, keeping the pods' number, and what it
// goes on with (findings, candidates, outcomes, pending candidates) points
// at copies, one for each object, not into the lists, which would keep
// them whole. A list most of whose objects are named is kept as it is.
func TestSweepLetsGoOfItsViews(t *testing.T) {
	owned := func(er string) func(*fleet.Pod) {
		return func(p *fleet.Pod) {
			p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: p.Name, UID: er}
		}
	}
	runner := func(name, uid, phase string) fleet.EphemeralRunner {
		return fleet.EphemeralRunner{Namespace: "runners", Name: name, UID: uid, ResourceVersion: "1", ScopeKey: acme.Key(), Phase: phase,
			CreatedAt: fleet.StampOf(t0.Add(-time.Hour)), Finalizers: []string{fleet.ARCRegistrationFinalizer}}
	}
	cases := []struct {
		name string
		// healthy is the number of live runner pods, each with its
		// EphemeralRunner and an online registration.
		healthy int
		// dead is the number of terminal pods, each with its
		// EphemeralRunner.
		dead int
		kept bool
	}{
		{name: "few named: let go", healthy: 8, dead: 1},
		{name: "most named: kept", healthy: 1, dead: 3, kept: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			k := &podsSeen{fakeKube: w.kube}
			for i := range c.healthy {
				name, uid := fmt.Sprintf("acme-run-%d", i), fmt.Sprintf("er-run-%d", i)
				w.kube.pods = append(w.kube.pods, fakePod(name, owned(uid)))
				k.ers = append(k.ers, runner(name, uid, "Running"))
				w.gh.runners[acme.Key()] = append(w.gh.runners[acme.Key()], fleet.Registration{ID: int64(100 + i), Name: name, Online: true})
			}
			for i := range c.dead {
				name, uid := fmt.Sprintf("acme-dead-%d", i), fmt.Sprintf("er-dead-%d", i)
				w.kube.pods = append(w.kube.pods, fakePod(name, owned(uid), func(p *fleet.Pod) {
					p.Phase = "Succeeded"
					p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 0, Reason: "Completed"}}
				}))
				k.ers = append(k.ers, runner(name, uid, "Running"))
			}
			// A runner with no pod, failed: judged on its own.
			k.ers = append(k.ers, runner("acme-failed", "er-failed", "Failed"))
			s := w.sweeper()
			s.EphemeralRunners = k
			s.Policy.ARC = true

			res := s.Run(context.Background(), sweep.DryRun)
			require.NoError(t, res.Err)

			require.Len(t, k.given, 1)
			pods, ers := k.given[0], k.listed
			require.Len(t, pods, 1+c.healthy+c.dead)
			assert.Equal(t, sweep.Observed{Pods: len(pods)}, res.Observed)

			var held []*reconcile.Finding
			for i := range res.Class.Findings {
				held = append(held, &res.Class.Findings[i])
			}
			for i := range res.Confirmation.Candidates {
				held = append(held, &res.Confirmation.Candidates[i].Finding)
			}
			for i := range res.Outcomes {
				held = append(held, &res.Outcomes[i].Candidate.Finding)
			}
			for i := range res.Pending {
				held = append(held, &res.Pending[i].Finding)
			}
			podCopy := map[string]*fleet.Pod{}
			erCopy := map[string]*fleet.EphemeralRunner{}
			var named []string
			for _, f := range held {
				if f.Pod != nil {
					named = append(named, "pod "+f.Pod.Name)
					i := slices.IndexFunc(pods, func(p fleet.Pod) bool { return p.UID == f.Pod.UID })
					require.GreaterOrEqual(t, i, 0, f.Key)
					assert.Equal(t, pods[i], *f.Pod, "%s names the pod as it was listed", f.Key)
					assert.Equal(t, c.kept, f.Pod == &pods[i], "%s points into the pods listed: %v", f.Key, c.kept)
					if prev, ok := podCopy[f.Pod.UID]; ok {
						assert.Same(t, prev, f.Pod, "%s: one copy of the pod for all that name it", f.Key)
					}
					podCopy[f.Pod.UID] = f.Pod
				}
				for _, e := range []*fleet.EphemeralRunner{f.EphemeralRunner, f.OwnerRunner} {
					if e == nil {
						continue
					}
					named = append(named, "er "+e.Name)
					i := slices.IndexFunc(ers, func(r fleet.EphemeralRunner) bool { return r.UID == e.UID })
					require.GreaterOrEqual(t, i, 0, f.Key)
					assert.Equal(t, ers[i], *e, "%s names the runner as it was listed", f.Key)
					assert.Equal(t, c.kept, e == &ers[i], "%s points into the runners listed: %v", f.Key, c.kept)
					if prev, ok := erCopy[e.UID]; ok {
						assert.Same(t, prev, e, "%s: one copy of the runner for all that name it", f.Key)
					}
					erCopy[e.UID] = e
				}
			}
			assert.Contains(t, named, "pod acme-dead-0", "the dead pod is found")
			assert.Contains(t, named, "er acme-dead-0", "with its EphemeralRunner")
			assert.Contains(t, named, "er acme-failed", "the failed runner is found")
			if c.kept {
				assert.Equal(t, pods, res.Observation.Pods, "a list most of whose pods are named is kept")
			} else {
				assert.Nil(t, res.Observation.Pods, "the pod views are let go of")
				assert.Nil(t, res.Observation.EphemeralRunners, "the EphemeralRunner views are let go of")
			}
			require.NotEmpty(t, res.Outcomes, "the dead pods are acted on")
		})
	}
}
