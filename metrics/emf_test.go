package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/sweep"
)

var now = time.Date(2026, 3, 14, 9, 26, 53, 589_000_000, time.UTC)

func outcome(v fleet.Verdict, r fleet.Result) reap.Outcome {
	return reap.Outcome{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: v}}, Result: r}
}

// blind is o as the runner-log guard let it go on: its runner's log read,
// and saying nothing either way.
func blind(o reap.Outcome) reap.Outcome {
	o.RunnerLog = &reap.LogRead{}
	return o
}

func pending(v fleet.Verdict) reconcile.Candidate {
	return reconcile.Candidate{Finding: reconcile.Finding{Verdict: v}}
}

// busySweep has several verdicts and results, pending marks and a skipped
// scope.
func busySweep() sweep.Result {
	return sweep.Result{
		Mode:     sweep.Act,
		Status:   sweep.StatusDegraded,
		Duration: 1234*time.Millisecond + 600*time.Microsecond,
		GitHub:   httpcount.Counts{Requests: 7, NotModified: 5},
		Kube:     httpcount.Counts{Requests: 12},
		Class:    reconcile.Classification{Skipped: []reconcile.Skip{{ScopeKey: "org/acme", Reason: "rate limited"}}},
		Outcomes: []reap.Outcome{
			blind(outcome(fleet.Zombie, fleet.Deleted)),
			outcome(fleet.Terminal, fleet.Deleted),
			outcome(fleet.Zombie, fleet.SparedBusy),
			outcome(fleet.Terminal, fleet.Deleted),
			outcome(fleet.Ghost, fleet.AlreadyGone),
			outcome(fleet.Zombie, fleet.Deleted),
			outcome(fleet.OrphanStamped, fleet.Failed),
			outcome(fleet.Terminal, fleet.NotReached),
		},
		Pending:      []reconcile.Candidate{pending(fleet.Zombie), pending(fleet.Unregistered), pending(fleet.Zombie)},
		Streaks:      state.Streaks{Skips: map[string]int{"org/acme": 2, "org/beta": 1}, Bound: 4},
		StreaksKnown: true,
	}
}

// The golden lines: the contract a dashboard is built against.
func TestWriteEMFGolden(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, busySweep(), "RunnerReaper", now))
	want := `{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Mode"]],"Metrics":[{"Name":"SweepDuration","Unit":"Milliseconds"},{"Name":"GitHubRequests","Unit":"Count"},{"Name":"GitHubNotModified","Unit":"Count"},{"Name":"KubeRequests","Unit":"Count"},{"Name":"ScopesSkipped","Unit":"Count"},{"Name":"ScopesDeferred","Unit":"Count"},{"Name":"RateLimitedUntil","Unit":"Seconds"},{"Name":"ExitCode","Unit":"None"},{"Name":"MassSuspicionScopes","Unit":"Count"},{"Name":"RunnerLogBlind","Unit":"Count"},{"Name":"ScopeSkipStreak","Unit":"Count"},{"Name":"ActionBoundStreak","Unit":"Count"}]}]},"Mode":"sweep","SweepDuration":1234,"GitHubRequests":7,"GitHubNotModified":5,"KubeRequests":12,"ScopesSkipped":1,"ScopesDeferred":0,"RateLimitedUntil":0,"ExitCode":3,"MassSuspicionScopes":0,"RunnerLogBlind":1,"ScopeSkipStreak":2,"ActionBoundStreak":4}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"ghost","Result":"already-gone","Actions":1,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"orphan-stamped","Result":"error","Actions":1,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"terminal","Result":"deleted","Actions":2,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"terminal","Result":"not-reached","Actions":1,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"unregistered","Result":"pending-confirmation","Actions":1,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"zombie","Result":"deleted","Actions":2,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"zombie","Result":"pending-confirmation","Actions":2,"Mode":"sweep"}
{"_aws":{"Timestamp":1773480413589,"CloudWatchMetrics":[{"Namespace":"RunnerReaper","Dimensions":[["Verdict","Result"]],"Metrics":[{"Name":"Actions","Unit":"Count"}]}]},"Verdict":"zombie","Result":"spared-busy","Actions":1,"Mode":"sweep"}
`
	assert.Equal(t, want, buf.String())
}

