package state

import (
	"math"
	"slices"
	"strings"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ShareWithPods makes the cached registrations hold no bytes the pod views
// already hold, and little room they do not use: each page's runners are
// copied into the smallest block that holds them (JSON decoding left a
// page of 100 room for 146), and a registration named as a pod's runner
// holds the pod view's string instead of its own copy of it. Every value
// stays as it was.
//
// The ledger is decoded before the pods are listed and its cache lives for
// the whole sweep, while the pods', EphemeralRunners' and lists' views pile
// up to the heap's highest. Called after the pods are listed, the old
// copies are garbage before the EphemeralRunners are read.
//
// pods are only read. The pages are rewritten in place, so the caller
// must hold the only reference to lists' pages, as a Load's caller does.
func ShareWithPods(lists map[string]ListCache, pods []fleet.Pod) {
	byName := make([]int32, 0, min(len(pods), math.MaxInt32))
	for i := range cap(byName) {
		if pods[i].RunnerName != "" {
			byName = append(byName, int32(i))
		}
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(pods[a].RunnerName, pods[b].RunnerName) })
	for _, c := range lists {
		for p := range c.Pages {
			runners := slices.Clone(c.Pages[p].Runners)
			for r := range runners {
				reg := &runners[r]
				i, found := slices.BinarySearchFunc(byName, reg.Name, func(k int32, name string) int {
					return strings.Compare(pods[k].RunnerName, name)
				})
				if found {
					reg.Name = pods[byName[i]].RunnerName
				}
			}
			c.Pages[p].Runners = runners
		}
	}
}
