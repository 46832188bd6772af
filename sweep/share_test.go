package sweep_test

import (
	"context"
	"slices"
	"testing"
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
}

func (k *podsSeen) ListEphemeralRunners(_ context.Context, pods []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	k.given = append(k.given, pods)
	return nil, nil
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

// TestSweepLetsGoOfItsViews: once judged, the sweep drops the pod views
// it listed, keeping their number, and what it goes on with (its findings,
// candidates, outcomes and pending candidates) points at copies of the
// pods, not into the list, which would keep the whole list live.
func TestSweepLetsGoOfItsViews(t *testing.T) {
	w := newWorld()
	w.addDead()
	k := &podsSeen{fakeKube: w.kube}
	s := w.sweeper()
	s.EphemeralRunners = k
	s.Policy.ARC = true

	res := s.Run(context.Background(), sweep.DryRun)
	require.NoError(t, res.Err)

	require.Len(t, k.given, 1)
	listed := k.given[0]
	require.Len(t, listed, 2)
	assert.Nil(t, res.Observation.Pods, "the views are let go of")
	assert.Equal(t, sweep.Observed{Pods: 2}, res.Observed)

	into := func(p *fleet.Pod) bool {
		for i := range listed {
			if p == &listed[i] {
				return true
			}
		}
		return false
	}
	var held []reconcile.Finding
	held = append(held, res.Class.Findings...)
	for _, c := range res.Confirmation.Candidates {
		held = append(held, c.Finding)
	}
	for _, o := range res.Outcomes {
		held = append(held, o.Candidate.Finding)
	}
	for _, c := range res.Pending {
		held = append(held, c.Finding)
	}
	pods := 0
	for _, f := range held {
		if f.Pod == nil {
			continue
		}
		pods++
		assert.False(t, into(f.Pod), "%s points into the listed pods", f.Key)
		i := slices.IndexFunc(listed, func(p fleet.Pod) bool { return p.UID == f.Pod.UID })
		require.GreaterOrEqual(t, i, 0, f.Key)
		assert.Equal(t, listed[i], *f.Pod, "%s names the pod as it was listed", f.Key)
	}
	require.Positive(t, pods, "the dead pod is found, confirmed and acted on")
	require.NotEmpty(t, res.Outcomes, "the dead pod is acted on")
}
