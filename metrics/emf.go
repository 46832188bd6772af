// Package metrics turns a sweep's result into CloudWatch metrics by way of
// the Embedded Metric Format (EMF): JSON log lines that CloudWatch Logs
// turns into metrics, so that the Lambda needs no PutMetricData call, no
// cloudwatch:PutMetricData permission and no extra latency.
//
// One sweep writes:
//
//   - one main line, dimension Mode (sweep, dry-run or audit), with the
//     metrics SweepDuration (Milliseconds), GitHubRequests,
//     GitHubNotModified, KubeRequests, ScopesSkipped, ScopesDeferred,
//     MassSuspicionScopes, RunnerLogBlind, ScopeSkipStreak and
//     ActionBoundStreak (Count),
//     RateLimitedUntil (Seconds, Unix time, 0 when not limited), ExitCode
//     (None) and, only when the sweep exited 0, LastSuccessTimestamp
//     (Seconds, Unix time);
//   - one line per (verdict, result) pair that occurred, dimensions
//     [Verdict, Result], with the one metric Actions (Count);
//   - one line per kind of skipped scope that occurred (failed,
//     rate-limited, inconsistent), dimension SkipKind, with the metric
//     ScopesSkipped (Count), so that an alarm can tell GitHub's rate limit
//     from a list that does not add up.
//
// Why more than one line: an EMF document carries one value per dimension
// key, so one line cannot hold "zombie/deleted: 2" and "ghost/deleted: 1"
// under the same metric name. The alternative, one metric name per pair
// (Actions_zombie_deleted, ...) on the main line, would make a metric name
// of every value and could not be summed or graphed by verdict in
// CloudWatch; separate lines with real dimensions can.
//
// Pairs are counted as the summary line counts them: an outcome of the sweep
// by its candidate's verdict and its result (deleted, would-delete,
// spared-busy, ...), and a candidate whose mark has not matured by its
// verdict and the result "pending-confirmation". Pair lines also carry Mode,
// as a plain member that CloudWatch Logs Insights can filter on but no
// dimension (that would double the metrics; dry-run's results are
// "would-delete" and audit's "reported", so the mode shows anyway). A pair
// that did not occur writes no line, so a missing datapoint means zero:
// graph Actions with FILL(..., 0).
package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Metric and dimension names: a contract, as dashboards and alarms key on
// them.
const (
	SweepDuration     = "SweepDuration"
	GitHubRequests    = "GitHubRequests"
	GitHubNotModified = "GitHubNotModified"
	KubeRequests      = "KubeRequests"
	ScopesSkipped     = "ScopesSkipped"
	Actions           = "Actions"
	// Added with the Prometheus push, so that both tell one story (see
	// Families).
	ScopesDeferred       = "ScopesDeferred"
	RateLimitedUntil     = "RateLimitedUntil"
	ExitCode             = "ExitCode"
	LastSuccessTimestamp = "LastSuccessTimestamp"
	MassSuspicionScopes  = "MassSuspicionScopes"
	RunnerLogBlind       = "RunnerLogBlind"
	ScopeSkipStreak      = "ScopeSkipStreak"
	ActionBoundStreak    = "ActionBoundStreak"
	ReapLoops            = "ReapLoops"
	ReapLoopActions      = "ReapLoopActions"

	DimMode     = "Mode"
	DimVerdict  = "Verdict"
	DimResult   = "Result"
	DimSkipKind = "SkipKind"
	DimGroup    = "Group"
	DimPrint    = "Fingerprint"

	unitMilliseconds = "Milliseconds"
	unitCount        = "Count"
	unitSeconds      = "Seconds"
	unitNone         = "None"
	maxNamespace     = 255
	maxDimValue      = 1024
)

