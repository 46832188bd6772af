package state_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
)

// TestShareWithPods: the cached registrations keep every value, take the
// pod views' name strings where a pod's runner has their name, and keep no
// spare room; the pods are only read.
func TestShareWithPods(t *testing.T) {
	pod := func(runner string) fleet.Pod {
		return fleet.Pod{Namespace: "ci", Name: "pod-" + runner, RunnerName: strings.Clone(runner)}
	}
	regs := func(names ...string) []fleet.Registration {
		out := make([]fleet.Registration, 0, 2*len(names)+1)
		for i, n := range names {
			out = append(out, fleet.Registration{ID: int64(i + 1), Name: strings.Clone(n), Busy: i%2 == 0, Labels: []string{"team-" + n}})
		}
		return out
	}
	tests := []struct {
		name   string
		pods   []fleet.Pod
		lists  map[string]state.ListCache
		shared []string // the registration names that must be a pod's string
	}{
		{
			name: "runners with pods and without",
			pods: []fleet.Pod{pod("c"), pod("a"), pod("b"), {Namespace: "ci", Name: "no-runner-name"}},
			lists: map[string]state.ListCache{
				"org:acme": {Pages: []state.CachedPage{{ETag: `"1"`, TotalCount: 3, Runners: regs("a", "ghost", "c"), NextPage: 2}, {ETag: `"2"`, TotalCount: 3, Runners: regs("b")}}},
				"org:beta": {Pages: []state.CachedPage{{ETag: `"3"`, Runners: regs("b", "")}}},
			},
			shared: []string{"a", "b", "b", "c"},
		},
		{
			name: "two pods under one runner name",
			pods: []fleet.Pod{pod("a"), pod("a")},
			lists: map[string]state.ListCache{
				"org:acme": {Pages: []state.CachedPage{{Runners: regs("a")}}},
			},
			shared: []string{"a"},
		},
		{
			name: "no pods",
			lists: map[string]state.ListCache{
				"org:acme": {Pages: []state.CachedPage{{Runners: regs("a")}}},
			},
		},
		{
			name: "empty and missing pages keep their kind",
			pods: []fleet.Pod{pod("a")},
			lists: map[string]state.ListCache{
				"org:acme": {Pages: []state.CachedPage{{Runners: []fleet.Registration{}}, {Runners: nil}}},
				"org:beta": {},
			},
		},
		{name: "no lists", pods: []fleet.Pod{pod("a")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]state.ListCache{}
			for k, c := range tc.lists {
				pages := make([]state.CachedPage, len(c.Pages))
				for i, p := range c.Pages {
					pages[i] = p
					if p.Runners != nil {
						pages[i].Runners = append([]fleet.Registration{}, p.Runners...)
					}
				}
				if c.Pages == nil {
					pages = nil
				}
				want[k] = state.ListCache{Pages: pages, Label: c.Label}
			}
			podsBefore := append([]fleet.Pod(nil), tc.pods...)

			state.ShareWithPods(tc.lists, tc.pods)

			if tc.lists != nil {
				assert.Equal(t, want, tc.lists, "every value as it was")
			}
			assert.Equal(t, podsBefore, tc.pods, "the pods are only read")
			var shared []string
			for _, c := range tc.lists {
				for _, p := range c.Pages {
					assert.LessOrEqual(t, cap(p.Runners), len(p.Runners)+len(p.Runners)/8, "no more room than the allocator's rounding")
					for _, r := range p.Runners {
						for _, pd := range tc.pods {
							if r.Name != "" && unsafe.StringData(r.Name) == unsafe.StringData(pd.RunnerName) {
								shared = append(shared, r.Name)
								break
							}
						}
					}
				}
			}
			assert.ElementsMatch(t, tc.shared, shared, "names held in the pods' strings")
		})
	}
	require.NotPanics(t, func() { state.ShareWithPods(nil, nil) })
}

// TestShareWithPodsDropsTheDecodersRoom: a page of the size GitHub lists,
// decoded from the ledger's JSON with room to spare, keeps none of it.
func TestShareWithPodsDropsTheDecodersRoom(t *testing.T) {
	var page []fleet.Registration
	for i := range 100 {
		page = append(page, fleet.Registration{ID: int64(i + 1), Name: fmt.Sprintf("runner-%d", i)})
	}
	b, err := json.Marshal(map[string]state.ListCache{"org:acme": {Pages: []state.CachedPage{{Runners: page}}}})
	require.NoError(t, err)
	var lists map[string]state.ListCache
	require.NoError(t, json.Unmarshal(b, &lists))
	decoded := lists["org:acme"].Pages[0].Runners
	require.Greater(t, cap(decoded), len(decoded)+len(decoded)/8, "the decoder's room this test is about")

	state.ShareWithPods(lists, nil)

	got := lists["org:acme"].Pages[0].Runners
	assert.Equal(t, page, got)
	assert.LessOrEqual(t, cap(got), len(got)+len(got)/8)
}
