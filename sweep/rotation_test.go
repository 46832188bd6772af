package sweep_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// manyScopes gives the rig n organisations, s0 to s(n-1), configured in
// that order, and caps the scopes a sweep lists at perSweep.
func manyScopes(t *testing.T, n, perSweep int) (*rig, []string) {
	t.Helper()
	var scopes []fleet.Scope
	var keys []string
	for i := range n {
		sc, err := fleet.ParseScope(fmt.Sprintf("org:s%d", i))
		require.NoError(t, err)
		scopes = append(scopes, sc)
		keys = append(keys, sc.Key())
	}
	r := newRig(t, func(c *config.Config) { c.Scopes, c.MaxScopesPerSweep = scopes, perSweep })
	for _, k := range keys {
		r.sim.AddScope(k)
	}
	return r, keys
}

// listedScopes are the scopes whose runner list was asked for since the
// last reset, sorted.
func (r *rig) listedScopes() []string {
	seen := map[string]bool{}
	for _, q := range r.sim.Requests() {
		if q.Endpoint == ghsim.EndpointList {
			seen[q.Scope] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Seven scopes, at most three a sweep. Each sweep lists at most
// three and names the four it left; the sweeps take the scopes in a fair
// rotation, so every scope is listed within ceil(7/3) = 3 sweeps; a mark in
// a scope not listed is held, neither confirmed nor cleared; a terminal pod
// of an unlisted scope still goes at once; the budget alone does not degrade
// the exit status; and a zombie in the last scope of the rotation is reaped
// within a bounded number of sweeps.
func TestScopeRotationListsEveryScopeAndReapsTheLast(t *testing.T) {
	const n, perSweep = 7, 3
	r, keys := manyScopes(t, n, perSweep)
	last := keys[n-1]
	zombie := ghRunner("s6-zombie")
	zombie.Status = "offline"
	zombie = r.sim.AddRunner(last, zombie)
	r.orgPod("s6", "s6-zombie", testenv.Running())
	r.sim.AddRunner(keys[2], ghRunner("s2-healthy"))
	r.orgPod("s2", "s2-healthy", testenv.Running())
	r.orgPod("s5", "s5-dead", dead())
	r.clock.Add(11 * time.Minute) // past the registration deadline

	zombieKey := ""
	listedIn := map[string][]int{}
	var reapedAt int
	for i := 1; i <= 12 && reapedAt == 0; i++ {
		r.sim.ResetRequests()
		res := r.run(sweep.Act)
		require.NoError(t, res.Err, "sweep %d", i)
		assert.Equal(t, sweep.StatusComplete, res.Status, "sweep %d: a scope the budget defers does not degrade the sweep", i)

		listed := r.listedScopes()
		assert.Len(t, listed, perSweep, "sweep %d lists exactly its budget", i)
		assert.Len(t, res.Deferred, n-perSweep, "sweep %d names the scopes it left", i)
		for _, d := range res.Deferred {
			assert.NotContains(t, listed, d, "sweep %d: a deferred scope is not asked", i)
		}
		for _, s := range listed {
			listedIn[s] = append(listedIn[s], i)
		}
		if i == 1 {
			assert.False(t, r.podExists("s5-dead"), "a terminal pod goes though its scope was not listed")
		}

		zombieListed := false
		for _, s := range listed {
			zombieListed = zombieListed || s == last
		}
		for _, c := range res.Confirmation.Candidates {
			if c.ScopeKey == last {
				zombieKey = c.Key
			}
		}
		if zombieKey != "" && !zombieListed {
			assert.Contains(t, res.Confirmation.Held, zombieKey, "sweep %d: the mark of a scope not listed is held", i)
			assert.Contains(t, res.Confirmation.Marks, zombieKey, "sweep %d: and kept in the ledger", i)
		}
		for _, o := range res.Outcomes {
			if o.Candidate.ScopeKey == last && o.Candidate.Verdict == fleet.Zombie {
				assert.True(t, zombieListed, "sweep %d: the zombie is only acted on in a sweep that listed its scope", i)
				reapedAt = i
			}
		}
		r.clock.Add(2 * time.Minute)
	}

	// The log says which scopes were left, once a sweep and not as
	// warnings, and the summary keeps them apart from faulted scopes.
	assert.Empty(t, r.lines("scope skipped"), "a deferred scope is not a skipped one")
	deferredLines := r.lines("scopes deferred")
	require.Len(t, deferredLines, reapedAt)
	assert.Equal(t, []any{"org:s3", "org:s4", "org:s5", "org:s6"}, deferredLines[0]["scopes"])
	assert.Equal(t, "org:s3", deferredLines[0]["next_scope"])
	summaries := r.lines("sweep")
	require.Len(t, summaries, reapedAt)
	assert.Equal(t, []any{}, summaries[0]["scopes_skipped"])
	assert.Equal(t, []any{"org:s3", "org:s4", "org:s5", "org:s6"}, summaries[0]["scopes_deferred"])

	// Fair: every scope was listed within the first ceil(n/perSweep)
	// sweeps, and no two listings of a scope are more than that apart.
	rounds := (n + perSweep - 1) / perSweep
	for _, k := range keys {
		require.NotEmpty(t, listedIn[k], "scope %s was never listed", k)
		assert.LessOrEqual(t, listedIn[k][0], rounds, "scope %s first listed in sweep %d", k, listedIn[k][0])
		for j := 1; j < len(listedIn[k]); j++ {
			assert.LessOrEqual(t, listedIn[k][j]-listedIn[k][j-1], rounds, "scope %s waited too long between listings", k)
		}
	}
	// Bounded: the zombie's scope is first listed by sweep 3, its mark
	// matures 5 minutes (three sweeps 2 minutes apart) later, and its
	// scope's next listing after that is at most 3 sweeps on.
	require.NotZero(t, reapedAt, "the zombie in the last scope was never reaped")
	assert.LessOrEqual(t, reapedAt, rounds+3+rounds)
	assert.False(t, r.podExists("s6-zombie"))
	for _, x := range r.sim.Runners(last) {
		assert.NotEqual(t, zombie.ID, x.ID, "the zombie's registration is gone")
	}
	assert.True(t, r.podExists("s2-healthy"), "a healthy runner is never touched")
}

// Without a cap, every scope is listed each sweep and the ledger keeps no
// rotation position.
func TestNoScopeCapListsEveryScope(t *testing.T) {
	r, keys := manyScopes(t, 4, 0)
	for range 2 {
		r.sim.ResetRequests()
		res := r.run(sweep.Act)
		require.NoError(t, res.Err)
		assert.Equal(t, sweep.StatusComplete, res.Status)
		assert.Empty(t, res.Deferred)
		assert.Empty(t, res.NextScope)
		assert.Equal(t, keys, r.listedScopes())
	}
}