// emfUnits are the units CloudWatch accepts (StandardUnit).
var emfUnits = map[string]bool{}

func init() {
	for _, u := range strings.Fields(`Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes
		Bits Kilobits Megabits Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second
		Gigabytes/Second Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second
		Terabits/Second Count/Second None`) {
		emfUnits[u] = true
	}
}

// checkEMF checks one line against the EMF specification and returns the
// values of its dimensions and metrics: the root is one JSON object with an
// _aws metadata object holding a millisecond Timestamp and
// CloudWatchMetrics; each MetricDirective has a Namespace, DimensionSets of
// at most 30 keys whose members are strings at the root, and at most 100
// MetricDefinitions whose members are numbers (or arrays of at most 100
// numbers) at the root; the spec's objects hold no other members.
func checkEMF(t *testing.T, line string, wantTS time.Time) (dims map[string]string, values map[string]float64) {
	t.Helper()
	assert.Less(t, len(line), 1<<20, "an event is at most 1 MB")
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	require.NoError(t, dec.Decode(&root), "the line is one JSON object")
	require.False(t, dec.More(), "nothing follows the object")

	aws, ok := root["_aws"].(map[string]any)
	require.True(t, ok, "_aws is an object")
	for k := range aws {
		assert.Contains(t, []string{"Timestamp", "CloudWatchMetrics"}, k, "_aws member")
	}
	ts, ok := aws["Timestamp"].(json.Number)
	require.True(t, ok, "Timestamp is a number")
	ms, err := ts.Int64()
	require.NoError(t, err, "Timestamp is an integer")
	assert.Equal(t, wantTS.UnixMilli(), ms, "Timestamp is milliseconds since the epoch")
	assert.Len(t, ts.String(), 13, "milliseconds, not seconds or nanoseconds")

	directives, ok := aws["CloudWatchMetrics"].([]any)
	require.True(t, ok, "CloudWatchMetrics is an array")
	require.NotEmpty(t, directives)
	dims, values = map[string]string{}, map[string]float64{}
	for _, d := range directives {
		dir, ok := d.(map[string]any)
		require.True(t, ok, "a MetricDirective is an object")
		for k := range dir {
			assert.Contains(t, []string{"Namespace", "Dimensions", "Metrics"}, k, "MetricDirective member")
		}
		ns, ok := dir["Namespace"].(string)
		require.True(t, ok, "Namespace is a string")
		assert.True(t, len(ns) >= 1 && len(ns) <= 255, "Namespace length")

		sets, ok := dir["Dimensions"].([]any)
		require.True(t, ok, "Dimensions is an array")
		for _, s := range sets {
			set, ok := s.([]any)
			require.True(t, ok, "a DimensionSet is an array")
			assert.LessOrEqual(t, len(set), 30, "at most 30 dimensions in a DimensionSet")
			for _, k := range set {
				key, ok := k.(string)
				require.True(t, ok, "a dimension key is a string")
				v, ok := root[key].(string)
				require.True(t, ok, "dimension %q has a string value at the root", key)
				assert.True(t, len(v) >= 1 && len(v) <= 1024, "dimension %q value length", key)
				dims[key] = v
			}
		}

		defs, ok := dir["Metrics"].([]any)
		require.True(t, ok, "Metrics is an array")
		assert.LessOrEqual(t, len(defs), 100, "at most 100 MetricDefinitions")
		for _, m := range defs {
			def, ok := m.(map[string]any)
			require.True(t, ok, "a MetricDefinition is an object")
			for k := range def {
				assert.Contains(t, []string{"Name", "Unit", "StorageResolution"}, k, "MetricDefinition member")
			}
			name, ok := def["Name"].(string)
			require.True(t, ok, "Name is a string")
			assert.NotEmpty(t, name)
			if u, has := def["Unit"]; has {
				assert.True(t, emfUnits[u.(string)], "unit %v", u)
			}
			_, isDim := dims[name]
			assert.False(t, isDim, "metric %q is also a dimension", name)
			switch v := root[name].(type) {
			case json.Number:
				f, err := v.Float64()
				require.NoError(t, err)
				values[name] = f
			case []any:
				assert.LessOrEqual(t, len(v), 100, "at most 100 values")
				for _, x := range v {
					_, ok := x.(json.Number)
					assert.True(t, ok, "metric %q values are numbers", name)
				}
			default:
				t.Fatalf("metric %q has no numeric value at the root (got %T)", name, root[name])
			}
		}
	}
	return dims, values
}

