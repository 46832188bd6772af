package sweep_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// realLatency is the round trip the scope budget is measured at: api.github.com
// answers in 100-300 ms in practice.
const realLatency = 150 * time.Millisecond

// scaleLatency is the latency the scale measurements run at: a tenth of
// realLatency so that 500 scopes take seconds, not 75 s, unless
// SCALE_FULL_LATENCY=1 asks for the real figure (make bench does).
func scaleLatency() time.Duration {
	if os.Getenv("SCALE_FULL_LATENCY") == "1" {
		return realLatency
	}
	return realLatency / 10
}

// slowScopes is a rig of n scopes, org:s0 to org:s(n-1), each with one
// online runner (one page each), behind a simulator that answers every
// request after latency.
func slowScopes(t *testing.T, n int, latency time.Duration, mods ...func(*config.Config)) (*rig, []string) {
	t.Helper()
	var scopes []fleet.Scope
	var keys []string
	for i := range n {
		sc, err := fleet.ParseScope(fmt.Sprintf("org:s%d", i))
		require.NoError(t, err)
		scopes, keys = append(scopes, sc), append(keys, sc.Key())
	}
	r := newRig(t, append([]func(*config.Config){func(c *config.Config) { c.Scopes = scopes }}, mods...)...)
	sim := ghsim.New(ghsim.Options{Token: token, Latency: latency})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	r.sim, r.url, r.cfg.GitHub.APIURL = sim, url, url
	for i, k := range keys {
		sim.AddScope(k)
		sim.AddRunner(k, ghRunner(fmt.Sprintf("build-%d", i)))
	}
	return r, keys
}

// Sweep wall time against scope count. GitHub asks for one
// credential's requests to be serial, so the lists cost one round trip per
// page, one after another: the sweep's time grows with the scopes, and at
// 150 ms a request a few hundred scopes outgrow a one-minute sweep. The
// figures at 150 ms are measured at scaleLatency and scaled: the measured
// time, less the simulated latency of its requests, plus 150 ms for each.
func TestSweepTimeAgainstScopeCount(t *testing.T) {
	latency := scaleLatency()
	var table strings.Builder
	fmt.Fprintf(&table, "\n%8s %10s %14s %16s\n", "scopes", "GitHub req", "measured", "at 150 ms/req")
	for _, n := range []int{1, 10, 100, 500} {
		r, _ := slowScopes(t, n, latency)
		began := time.Now()
		res := r.run(sweep.Act)
		took := time.Since(began)
		require.NoError(t, res.Err)
		require.Equal(t, sweep.StatusComplete, res.Status)
		assert.Empty(t, res.Deferred, "no cap and no deadline: every scope is listed")
		assert.Equal(t, int64(n), res.GitHub.Requests, "one page per scope, nothing else")
		assert.GreaterOrEqual(t, took, time.Duration(res.GitHub.Requests)*latency, "the requests are serial")
		at150 := took + time.Duration(res.GitHub.Requests)*(realLatency-latency)
		fmt.Fprintf(&table, "%8d %10d %14s %16s\n", n, res.GitHub.Requests, took.Round(time.Millisecond), at150.Round(100*time.Millisecond))
	}
	t.Logf("sweep wall time by scope count, simulated latency %s a request:%s", latency, table.String())
}

// Scopes that do not fit the deadline. With a deadline that
// leaves room for only part of the lists, the sweep lists what fits and
// defers the rest, finishes before its deadline with status 0, and the next
// sweep starts where it stopped, so two sweeps list every scope.
func TestDeadlineDefersTheScopesThatDoNotFit(t *testing.T) {
	const n = 100
	latency := 30 * time.Millisecond
	// 12 s a sweep, of which twice the reaper's spare (10 s) is kept for
	// acting: about 65 of the 100 lists of 30 ms fit.
	r, keys := slowScopes(t, n, latency, func(c *config.Config) { c.SweepTimeout = 12 * time.Second })
	listed := map[string]int{}
	for i := 1; i <= 2; i++ {
		r.sim.ResetRequests()
		res := r.run(sweep.Act)
		require.NoError(t, res.Err, "sweep %d", i)
		assert.Equal(t, sweep.StatusComplete, res.Status, "sweep %d", i)
		assert.Empty(t, res.Stopped, "sweep %d ends before its deadline", i)
		got := r.listedScopes()
		assert.NotEmpty(t, res.Deferred, "sweep %d cannot list all %d scopes in time", i, n)
		assert.Equal(t, n, len(got)+len(res.Deferred), "sweep %d: every scope is listed or deferred", i)
		for _, k := range got {
			listed[k]++
		}
		t.Logf("sweep %d listed %d scopes and deferred %d, next %s", i, len(got), len(res.Deferred), res.NextScope)
	}
	for _, k := range keys {
		assert.NotZero(t, listed[k], "scope %s was not listed in two sweeps", k)
	}
}
