package reap

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// TestReapNeverStarted: a never-started runner goes as an unregistered one
// does: its registration first where it has one, else right after a look-up
// by name finds no such runner; a bare pod by its delete, a pod ARC owns by
// its EphemeralRunner's or Runner's; one that only waits for room in the
// cluster is reported and writes nothing.
func TestReapNeverStarted(t *testing.T) {
	owned := func(c reconcile.Candidate, kind, apiVersion string) reconcile.Candidate {
		c.Pod.Owner = &fleet.Owner{APIVersion: apiVersion, Kind: kind, Name: c.Pod.Name, UID: "owner-" + c.Pod.Name}
		if kind == fleet.EphemeralRunnerKind {
			c.OwnerRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: c.Pod.Name, UID: "owner-" + c.Pod.Name, ResourceVersion: "3", ScopeKey: scope.Key()}
		}
		return c
	}
	named := func(c reconcile.Candidate) reconcile.Candidate { c.Pod.RunnerName = c.Pod.Name; return c }
	reportOnly := named(cand(fleet.NeverStarted, "no-room", 0))
	reportOnly.ReportOnly = true
	cases := []struct {
		name   string
		c      reconcile.Candidate
		action Action
		result fleet.Result
		calls  []string
	}{
		{"bare pod, registration listed", named(cand(fleet.NeverStarted, "bare-reg", 7)), DeleteRegistrationThenPod, fleet.Deleted,
			[]string{"gh:org:acme:7", "pod:bare-reg"}},
		{"bare pod, none listed: looked up first", named(cand(fleet.NeverStarted, "bare", 0)), DeletePod, fleet.Deleted,
			[]string{"gh-find:org:acme:bare", "pod:bare"}},
		{"EphemeralRunner's pod", owned(named(cand(fleet.NeverStarted, "set-runner", 8)), fleet.EphemeralRunnerKind, fleet.EphemeralRunnerAPIVersion),
			DeleteRegistrationThenEphemeralRunner, fleet.Deleted, []string{"gh:org:acme:8", "er:set-runner"}},
		{"legacy Runner's pod", owned(named(cand(fleet.NeverStarted, "legacy", 0)), fleet.LegacyRunnerKind, fleet.LegacyRunnerAPIVersion),
			DeleteRunner, fleet.Deleted, []string{"gh-find:org:acme:legacy", "owner:Runner:legacy"}},
		{"waiting for room: reported", reportOnly, Report, fleet.Reported, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			o := opts()
			o.Limits.MaxActions = 1
			outs := New(rec, rec, o).Reap(context.Background(), 10, []reconcile.Candidate{tc.c})
			assert.Equal(t, tc.action, outs[0].Action)
			assert.Equal(t, tc.result, outs[0].Result)
			assert.NoError(t, outs[0].Err)
			// What it asked of GitHub and wrote, in order: not the
			// pre-flight's checks, nor the Event and ServiceAccount
			// that follow a write.
			var got []string
			for _, c := range rec.calls {
				if !strings.HasPrefix(c, "check-") && !strings.HasPrefix(c, "event:") && !strings.HasPrefix(c, "sa:") {
					got = append(got, c)
				}
			}
			assert.Equal(t, tc.calls, got, "all calls: %v", rec.calls)
		})
	}
}
