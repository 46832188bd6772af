package sweep_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// threeScopes gives the rig org:acme, org:beta and org:gamma, listed in
// that order.
func threeScopes(t *testing.T) *rig {
	t.Helper()
	var scopes []fleet.Scope
	for _, s := range []string{orgScope, "org:beta", "org:gamma"} {
		sc, err := fleet.ParseScope(s)
		require.NoError(t, err)
		scopes = append(scopes, sc)
	}
	r := newRig(t, func(c *config.Config) { c.Scopes = scopes })
	r.sim.AddScope("org:beta")
	r.sim.AddScope("org:gamma")
	return r
}

// orgPod creates a runner pod of org.
func (r *rig) orgPod(org, name string, st testenv.PodState) {
	r.t.Helper()
	r.env.RunnerPod(r.t, r.ns, testenv.RunnerPod{Name: name, Org: org, PodState: st})
}

func dead() testenv.PodState {
	return testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")}
}

// endpoints counts the simulator's requests since the last reset by scope
// and endpoint.
func (r *rig) endpoints() map[string]int {
	out := map[string]int{}
	for _, q := range r.sim.Requests() {
		out[q.Scope+" "+q.Endpoint]++
	}
	return out
}

// GitHub rate-limits the first of three scopes.
// Every form GitHub documents stops the sweep's GitHub work at once: the
// other scopes are skipped as rate-limited without a request (the primary
// limit is per credential, and GitHub's secondary limits count a
// credential's requests across endpoints), no GitHub delete is sent, marks
// are held, the terminal pod without a registration still goes, the sweep
// exits 3 and says until when, and it does not wait for the reset.
func TestRateLimitedScopeStopsGitHubWork(t *testing.T) {
	forms := map[string]struct {
		fault     ghsim.Fault
		within    time.Duration
		secondary bool
	}{
		"primary 403":   {fault: ghsim.Fault{PrimaryLimit: true}, within: time.Hour},
		"primary 429":   {fault: ghsim.Fault{PrimaryLimit: true, Status: 429}, within: time.Hour},
		"secondary 403": {fault: ghsim.Fault{Secondary: 403}, within: time.Minute, secondary: true},
		"secondary 429": {fault: ghsim.Fault{Secondary: 429}, within: time.Minute, secondary: true},
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			r := threeScopes(t)
			beta := r.sim.AddRunner("org:beta", ghsim.Runner{Name: "beta-zombie", Status: "offline"})
			r.orgPod("beta", "beta-zombie", testenv.Running())
			ghost := r.sim.AddRunner("org:gamma", ghsim.Runner{Name: "acme-ghost", Status: "offline"})
			first := r.run(sweep.Act)
			require.NoError(t, first.Err)
			require.Len(t, first.Pending, 2, "the zombie and the ghost are marked")
			marked := first.Confirmation.Marks

			r.orgPod("acme", "acme-dead", dead())
			r.orgPod("beta", "beta-dead", dead())
			r.sim.Fault(orgScope, ghsim.Any, form.fault)
			r.sim.ResetRequests()
			r.clock.Add(10 * time.Minute)
			start := time.Now()
			res := r.run(sweep.Act)
			took := time.Since(start)

			assert.Equal(t, sweep.StatusDegraded, res.Status, "exit 3: %v", res.Err)
			assert.NoError(t, res.Err)
			assert.Less(t, took, 10*time.Second, "the sweep does not wait for the limit to lift")
			assert.Equal(t, map[string]int{"org:acme list": 1}, r.endpoints(), "one refused list; nothing after it")
			assert.True(t, r.podExists("beta-zombie"))
			assert.Len(t, r.sim.Runners("org:beta"), 1, "registration %d stays", beta.ID)
			assert.Len(t, r.sim.Runners("org:gamma"), 1, "registration %d stays", ghost.ID)
			assert.Equal(t, marked, res.Confirmation.Marks, "marks held")
			assert.False(t, r.podExists("acme-dead"), "a terminal pod needs no GitHub call")
			assert.False(t, r.podExists("beta-dead"))

			require.Len(t, res.Class.Skipped, 3)
			lo, hi := start.Add(-time.Second), start.Add(form.within+time.Second)
			for _, s := range res.Class.Skipped {
				assert.Equal(t, fleet.SkipRateLimited, s.Kind, s.ScopeKey)
				assert.True(t, s.Until.After(lo) && s.Until.Before(hi), "%s until %s", s.ScopeKey, s.Until)
				assert.Equal(t, res.Class.Skipped[0].Until, s.Until, "the later scopes wait as long as the first")
			}
			warnings := r.lines("scope skipped")
			require.Len(t, warnings, 3)
			for _, w := range warnings {
				assert.Equal(t, "rate-limited", w["kind"])
				assert.Equal(t, res.Class.Skipped[0].Until.UTC().Format(time.RFC3339Nano), w["until"])
			}
			summary := r.lines("sweep")
			require.Len(t, summary, 2)
			assert.Equal(t, res.Class.Skipped[0].Until.UTC().Format(time.RFC3339Nano), summary[1]["github_rate_limited_until"])
			assert.EqualValues(t, 3, summary[1]["status"])
		})
	}
}