func lines(t *testing.T, out string) []string {
	t.Helper()
	require.True(t, strings.HasSuffix(out, "\n"), "every line ends with a newline")
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

func TestWriteEMFFollowsSpec(t *testing.T) {
	res := busySweep()
	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, res, "RunnerReaper/prod", now))
	ls := lines(t, buf.String())

	dims, vals := checkEMF(t, ls[0], now)
	assert.Equal(t, map[string]string{"Mode": "sweep"}, dims)
	assert.Equal(t, map[string]float64{"SweepDuration": 1234, "GitHubRequests": 7, "GitHubNotModified": 5, "KubeRequests": 12, "ScopesSkipped": 1,
		"ScopesDeferred": 0, "RateLimitedUntil": 0, "ExitCode": 3, "MassSuspicionScopes": 0, "RunnerLogBlind": 1, "ScopeSkipStreak": 2, "ActionBoundStreak": 4}, vals,
		"a degraded sweep writes no LastSuccessTimestamp")

	// Every pair line, summed, accounts for every outcome and pending
	// candidate once.
	got := map[[2]string]float64{}
	total := 0.0
	for _, l := range ls[1:] {
		dims, vals := checkEMF(t, l, now)
		require.Equal(t, []string{"Actions"}, keys(vals))
		pair := [2]string{dims["Verdict"], dims["Result"]}
		_, dup := got[pair]
		assert.False(t, dup, "one line per pair: %v", pair)
		got[pair] = vals["Actions"]
		total += vals["Actions"]
	}
	assert.Equal(t, map[[2]string]float64{
		{"ghost", "already-gone"}:                1,
		{"orphan-stamped", "error"}:              1,
		{"terminal", "deleted"}:                  2,
		{"terminal", "not-reached"}:              1,
		{"unregistered", "pending-confirmation"}: 1,
		{"zombie", "deleted"}:                    2,
		{"zombie", "pending-confirmation"}:       2,
		{"zombie", "spared-busy"}:                1,
	}, got)
	assert.Equal(t, float64(len(res.Outcomes)+len(res.Pending)), total)
}

func keys(m map[string]float64) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWriteEMFModes(t *testing.T) {
	for mode, want := range map[sweep.Mode]string{sweep.Act: "sweep", sweep.DryRun: "dry-run", sweep.Audit: "audit"} {
		res := sweep.Result{Mode: mode, Outcomes: []reap.Outcome{outcome(fleet.Zombie, fleet.WouldDelete)}}
		var buf bytes.Buffer
		require.NoError(t, WriteEMF(&buf, res, "RunnerReaper", now))
		ls := lines(t, buf.String())
		require.Len(t, ls, 2)
		dims, _ := checkEMF(t, ls[0], now)
		assert.Equal(t, want, dims["Mode"])
		var pairLine map[string]any
		require.NoError(t, json.Unmarshal([]byte(ls[1]), &pairLine))
		assert.Equal(t, want, pairLine["Mode"], "the pair line names the mode as a plain member")
	}
}

// A quiet sweep writes the main line only, with zeros, and, as it exited
// 0, when it started as the last success.
func TestWriteEMFQuietSweep(t *testing.T) {
	var buf bytes.Buffer
	started := now.Add(-2 * time.Second)
	require.NoError(t, WriteEMF(&buf, sweep.Result{Mode: sweep.Act, Started: started}, "RunnerReaper", now))
	ls := lines(t, buf.String())
	require.Len(t, ls, 1)
	_, vals := checkEMF(t, ls[0], now)
	assert.Equal(t, map[string]float64{"SweepDuration": 0, "GitHubRequests": 0, "GitHubNotModified": 0, "KubeRequests": 0, "ScopesSkipped": 0,
		"ScopesDeferred": 0, "RateLimitedUntil": 0, "ExitCode": 0, "MassSuspicionScopes": 0, "RunnerLogBlind": 0,
		"LastSuccessTimestamp": float64(started.Unix())}, vals, "no streaks from a sweep that did not read the ledger")
}

