package reconcile

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// TestIdentitiesAgainstDefinitions checks every lookup of the classifier's
// indexes against its definition, worked out by a loop over the whole
// observation, on random small fleets dense with what makes identity hard:
// shared names and ids, pods of no known scope, names and ids of zero,
// EphemeralRunners listed twice under one UID, registrations listed twice,
// incomplete lists.
func TestIdentitiesAgainstDefinitions(t *testing.T) { //nolint:gocyclo // each lookup's definition is a plain loop written beside its check
	scopes := []string{"", "org:a", "org:b", "org:c"}
	names := []string{"", "r1", "r2", "r3", "r4"}
	pick := func(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 7))
		var obs Observation
		for i := range r.IntN(6) {
			obs.EphemeralRunners = append(obs.EphemeralRunners, fleet.EphemeralRunner{
				Namespace: "ns", Name: pick(r, names[1:]), UID: fmt.Sprintf("u%d", r.IntN(4)),
				ScopeKey: pick(r, scopes[:3]), RunnerID: int64(r.IntN(4)), Phase: fmt.Sprint(i),
			})
		}
		for i := range r.IntN(12) {
			p := fleet.Pod{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: fmt.Sprintf("pod-%d", i),
				ScopeKey: pick(r, scopes[:3]), RunnerName: pick(r, names), RunnerID: int64(r.IntN(4)) * int64(r.IntN(2)), HasRunner: true}
			if r.IntN(2) == 0 {
				p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: p.RunnerName, UID: fmt.Sprintf("u%d", r.IntN(5))}
			}
			obs.Pods = append(obs.Pods, p)
		}
		obs.Lists = map[string]ScopeList{}
		// The scope "" is no configured scope's key (each holds a colon),
		// but Classify must still answer for one.
		for _, key := range scopes[:3] {
			l := ScopeList{Complete: r.IntN(4) != 0}
			for range r.IntN(6) {
				l.Runners = append(l.Runners, fleet.Registration{ID: int64(1 + r.IntN(4)), Name: pick(r, names[1:]), Online: r.IntN(2) == 0, Busy: r.IntN(3) == 0})
			}
			obs.Lists[key] = l
		}

		ers := newRunnerIndex(obs.EphemeralRunners)
		lastER := func(uid string) *fleet.EphemeralRunner {
			var found *fleet.EphemeralRunner
			for i := range obs.EphemeralRunners {
				if obs.EphemeralRunners[i].UID == uid {
					found = &obs.EphemeralRunners[i]
				}
			}
			return found
		}
		runnerID := func(p *fleet.Pod) int64 {
			if p.RunnerID == 0 && p.Owner != nil {
				if er := lastER(p.Owner.UID); er != nil {
					return er.RunnerID
				}
				return 0
			}
			return p.RunnerID
		}
		ix := index(obs, runnerID, true)
		in := func(p *fleet.Pod, scope string) bool { return p.ScopeKey == scope || scope != "" && p.ScopeKey == "" }

		for _, uid := range []string{"", "u0", "u1", "u2", "u3", "u4"} {
			require.Same(t, lastER(uid), ers.byUID(uid), "seed %d: EphemeralRunner by UID %q", seed, uid)
		}
		for i := range obs.Pods {
			require.Equal(t, runnerID(&obs.Pods[i]), ix.podIDs[i], "seed %d: pod %d's runner id", seed, i)
		}
		for _, scope := range scopes {
			for _, name := range names {
				var want []*fleet.Pod
				for i := range obs.Pods {
					if p := &obs.Pods[i]; name != "" && p.RunnerName == name && p.ScopeKey == scope {
						want = append(want, p)
					}
				}
				for i := range obs.Pods {
					if p := &obs.Pods[i]; name != "" && p.RunnerName == name && scope != "" && p.ScopeKey == "" {
						want = append(want, p)
					}
				}
				require.Equal(t, want, nilIfEmpty(ix.claimants(scope, name)), "seed %d: claimants of %q in %q", seed, name, scope)
				require.Equal(t, len(want), ix.claims(scope, name), "seed %d: claims of %q in %q", seed, name, scope)
			}
			for id := range int64(5) {
				// A pod of no known scope counts in every scope, and
				// again under "" itself: ambiguous there, never tied.
				n := 0
				for i := range obs.Pods {
					if p := &obs.Pods[i]; id != 0 && runnerID(p) == id && p.ScopeKey == scope {
						n++
					}
					if p := &obs.Pods[i]; id != 0 && runnerID(p) == id && p.ScopeKey == "" {
						n++
					}
				}
				require.Equal(t, n, ix.idClaims(scope, id), "seed %d: claims of id %d in %q", seed, id, scope)
			}
			l, complete := obs.Lists[scope]
			_, indexed := ix.lists[scope]
			require.Equal(t, complete && l.Complete, indexed, "seed %d: list %q indexed", seed, scope)
			if !indexed {
				continue
			}
			for id := range int64(6) {
				var want *fleet.Registration
				for i := range l.Runners {
					if l.Runners[i].ID == id {
						want = &l.Runners[i]
					}
				}
				require.Same(t, want, ix.lists[scope].byID(id), "seed %d: registration %d of %q", seed, id, scope)
			}
			for _, name := range names {
				var want []*fleet.Registration
				for i := range l.Runners {
					if l.Runners[i].Name == name {
						want = append(want, &l.Runners[i])
					}
				}
				require.Equal(t, want, nilIfEmpty(pointers(l.Runners, ix.lists[scope].byName.of(name))), "seed %d: registrations named %q in %q", seed, name, scope)
			}
			for i := range l.Runners {
				reg := &l.Runners[i]
				want := ix.claims(scope, reg.Name) > 0
				for j := range obs.Pods {
					if p := &obs.Pods[j]; runnerID(p) == reg.ID && reg.ID != 0 && in(p, scope) && (p.RunnerName == reg.Name || p.RunnerName == "") {
						want = true
					}
				}
				for _, er := range obs.EphemeralRunners {
					if er.ScopeKey == scope && (er.RunnerID != 0 && er.RunnerID == reg.ID || er.Name == reg.Name) {
						want = true
					}
				}
				require.Equal(t, want, ix.backed(scope, reg), "seed %d: registration %d %q of %q backed", seed, reg.ID, reg.Name, scope)
			}
		}
	}
}

// nilIfEmpty is s, or nil when it is empty, so that an empty answer
// compares equal to a definition that found nothing.
func nilIfEmpty[V any](s []*V) []*V {
	if len(s) == 0 {
		return nil
	}
	return slices.Clip(s)
}
