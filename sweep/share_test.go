package sweep_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
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
	assert.Equal(t, res.Observation.Pods, k.given[0], "the pods the sweep listed")
	regs := res.Observation.Lists[acme.Key()].Runners
	require.Len(t, regs, 3)
	pods := res.Observation.Pods
	require.Len(t, pods, 2)
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	assert.True(t, same(regs[0].Name, pods[0].RunnerName), "acme-live is the pod view's string")
	assert.True(t, same(regs[1].Name, pods[1].RunnerName), "acme-other is the pod view's string")
	assert.Equal(t, "acme-zombie", regs[2].Name, "a name no pod has is kept")
}