// WriteEMF writes a sweep's metrics as EMF lines (see the package doc),
// timestamped now, in CloudWatch namespace, with one Write call so that
// other output cannot land between its lines. It writes nothing when the
// namespace is invalid.
func WriteEMF(w io.Writer, res sweep.Result, namespace string, now time.Time) error {
	if err := checkNamespace(namespace); err != nil {
		return err
	}
	ts := now.UnixMilli()
	mode := res.Mode.String()
	var buf bytes.Buffer

	defs := []metricDef{
		{SweepDuration, unitMilliseconds},
		{GitHubRequests, unitCount},
		{GitHubNotModified, unitCount},
		{KubeRequests, unitCount},
		{ScopesSkipped, unitCount},
		{ScopesDeferred, unitCount},
		{RateLimitedUntil, unitSeconds},
		{ExitCode, unitNone},
		{MassSuspicionScopes, unitCount},
		{RunnerLogBlind, unitCount},
	}
	members := []member{
		{DimMode, mode},
		{SweepDuration, res.Duration.Milliseconds()},
		{GitHubRequests, res.GitHub.Requests},
		{GitHubNotModified, res.GitHub.NotModified},
		{KubeRequests, res.Kube.Requests},
		{ScopesSkipped, len(res.Class.Skipped) - len(res.Deferred)},
		{ScopesDeferred, len(res.Deferred)},
		{RateLimitedUntil, rateLimitedUntil(res)},
		{ExitCode, int(res.Status)},
		{MassSuspicionScopes, len(res.Confirmation.MassSuspicion)},
		{RunnerLogBlind, runnerLogBlind(res)},
	}
	// A ledger that could not be read says nothing of the streaks.
	if res.StreaksKnown {
		defs = append(defs, metricDef{ScopeSkipStreak, unitCount}, metricDef{ActionBoundStreak, unitCount})
		members = append(members, member{ScopeSkipStreak, res.Streaks.MaxSkip()}, member{ActionBoundStreak, res.Streaks.Bound})
	}
	if res.Looked {
		defs = append(defs, metricDef{ReapLoops, unitCount})
		members = append(members, member{ReapLoops, len(res.Loops)})
	}
	// Only a sweep that exited 0 writes it: an alarm on its missing data
	// is the alarm on no successful sweep.
	for _, s := range SuccessSamples(res) {
		defs = append(defs, metricDef{LastSuccessTimestamp, unitSeconds})
		members = append(members, member{LastSuccessTimestamp, int64(s.Value)})
	}
	err := writeLine(&buf, ts, directive{
		Namespace:  namespace,
		Dimensions: [][]string{{DimMode}},
		Metrics:    defs,
	}, members)
	if err != nil {
		return err
	}

	for _, p := range pairs(res) {
		err := writeLine(&buf, ts, directive{
			Namespace:  namespace,
			Dimensions: [][]string{{DimVerdict, DimResult}},
			Metrics:    []metricDef{{Actions, unitCount}},
		}, []member{
			{DimVerdict, p.verdict},
			{DimResult, p.result},
			{Actions, p.n},
			{DimMode, mode},
		})
		if err != nil {
			return err
		}
	}
	for _, k := range skipKinds(res) {
		err := writeLine(&buf, ts, directive{
			Namespace:  namespace,
			Dimensions: [][]string{{DimSkipKind}},
			Metrics:    []metricDef{{ScopesSkipped, unitCount}},
		}, []member{
			{DimSkipKind, k.kind},
			{ScopesSkipped, k.n},
			{DimMode, mode},
		})
		if err != nil {
			return err
		}
	}
	if res.Looked {
		for _, l := range res.Loops[:min(len(res.Loops), MaxLoopSeries)] {
			err := writeLine(&buf, ts, directive{
				Namespace:  namespace,
				Dimensions: [][]string{{DimGroup, DimPrint}},
				Metrics:    []metricDef{{ReapLoopActions, unitCount}},
			}, []member{
				{DimGroup, l.Group.String()},
				{DimPrint, l.Fingerprint},
				{ReapLoopActions, l.Count},
				{DimMode, mode},
			})
			if err != nil {
				return err
			}
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write emf metrics: %w", err)
	}
	return nil
}

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// member is one top-level member of a line, written in order: a map would
// sort "_aws" after the dimensions, which is legal but harder to read.
type member struct {
	key   string
	value any
}

func writeLine(buf *bytes.Buffer, ts int64, d directive, members []member) error {
	meta, err := json.Marshal(metadata{Timestamp: ts, CloudWatchMetrics: []directive{d}})
	if err != nil {
		return fmt.Errorf("emf metadata: %w", err)
	}
	buf.WriteString(`{"_aws":`)
	buf.Write(meta)
	for _, m := range members {
		k, err := json.Marshal(m.key)
		if err != nil {
			return fmt.Errorf("emf member %q: %w", m.key, err)
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return fmt.Errorf("emf member %q: %w", m.key, err)
		}
		buf.WriteByte(',')
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteString("}\n")
	return nil
}

type pair struct {
	verdict, result string
	n               int
}

// pairs counts outcomes and pending candidates by (verdict, result), sorted
// so that two writes of one result are byte-identical.
func pairs(res sweep.Result) []pair {
	counts := map[[2]string]int{}
	for _, o := range res.Outcomes {
		counts[[2]string{dimValue(string(o.Candidate.Verdict)), dimValue(string(o.Result))}]++
	}
	for _, c := range res.Pending {
		counts[[2]string{dimValue(string(c.Verdict)), sweep.PendingConfirmation}]++
	}
	out := make([]pair, 0, len(counts))
	for k, n := range counts {
		out = append(out, pair{k[0], k[1], n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].verdict != out[j].verdict {
			return out[i].verdict < out[j].verdict
		}
		return out[i].result < out[j].result
	})
	return out
}

type skipKind struct {
	kind string
	n    int
}

// skipKinds counts the skipped scopes by kind, sorted by kind. A skip with
// no kind (none comes from a sweep) has no line of its own; the main
// line's ScopesSkipped still counts it.
func skipKinds(res sweep.Result) []skipKind {
	counts := map[string]int{}
	for _, s := range res.Class.Skipped {
		// A scope the budget deferred is not a fault to alarm on.
		if s.Kind != "" && s.Kind != fleet.SkipDeferred {
			counts[dimValue(string(s.Kind))]++
		}
	}
	out := make([]skipKind, 0, len(counts))
	for k, n := range counts {
		out = append(out, skipKind{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kind < out[j].kind })
	return out
}

// dimValue makes a value CloudWatch accepts as a dimension value: 1 to 1024
// characters.
func dimValue(s string) string {
	if s == "" {
		return "unknown"
	}
	if len(s) > maxDimValue {
		return s[:maxDimValue]
	}
	return s
}

// checkNamespace applies CloudWatch's rules for a custom namespace: 1 to
// 255 characters out of letters, digits and . - _ / # : and space, not in
// the reserved AWS/ prefix.
func checkNamespace(ns string) error {
	if ns == "" || len(ns) > maxNamespace {
		return fmt.Errorf("emf namespace %q: must be 1 to %d characters", ns, maxNamespace)
	}
	if strings.HasPrefix(ns, "AWS/") {
		return fmt.Errorf("emf namespace %q: the AWS/ prefix is reserved", ns)
	}
	for _, r := range ns {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-/#: ", r):
		default:
			return fmt.Errorf("emf namespace %q: character %q is not allowed", ns, r)
		}
	}
	return nil
}