// An empty verdict or result still makes a valid dimension value.
func TestWriteEMFEmptyValues(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, sweep.Result{Outcomes: []reap.Outcome{outcome("", "")}}, "RunnerReaper", now))
	ls := lines(t, buf.String())
	require.Len(t, ls, 2)
	dims, _ := checkEMF(t, ls[1], now)
	assert.Equal(t, map[string]string{"Verdict": "unknown", "Result": "unknown"}, dims)
}

func TestWriteEMFNamespace(t *testing.T) {
	for _, ns := range []string{"", "AWS/Lambda", "bad\nname", "na\"me", strings.Repeat("n", 256)} {
		var buf bytes.Buffer
		assert.Error(t, WriteEMF(&buf, busySweep(), ns, now), "namespace %q", ns)
		assert.Zero(t, buf.Len(), "nothing written for namespace %q", ns)
	}
	for _, ns := range []string{"RunnerReaper", "ci/runner-reaper", "Team#1: reaper_v2.0", strings.Repeat("n", 255)} {
		assert.NoError(t, WriteEMF(&bytes.Buffer{}, busySweep(), ns, now), "namespace %q", ns)
	}
}

type failWriter struct{ writes int }

func (f *failWriter) Write(p []byte) (int, error) { f.writes++; return 0, errors.New("pipe closed") }

func TestWriteEMFOneWrite(t *testing.T) {
	f := &failWriter{}
	err := WriteEMF(f, busySweep(), "RunnerReaper", now)
	require.EqualError(t, err, "write emf metrics: pipe closed")
	assert.Equal(t, 1, f.writes, "all lines in one Write")
}

// Skipped scopes are counted by kind on lines of their own, so that a rate
// limit and an inconsistent list are told apart.
func TestWriteEMFSkipKinds(t *testing.T) {
	res := sweep.Result{Mode: sweep.Act, Class: reconcile.Classification{Skipped: []reconcile.Skip{
		{ScopeKey: "org:a", Kind: fleet.SkipRateLimited},
		{ScopeKey: "org:b", Kind: fleet.SkipRateLimited},
		{ScopeKey: "org:c", Kind: fleet.SkipInconsistent},
	}}}
	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, res, "RunnerReaper", now))
	ls := lines(t, buf.String())
	require.Len(t, ls, 3)
	_, vals := checkEMF(t, ls[0], now)
	assert.Equal(t, float64(3), vals["ScopesSkipped"])
	got := map[string]float64{}
	for _, l := range ls[1:] {
		dims, vals := checkEMF(t, l, now)
		assert.Equal(t, []string{"ScopesSkipped"}, keys(vals))
		got[dims["SkipKind"]] = vals["ScopesSkipped"]
	}
	assert.Equal(t, map[string]float64{"rate-limited": 2, "inconsistent": 1}, got)
}

// A scope the budget deferred is the rotation working, not a
// skip: an alarm on ScopesSkipped must not fire for a capped fleet.
func TestWriteEMFDeferredIsNotSkipped(t *testing.T) {
	res := sweep.Result{Mode: sweep.Act, Deferred: []string{"org:b", "org:c"}, Class: reconcile.Classification{Skipped: []reconcile.Skip{
		{ScopeKey: "org:a", Kind: fleet.SkipFailed},
		{ScopeKey: "org:b", Kind: fleet.SkipDeferred},
		{ScopeKey: "org:c", Kind: fleet.SkipDeferred},
	}}}
	var buf bytes.Buffer
	require.NoError(t, WriteEMF(&buf, res, "RunnerReaper", now))
	ls := lines(t, buf.String())
	require.Len(t, ls, 2)
	_, vals := checkEMF(t, ls[0], now)
	assert.Equal(t, float64(1), vals["ScopesSkipped"])
	dims, vals := checkEMF(t, ls[1], now)
	assert.Equal(t, "failed", dims["SkipKind"])
	assert.Equal(t, float64(1), vals["ScopesSkipped"])
}
