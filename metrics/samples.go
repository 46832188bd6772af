package metrics

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Family is one metric the reaper reports: the Prometheus name, its EMF
// counterpart, its labels and its help. The table is the one story every
// entry point tells: the Pushgateway, OTLP and the long-running mode's
// /metrics carry these names, the EMF lines their counterparts, and
// `runner-reaper metrics` prints it.
type Family struct {
	Name   string
	EMF    string
	Labels []string
	Help   string
}

// Families is every metric a sweep's push can carry, then the long-running
// mode's own (ServeOnly), in the order docs/metrics.md lists them.
func Families() []Family {
	return []Family{
		{PromActions, Actions + " by Verdict, Result", []string{"verdict", "result"}, "Candidates of the last sweep by verdict and result; pending ones under the result pending-confirmation."},
		{PromScopesSkipped, ScopesSkipped + " by SkipKind", []string{"kind"}, "Scopes of the last sweep whose runner list could not be used, by kind (failed, rate-limited, inconsistent); every kind is present."},
		{PromScopesDeferred, ScopesDeferred, nil, "Scopes the last sweep left to a later sweep of the rotation (REAPER_MAX_SCOPES_PER_SWEEP or the deadline)."},
		{PromRateLimitedUntil, RateLimitedUntil, nil, "When GitHub said its rate limit ends, as Unix seconds; 0 when it did not limit the last sweep."},
		{PromGitHubRequests, GitHubRequests, nil, "GitHub requests the last sweep sent."},
		{PromGitHubNotModified, GitHubNotModified, nil, "GitHub requests of the last sweep answered 304 Not Modified (no rate limit spent)."},
		{PromKubeRequests, KubeRequests, nil, "Kubernetes API requests the last sweep sent."},
		{PromDuration, SweepDuration + " (ms)", nil, "Wall time of the last sweep."},
		{PromExitCode, ExitCode, []string{"mode"}, "Exit status of the last sweep: 0 complete, 1 failed, 3 degraded; mode is sweep, dry-run or audit."},
		{PromLastSweep, "the line's Timestamp", nil, "When the last sweep started, as Unix seconds."},
		{PromLastSuccess, LastSuccessTimestamp, nil, "When the last sweep that exited 0 started, as Unix seconds; pushed only by such a sweep, in a group of its own."},
		{PromMassSuspicion, MassSuspicionScopes, nil, "Scopes that set off the mass-suspicion alarm in the last sweep."},
		{PromRunnerLogBlind, RunnerLogBlind, nil, "Runners the last sweep removed (or would have) whose log it read with no word either way: the read failed, or the tail was cut or held none of the runner's lines."},
		{PromSkipStreak, ScopeSkipStreak, nil, "Most sweeps in a row that one configured scope has been skipped (failed, rate-limited or inconsistent)."},
		{PromBoundStreak, ActionBoundStreak, nil, "Sweeps in a row in which the action bound left a ready candidate for later."},
		{PromReapLoops, ReapLoops, nil, "Groups of runner pods in a reap loop (REAPER_LOOP_THRESHOLD actions with one fingerprint within REAPER_LOOP_WINDOW) as the last sweep left the ledger."},
		{PromReapLoopActions, ReapLoopActions + " by Group, Fingerprint", []string{"group", "fingerprint"}, "Actions with the loop's fingerprint within the window, for the 10 looping groups with the most; group is KIND NAMESPACE/NAME of what makes the pods."},
		{PromLeader, ServeOnly, nil, "runner-reaper serve: 1 while this process holds the Lease and sweeps, 0 while it stands by."},
		{PromWatchLive, ServeOnly, []string{"resource"}, "runner-reaper serve: 1 while every watch of the resource (pods, ephemeralrunners) is synced, open and heard from within its stale bound; 0 while a sweep would find its store incomplete."},
		{PromWatchRelists, ServeOnly, []string{"resource"}, "runner-reaper serve: complete lists of the resource by its watches since the process started, the first included."},
		{PromStoreObjects, ServeOnly, []string{"resource"}, "runner-reaper serve: objects of the resource its watches' stores hold now."},
	}
}

// ServeOnly is the EMF column of the long-running mode's own figures:
// the state of a process, served on its /metrics and never pushed.
const ServeOnly = "none: serve's /metrics only"

// Sample is one value of a family, with its label values in the family's
// label order.
type Sample struct {
	Name   string
	Labels []string
	Value  float64
}

