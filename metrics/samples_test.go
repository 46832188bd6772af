package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

func TestSamplesOfABusySweep(t *testing.T) {
	res := busySweep()
	res.Started = now
	until := now.Add(40 * time.Minute)
	res.Class.Skipped = []reconcile.Skip{
		{ScopeKey: "org/acme", Kind: fleet.SkipRateLimited, Until: until},
		{ScopeKey: "org/beta", Kind: fleet.SkipRateLimited, Until: until.Add(-time.Minute)},
		{ScopeKey: "org/gamma", Kind: fleet.SkipFailed},
		{ScopeKey: "org/delta", Kind: fleet.SkipDeferred},
	}
	res.Deferred = []string{"org/delta"}
	res.Confirmation.MassSuspicion = []reconcile.Suspicion{{ScopeKey: "org/acme"}}
	got := map[string]float64{}
	for _, s := range Samples(res) {
		key := s.Name
		for _, l := range s.Labels {
			key += "|" + l
		}
		_, dup := got[key]
		require.False(t, dup, "one sample per series: %s", key)
		got[key] = s.Value
	}
	assert.Equal(t, map[string]float64{
		PromActions + "|ghost|already-gone":                1,
		PromActions + "|orphan-stamped|error":              1,
		PromActions + "|terminal|deleted":                  2,
		PromActions + "|terminal|not-reached":              1,
		PromActions + "|unregistered|pending-confirmation": 1,
		PromActions + "|zombie|deleted":                    2,
		PromActions + "|zombie|pending-confirmation":       2,
		PromActions + "|zombie|spared-busy":                1,
		PromScopesSkipped + "|failed":                      1,
		PromScopesSkipped + "|rate-limited":                2,
		PromScopesSkipped + "|inconsistent":                0,
		PromScopesDeferred:                                 1,
		PromRateLimitedUntil:                               float64(until.Unix()),
		PromGitHubRequests:                                 7,
		PromGitHubNotModified:                              5,
		PromKubeRequests:                                   12,
		PromDuration:                                       1.2346,
		PromExitCode + "|sweep":                            3,
		PromLastSweep:                                      float64(now.UnixNano()) / 1e9,
		PromMassSuspicion:                                  1,
		PromRunnerLogBlind:                                 1,
		PromSkipStreak:                                     2,
		PromBoundStreak:                                    4,
	}, got)
	assert.Empty(t, SuccessSamples(res), "a degraded sweep is no success")

	res.StreaksKnown = false
	for _, s := range Samples(res) {
		assert.NotContains(t, []string{PromSkipStreak, PromBoundStreak}, s.Name, "a ledger not read says nothing of the streaks")
	}

	res.Status = sweep.StatusComplete
	assert.Equal(t, []Sample{{PromLastSuccess, nil, float64(now.UnixNano()) / 1e9}}, SuccessSamples(res))
}

// Every sample belongs to a family of the table with as many labels, and
// every name is unique: the table is what users and the shipped alerts read.
func TestEverySampleHasItsFamily(t *testing.T) {
	fams := map[string]Family{}
	for _, f := range Families() {
		_, dup := fams[f.Name]
		require.False(t, dup, f.Name)
		assert.Regexp(t, `^runner_reaper_[a-z_]+$`, f.Name)
		assert.NotEmpty(t, f.Help)
		assert.NotEmpty(t, f.EMF)
		fams[f.Name] = f
	}
	res := busySweep()
	res.Status = sweep.StatusComplete
	res.Looked, res.Loops = true, []loops.Loop{{Group: fleet.GroupOf(fleet.GroupScaleSet, "arc", "broken"), Count: 5, Fingerprint: "outdated"}}
	seen := map[string]bool{}
	for _, s := range append(Samples(res), SuccessSamples(res)...) {
		f, ok := fams[s.Name]
		require.True(t, ok, "sample %s has no family", s.Name)
		assert.Len(t, s.Labels, len(f.Labels), s.Name)
		seen[s.Name] = true
	}
	pushed := 0
	for _, f := range fams {
		if f.EMF != ServeOnly {
			pushed++
		}
	}
	assert.Len(t, seen, pushed, "every family a sweep pushes has a sample in a busy, successful sweep")
}

// GitHub may limit the sweep while it acts, not only while it lists: the
// until it gave then is the metric's too.
func TestRateLimitedUntilCountsActions(t *testing.T) {
	until := now.Add(17 * time.Minute)
	res := sweep.Result{Outcomes: []reap.Outcome{{Result: fleet.RateLimited,
		Err: fmt.Errorf("delete runner: %w", &fleet.RateLimitError{Until: until, Err: errors.New("API rate limit exceeded")})}}}
	for _, s := range Samples(res) {
		if s.Name == PromRateLimitedUntil {
			assert.Equal(t, float64(until.Unix()), s.Value)
			return
		}
	}
	t.Fatal("no rate-limit sample")
}

// The loops: how many groups loop, and the actions of the MaxLoopSeries
// busiest, by group and fingerprint; nothing from a sweep that did not
// look, whose zero would clear an alert still due.
func TestSamplesOfReapLoops(t *testing.T) {
	var ls []loops.Loop
	for i := range MaxLoopSeries + 3 {
		ls = append(ls, loops.Loop{Group: fleet.GroupOf("ReplicaSet", "ci", fmt.Sprintf("pool-%02d", i)), Count: 40 - i, Fingerprint: "crash"})
	}
	res := sweep.Result{Looked: true, Loops: ls}
	var series []string
	count := -1.0
	for _, s := range Samples(res) {
		switch s.Name {
		case PromReapLoops:
			count = s.Value
		case PromReapLoopActions:
			series = append(series, fmt.Sprintf("%s|%s=%g", s.Labels[0], s.Labels[1], s.Value))
		}
	}
	assert.Equal(t, float64(MaxLoopSeries+3), count, "every group counts")
	require.Len(t, series, MaxLoopSeries, "the series are capped")
	assert.Equal(t, "ReplicaSet ci/pool-00|crash=40", series[0])
	assert.Equal(t, "ReplicaSet ci/pool-09|crash=31", series[MaxLoopSeries-1])

	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, res, "RunnerReaper", now))
	assert.Contains(t, buf.String(), `"ReapLoops":13`)
	assert.Contains(t, buf.String(), `"Dimensions":[["Group","Fingerprint"]],"Metrics":[{"Name":"ReapLoopActions","Unit":"Count"}]}]},"Group":"ReplicaSet ci/pool-00","Fingerprint":"crash","ReapLoopActions":40,"Mode":"sweep"}`)
	assert.Equal(t, MaxLoopSeries, strings.Count(buf.String(), `"ReapLoopActions":`), "the EMF lines are capped too")

	for _, s := range Samples(sweep.Result{Loops: ls}) {
		assert.NotContains(t, []string{PromReapLoops, PromReapLoopActions}, s.Name, "a sweep that did not look says nothing of loops")
	}
}
