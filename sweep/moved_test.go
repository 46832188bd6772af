package sweep_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// A busy org's list moves under every read: while page 2 is read, a
// registration on page 1 is removed and a new one registers, so a runner
// slides onto page 1 unseen, every count still agreeing. The scope is
// judged in every sweep all the same (never skipped, the sweep complete):
// the zombie, listed offline, goes by its registration first; the pod that
// never registered goes once a look-up by name, one request, has found no
// such runner; the busy runner is spared. The list costs its pages and
// the one revalidation that found it moved, and is never read again.
func TestSweepJudgesAListThatMoves(t *testing.T) {
	r := newRig(t)
	zombie := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	r.runner("acme-busy", "offline", true)
	r.pod("acme-busy", testenv.Running())
	r.pod("acme-unregistered", testenv.Running())
	for i := range 250 {
		r.sim.AddRunner(orgScope, ghRunner(fmt.Sprintf("team-b-%03d", i)))
	}
	churn := 0
	r.sim.Fault(orgScope, ghsim.EndpointList, ghsim.Fault{Page: 2, Times: 1000, Before: func() {
		// A removal on page 1 and a registration at the end.
		churn++
		rs := r.sim.Runners(orgScope)
		for _, x := range rs {
			if x.Name != "acme-zombie" && x.Name != "acme-busy" {
				require.True(t, r.sim.RemoveRunner(orgScope, x.ID))
				break
			}
		}
		r.sim.AddRunner(orgScope, ghRunner(fmt.Sprintf("team-b-new-%03d", churn)))
	}})

	r.clock.Add(11 * time.Minute) // past the registration deadline
	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	assert.Equal(t, sweep.StatusComplete, first.Status)
	assert.Empty(t, first.Class.Skipped, "a list that moved is no skip")
	assert.Equal(t, []string{orgScope}, first.Moved)
	assert.Len(t, first.Pending, 2, "the zombie and the unregistered pod are marked")
	// Three pages, and page 1 read again, which found the list moved.
	assert.EqualValues(t, 4, first.GitHub.Requests)

	r.sim.ResetRequests()
	r.clock.Add(6 * time.Minute) // past confirm-after
	second := r.run(sweep.Act)
	require.NoError(t, second.Err)
	assert.Equal(t, sweep.StatusComplete, second.Status)
	assert.Empty(t, second.Class.Skipped)
	got := map[string]string{}
	for _, o := range second.Outcomes {
		got[o.Candidate.Pod.Name] = string(o.Candidate.Verdict) + "/" + string(o.Result)
	}
	assert.Equal(t, map[string]string{"acme-zombie": "zombie/deleted", "acme-unregistered": "unregistered/deleted"}, got)
	assert.False(t, r.podExists("acme-zombie"))
	assert.False(t, r.podExists("acme-unregistered"))
	assert.False(t, r.runnerExists(zombie.ID))
	assert.True(t, r.podExists("acme-busy"), "rule 2: busy is never reaped")

	var lookups []string
	pages := 0
	for _, req := range r.sim.Requests() {
		q, err := url.ParseQuery(req.Query)
		require.NoError(t, err)
		switch {
		case q.Get("name") != "":
			lookups = append(lookups, q.Get("name"))
		case req.Method == http.MethodGet:
			pages++
		}
	}
	assert.Equal(t, []string{"acme-unregistered"}, lookups, "one look-up, for the one candidate whose absence the list could not prove")
	assert.Equal(t, 4, pages, "the pages and one revalidation, never a second read")
	// The pages, the revalidation, the registration delete, the look-up.
	assert.EqualValues(t, 6, second.GitHub.Requests)

	summary := r.lines("sweep")
	require.Len(t, summary, 2)
	assert.Equal(t, []any{orgScope}, summary[1]["scopes_moved"])
	assert.Equal(t, []any{}, summary[1]["scopes_skipped"])
	assert.Len(t, r.lines("runner lists moved while read"), 2)
}

// A list that holds fewer runners than its total_count says (a runner slid
// onto a page already read, or a server that drops items) is no skip:
// what it lists counts, and what it does not is proven by name before
// anything rests on it. Here the zombie, listed, goes; the runner the
// answers leave out is looked up, found, and its pod left alone.
func TestSweepJudgesAListShortOfItsTotal(t *testing.T) {
	r := newRig(t)
	zombie := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	for i := range 120 {
		r.runner(fmtName("acme-idle", i), "online", false)
	}
	// The last runner of page 2 is left out of every answer: acme-idle-119,
	// whose pod runs.
	r.pod(fmtName("acme-idle", 119), testenv.Running())
	r.sim.Fault(orgScope, ghsim.EndpointList, ghsim.Fault{DropItems: 1, Page: 2})

	r.clock.Add(11 * time.Minute)
	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	assert.Empty(t, first.Class.Skipped)
	assert.Equal(t, []string{orgScope}, first.Moved)
	r.clock.Add(6 * time.Minute)
	second := r.run(sweep.Act)
	require.NoError(t, second.Err)
	assert.Equal(t, sweep.StatusComplete, second.Status)
	got := map[string]string{}
	for _, o := range second.Outcomes {
		got[o.Candidate.Pod.Name] = string(o.Candidate.Verdict) + "/" + string(o.Result)
	}
	assert.Equal(t, map[string]string{
		"acme-zombie":             "zombie/deleted",
		fmtName("acme-idle", 119): "unregistered/skipped-registered",
	}, got)
	assert.False(t, r.podExists("acme-zombie"))
	assert.False(t, r.runnerExists(zombie.ID))
	assert.True(t, r.podExists(fmtName("acme-idle", 119)), "listed by name: left alone")
}