// skipKindsReported are the kinds of skip the metrics count, each always
// present, so that a kind at zero is a zero and not a missing series.
func skipKindsReported() []fleet.SkipKind {
	return []fleet.SkipKind{fleet.SkipFailed, fleet.SkipRateLimited, fleet.SkipInconsistent}
}

// Samples are a sweep's values, for every family but PromLastSuccess
// (SuccessSamples). The pairs and kinds are sorted as the EMF lines are.
func Samples(res sweep.Result) []Sample {
	out := []Sample{}
	for _, p := range pairs(res) {
		out = append(out, Sample{PromActions, []string{p.verdict, p.result}, float64(p.n)})
	}
	kinds := map[fleet.SkipKind]int{}
	for _, s := range res.Class.Skipped {
		kinds[s.Kind]++
	}
	for _, k := range skipKindsReported() {
		out = append(out, Sample{PromScopesSkipped, []string{string(k)}, float64(kinds[k])})
	}
	if res.StreaksKnown {
		// A ledger that could not be read says nothing of the streaks:
		// a zero would clear an alert that is still due.
		out = append(out,
			Sample{PromSkipStreak, nil, float64(res.Streaks.MaxSkip())},
			Sample{PromBoundStreak, nil, float64(res.Streaks.Bound)})
	}
	if res.Looked {
		// Likewise the loops, which the sweep reads from the ledger's
		// window once it has looked.
		out = append(out, Sample{PromReapLoops, nil, float64(len(res.Loops))})
		for _, l := range res.Loops[:min(len(res.Loops), MaxLoopSeries)] {
			out = append(out, Sample{PromReapLoopActions, []string{l.Group.String(), l.Fingerprint}, float64(l.Count)})
		}
	}
	return append(out,
		Sample{PromScopesDeferred, nil, float64(len(res.Deferred))},
		Sample{PromRateLimitedUntil, nil, float64(rateLimitedUntil(res))},
		Sample{PromGitHubRequests, nil, float64(res.GitHub.Requests)},
		Sample{PromGitHubNotModified, nil, float64(res.GitHub.NotModified)},
		Sample{PromKubeRequests, nil, float64(res.Kube.Requests)},
		Sample{PromDuration, nil, res.Duration.Seconds()},
		Sample{PromExitCode, []string{res.Mode.String()}, float64(res.Status)},
		Sample{PromLastSweep, nil, unixSeconds(res)},
		Sample{PromMassSuspicion, nil, float64(len(res.Confirmation.MassSuspicion))},
		Sample{PromRunnerLogBlind, nil, float64(runnerLogBlind(res))},
	)
}

// runnerLogBlind is the runners the sweep removed with no word from their
// logs (reap.Outcome.LogBlind).
func runnerLogBlind(res sweep.Result) int {
	n := 0
	for _, o := range res.Outcomes {
		if _, blind := o.LogBlind(); blind {
			n++
		}
	}
	return n
}

// SuccessSamples is the last-success figure, only for a sweep that exited
// 0: a sink keeps it apart from Samples, so that a failing sweep, which
// replaces those, leaves the last success in place.
func SuccessSamples(res sweep.Result) []Sample {
	if res.Status != sweep.StatusComplete {
		return nil
	}
	return []Sample{{PromLastSuccess, nil, unixSeconds(res)}}
}

// rateLimitedUntil is the latest end of GitHub's rate limit the sweep met,
// listing or acting, as Unix seconds; 0 when it met none.
func rateLimitedUntil(res sweep.Result) int64 {
	var until int64
	for _, s := range res.Class.Skipped {
		if s.Kind == fleet.SkipRateLimited && !s.Until.IsZero() {
			until = max(until, s.Until.Unix())
		}
	}
	for _, o := range res.Outcomes {
		if rl := fleet.AsRateLimit(o.Err); rl != nil && !rl.Until.IsZero() {
			until = max(until, rl.Until.Unix())
		}
	}
	return until
}

func unixSeconds(res sweep.Result) float64 {
	return float64(res.Started.UnixNano()) / 1e9
}

// WriteTable prints Families for a person (`runner-reaper metrics`): the
// names to alert on, and where each is in CloudWatch.
func WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROMETHEUS / OTLP\tLABELS\tEMF\tMEANING")
	for _, f := range Families() {
		labels := strings.Join(f.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Name, labels, f.EMF, f.Help)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the metrics table: %w", err)
	}
	return nil
}
