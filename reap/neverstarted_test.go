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
// cluster is reported and writes nothing. A look-up that finds the runner
// busy spares it; one that finds it offline (its controller registered it,
// it never ran) makes that registration the one to delete first, whose 422
// still spares it.
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
	knownID := func(c reconcile.Candidate, id int64) reconcile.Candidate { c.RunnerID = id; return c }
	cases := []struct {
		name   string
		c      reconcile.Candidate
		action Action
		result fleet.Result
		calls  []string
		// found answers the look-up by name; gh answers the
		// registration deletes.
		found map[string]*fleet.Registration
		gh    map[int64]fleet.Result
	}{
		{"bare pod, registration listed", named(cand(fleet.NeverStarted, "bare-reg", 7)), DeleteRegistrationThenPod, fleet.Deleted,
			[]string{"gh:org:acme:7", "pod:bare-reg"}, nil, nil},
		{"bare pod, none listed: looked up first", named(cand(fleet.NeverStarted, "bare", 0)), DeletePod, fleet.Deleted,
			[]string{"gh-find:org:acme:bare", "pod:bare"}, nil, nil},
		{"EphemeralRunner's pod", owned(named(cand(fleet.NeverStarted, "set-runner", 8)), fleet.EphemeralRunnerKind, fleet.EphemeralRunnerAPIVersion),
			DeleteRegistrationThenEphemeralRunner, fleet.Deleted, []string{"gh:org:acme:8", "er:set-runner"}, nil, nil},
		{"legacy Runner's pod", owned(named(cand(fleet.NeverStarted, "legacy", 0)), fleet.LegacyRunnerKind, fleet.LegacyRunnerAPIVersion),
			DeleteRunner, fleet.Deleted, []string{"gh-find:org:acme:legacy", "owner:Runner:legacy"}, nil, nil},
		{"waiting for room: reported", reportOnly, Report, fleet.Reported, nil, nil, nil},
		{name: "none listed, found busy by name: spared", c: named(cand(fleet.NeverStarted, "busy", 0)), action: DeletePod, result: fleet.SparedBusy,
			calls: []string{"gh-find:org:acme:busy"}, found: map[string]*fleet.Registration{"busy": {ID: 9, Name: "busy", Busy: true}}},
		{name: "none listed, found offline by name: its registration goes first", c: named(cand(fleet.NeverStarted, "offline", 0)),
			action: DeleteRegistrationThenPod, result: fleet.Deleted, calls: []string{"gh-find:org:acme:offline", "gh:org:acme:9", "pod:offline"},
			found: map[string]*fleet.Registration{"offline": {ID: 9, Name: "offline"}}},
		{name: "found offline, and GitHub refuses its delete for a job: spared", c: named(cand(fleet.NeverStarted, "took-a-job", 0)),
			action: DeleteRegistrationThenPod, result: fleet.SparedBusy, calls: []string{"gh-find:org:acme:took-a-job", "gh:org:acme:9"},
			found: map[string]*fleet.Registration{"took-a-job": {ID: 9, Name: "took-a-job"}}, gh: map[int64]fleet.Result{9: fleet.Busy}},
		{name: "EphemeralRunner's pod, found offline by name: its registration, then the EphemeralRunner",
			c:      owned(named(cand(fleet.NeverStarted, "set-found", 0)), fleet.EphemeralRunnerKind, fleet.EphemeralRunnerAPIVersion),
			action: DeleteRegistrationThenEphemeralRunner, result: fleet.Deleted, calls: []string{"gh-find:org:acme:set-found", "gh:org:acme:9", "er:set-found"},
			found: map[string]*fleet.Registration{"set-found": {ID: 9, Name: "set-found"}}},
		{name: "found online by name: left", c: named(cand(fleet.NeverStarted, "online", 0)), action: DeletePod, result: fleet.SkippedRegistered,
			calls: []string{"gh-find:org:acme:online"}, found: map[string]*fleet.Registration{"online": {ID: 9, Name: "online", Online: true}}},
		{name: "found by name with another id than Kubernetes knows: left", c: knownID(named(cand(fleet.NeverStarted, "other-id", 0)), 8),
			action: DeletePod, result: fleet.SkippedRegistered, calls: []string{"gh-find:org:acme:other-id"},
			found: map[string]*fleet.Registration{"other-id": {ID: 9, Name: "other-id"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{found: tc.found, ghResult: tc.gh}
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