// The first two scopes list whole, the third is
// rate-limited. go-github remembers the limit, so every later GitHub call
// of the sweep was refused and the sweep exited 1. Now no candidate that
// needs GitHub is attempted: a zombie (registration delete), an
// unregistered pod (re-check by name) and a terminal pod with a
// registration are reported rate-limited with their marks kept; the
// terminal pod without one goes; exit 3.
func TestRateLimitOnLastScopeHoldsGitHubActions(t *testing.T) {
	r := threeScopes(t)
	r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	r.pod("acme-unregistered", testenv.Running())
	r.clock.Add(11 * time.Minute)
	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	require.Len(t, first.Pending, 2)

	deadReg := r.sim.AddRunner("org:beta", ghsim.Runner{Name: "beta-dead", Status: "offline"})
	r.orgPod("beta", "beta-dead", dead())
	r.pod("acme-dead", dead())
	r.sim.Fault("org:gamma", ghsim.Any, ghsim.Fault{PrimaryLimit: true})
	r.sim.ResetRequests()
	r.clock.Add(6 * time.Minute)
	res := r.run(sweep.Act)

	assert.Equal(t, sweep.StatusDegraded, res.Status, "exit 3, not 1: %v", res.Err)
	assert.NoError(t, res.Err)
	got := map[string]string{}
	for _, o := range res.Outcomes {
		got[o.Candidate.Pod.Name] = string(o.Candidate.Verdict) + "/" + string(o.Result)
	}
	assert.Equal(t, map[string]string{
		"acme-zombie":       "zombie/rate-limited",
		"acme-unregistered": "unregistered/rate-limited",
		"beta-dead":         "terminal/rate-limited",
		"acme-dead":         "terminal/deleted",
	}, got)
	for _, e := range r.sim.Requests() {
		assert.Equal(t, ghsim.EndpointList, e.Endpoint, "nothing but the lists: %s %s", e.Method, e.Path)
	}
	for _, name := range []string{"acme-zombie", "acme-unregistered", "beta-dead"} {
		assert.True(t, r.podExists(name), name)
	}
	assert.False(t, r.podExists("acme-dead"))
	assert.Len(t, r.sim.Runners("org:beta"), 1, "registration %d stays", deadReg.ID)
	for _, o := range res.Outcomes {
		if o.Candidate.Verdict != fleet.Terminal {
			assert.Contains(t, res.Confirmation.Marks, o.Candidate.Key, "the mark stays")
		}
	}
	for _, l := range r.lines("action") {
		if l["result"] == "rate-limited" {
			assert.NotEmpty(t, l["until"], "%s says until when", l["pod"])
			assert.Equal(t, "INFO", l["level"], "not an error")
		}
	}

	// Once the limit has lifted, the held candidates act.
	r.sim.ClearFaults()
	r.clock.Add(time.Minute)
	after := r.run(sweep.Act)
	require.NoError(t, after.Err)
	assert.False(t, r.podExists("acme-zombie"))
	assert.False(t, r.podExists("beta-dead"))
}

// A limit met while acting: the lists were whole, the first registration
// delete answers 429 with retry-after. That candidate is rate-limited, not
// failed, and no later candidate calls GitHub.
func TestRateLimitMetWhileActing(t *testing.T) {
	r := newRig(t)
	for i := range 3 {
		name := fmt.Sprintf("acme-zombie-%d", i)
		r.runner(name, "offline", false)
		r.pod(name, testenv.Running())
	}
	require.NoError(t, r.run(sweep.Act).Err)
	r.clock.Add(6 * time.Minute)
	r.sim.Fault(orgScope, ghsim.EndpointDelete, ghsim.Fault{Secondary: 429})
	r.sim.ResetRequests()
	res := r.run(sweep.Act)

	assert.Equal(t, sweep.StatusDegraded, res.Status, "exit 3, not 1: %v", res.Err)
	require.Len(t, res.Outcomes, 3)
	for _, o := range res.Outcomes {
		assert.Equal(t, "rate-limited", string(o.Result), o.Candidate.Pod.Name)
		assert.True(t, r.podExists(o.Candidate.Pod.Name))
		assert.Contains(t, res.Confirmation.Marks, o.Candidate.Key)
	}
	assert.Equal(t, map[string]int{"org:acme list": 1, "org:acme delete": 1}, r.endpoints(), "one delete met the limit; no other was sent")
}

// A 404 on a delete means "gone" only because the same
// credential has just listed the scope. A scope whose list failed in this
// sweep gets no delete at all: its terminal pod goes without its
// registration, and its ghost's mark is held.
func TestNoDeleteToAScopeWhoseListFailed(t *testing.T) {
	r := newRig(t)
	ghost := r.runner("acme-ghost", "offline", false)
	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	require.Len(t, first.Pending, 1)
	marked := first.Confirmation.Marks

	deadReg := r.runner("acme-dead", "offline", false)
	r.pod("acme-dead", dead())
	r.sim.Fault(orgScope, ghsim.EndpointList, ghsim.Fault{Status: 500})
	r.sim.ResetRequests()
	r.clock.Add(10 * time.Minute)
	res := r.run(sweep.Act)

	assert.Equal(t, sweep.StatusDegraded, res.Status)
	assert.Equal(t, map[string]int{"org:acme list": 1}, r.endpoints(), "no delete, no lookup")
	assert.False(t, r.podExists("acme-dead"), "the terminal pod goes")
	assert.True(t, r.runnerExists(deadReg.ID), "without its registration")
	assert.True(t, r.runnerExists(ghost.ID))
	assert.Equal(t, marked, res.Confirmation.Marks, "the ghost's mark is held")
	require.Len(t, res.Class.Skipped, 1)
	assert.Equal(t, fleet.SkipFailed, res.Class.Skipped[0].Kind)
}
