// Package report turns a sweep's result into what people and machines read
// afterwards: one JSON line per action, one summary line per sweep, and the
// audit table. Field names are a contract: dashboards and alerts key on them.
package report

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Log writes a sweep's lines: warnings for skipped scopes, unobserved
// namespaces, ambiguous runner names and mass suspicion first, then one line
// per ready candidate, then the summary. The action lines and the summary
// pass a Diagnostics handler at every level; the warnings before them do
// not.
func Log(ctx context.Context, log *slog.Logger, res sweep.Result) {
	for _, s := range res.Class.Skipped {
		if s.Kind == fleet.SkipDeferred {
			continue // one line for all of them, below
		}
		attrs := []slog.Attr{slog.String("scope", s.ScopeKey), slog.String("kind", string(s.Kind)), slog.String("reason", s.Reason)}
		if !s.Until.IsZero() {
			attrs = append(attrs, slog.Time("until", s.Until.UTC()))
		}
		attrs = append(attrs, slog.String("effect", "no GitHub-based verdict for this scope's pods; their marks are held"))
		log.LogAttrs(ctx, slog.LevelWarn, "scope skipped", attrs...)
	}
	if len(res.Moved) > 0 {
		// Info, not a warning: an ephemeral fleet's list moves while it
		// is read, and the scope is judged all the same.
		log.LogAttrs(ctx, slog.LevelInfo, "runner lists moved while read",
			slog.Any("scopes", res.Moved),
			slog.String("effect", "judged: every runner listed counts as listed; an absence is acted on only once a look-up by name has found no such runner"))
	}
	if len(res.Deferred) > 0 {
		// Info, not a warning: the budget working as configured.
		log.LogAttrs(ctx, slog.LevelInfo, "scopes deferred",
			slog.Any("scopes", res.Deferred), slog.String("next_scope", res.NextScope),
			slog.String("effect", "not listed this sweep (scope cap or deadline); their pods get no GitHub-based verdict and their marks are held until the rotation lists them"))
	}
	for _, u := range res.Class.Unobserved {
		log.LogAttrs(ctx, slog.LevelWarn, "namespace not observed",
			slog.String("namespace", u.Namespace), slog.String("reason", u.Reason),
			slog.String("effect", "no ghost verdict this sweep, ghost marks are held; pods elsewhere are judged as usual"))
	}
	for _, a := range res.Class.Ambiguities {
		log.LogAttrs(ctx, slog.LevelWarn, "ambiguous runner name", ambiguityAttrs(a)...)
	}
	for _, m := range res.Confirmation.MassSuspicion {
		log.LogAttrs(ctx, slog.LevelWarn, "mass suspicion",
			slog.String("scope", m.ScopeKey), slog.Int("newly_suspect", m.NewlySuspect), slog.Int("pods", m.Pods),
			slog.String("effect", "confirmation and bounds still apply; check GitHub's status before raising the bounds"))
	}
	warnNoLogRight(ctx, log, res.Outcomes)
	warnLogBlind(ctx, log, res.Outcomes)
	// The action lines and the summary are the product's output, written
	// at every log level through a logger built with Diagnostics; the
	// lines above are diagnostics, and the level may filter them.
	records := asRecord(ctx)
	for _, o := range res.Outcomes {
		level := slog.LevelInfo
		if o.Result == fleet.Failed || o.EventErr != nil {
			level = slog.LevelError
		}
		a := append(actionAttrs(res.Started, o), jobAttrs(res.WebHost, o)...)
		log.LogAttrs(records, level, "action", append(a, runnerLogAttrs(o)...)...)
	}
	log.LogAttrs(records, summaryLevel(res), "sweep", summaryAttrs(res)...)
}

// ambiguityAttrs says which name (or id) could not be tied to one pod and
// one registration, and who claims it.
func ambiguityAttrs(a reconcile.Ambiguity) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("scope", a.ScopeKey), slog.String("runner_name", a.RunnerName),
		slog.String("reason", a.Reason), slog.Any("pods", nonNil(a.Pods)),
	}
	if a.RunnerID != 0 {
		attrs = append(attrs, slog.Int64("runner_id", a.RunnerID))
	}
	if len(a.Registrations) > 0 {
		attrs = append(attrs, slog.Any("registration_ids", a.Registrations))
	}
	return append(attrs, slog.String("effect", "no registration is deleted by this name; a terminal pod claiming it goes without its registration"))
}

// nonNil keeps an empty list a JSON list rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func actionAttrs(now time.Time, o reap.Outcome) []slog.Attr {
	c := o.Candidate
	a := []slog.Attr{
		slog.String("verdict", string(c.Verdict)),
		slog.String("evidence", c.Evidence),
		slog.String("scope", c.ScopeKey),
		slog.String("action", string(o.Action)),
		slog.String("object", o.Object),
		slog.String("result", string(o.Result)),
		slog.Bool("dry_run", o.DryRun),
	}
	ns, pod, runnerName := "", "", ""
	var runnerID int64
	if c.Pod != nil {
		ns, pod, runnerName = c.Pod.Namespace, c.Pod.Name, c.Pod.RunnerName
		a = append(a, slog.Float64("pod_age_seconds", age(now, c.Pod.CreatedAt.Time())))
	}
	if er := c.EphemeralRunner; er != nil {
		ns, runnerID, runnerName = er.Namespace, er.RunnerID, er.Name
		a = append(a, slog.String("ephemeralrunner", er.Name), slog.String("phase", er.Phase))
	}
	if c.Registration != nil {
		runnerID, runnerName = c.Registration.ID, c.Registration.Name
	}
	if runnerID == 0 {
		// Known from Kubernetes (ARC's EphemeralRunner) where GitHub no
		// longer lists the registration: the id the evidence names.
		runnerID = c.RunnerID
	}
	a = append(a, slog.String("namespace", ns), slog.String("pod", pod),
		slog.Int64("runner_id", runnerID), slog.String("runner_name", runnerName))
	if !c.Mark.FirstSeen.IsZero() {
		a = append(a, slog.Float64("mark_age_seconds", age(now, c.Mark.FirstSeen)))
	}
	if c.Verdict == fleet.Zombie {
		a = append(a, slog.Bool("registration_gone", c.Gone))
	}
	if w := startWait(c); w != nil {
		// The wait's fingerprint: the cluster's words, which the log's
		// handler redacts and makes safe as it does all outside text.
		a = append(a, slog.String("wait_reason", reconcile.WaitReason(w)), slog.String("wait_message", reconcile.WaitMessage(w)),
			slog.String("wait_container", reconcile.WaitContainer(w)), slog.Bool("wait_init", w.Init))
	}
	if e := c.Exit; e != nil {
		a = append(a, slog.Int("exit_code", int(e.Code)), slog.Int("signal", int(e.Signal)),
			slog.String("reason", e.Reason), slog.String("exit_class", string(e.Class)),
			slog.Bool("exit_from_last_state", e.FromLastState))
		if !e.FinishedAt.IsZero() {
			a = append(a, slog.Time("exit_finished_at", e.FinishedAt.UTC()))
		}
	}
	if o.Registration != "" {
		a = append(a, slog.String("registration_result", string(o.Registration)))
	}
	if o.ObjectResult != "" {
		a = append(a, slog.String("object_result", string(o.ObjectResult)))
		// pod_result is kept for the dashboards that key on it, and only
		// where the object is the pod.
		if c.Pod != nil && c.EphemeralRunner == nil && !c.Pod.Owner.ARCOwned() {
			a = append(a, slog.String("pod_result", string(o.ObjectResult)))
		}
	}
	if o.Finalizer != "" {
		a = append(a, slog.String("finalizer_result", string(o.Finalizer)))
	}
	if o.ServiceAccount != "" {
		a = append(a, slog.String("serviceaccount_result", string(o.ServiceAccount)))
	}
	if o.Err != nil {
		a = append(a, slog.String("error", o.Err.Error()))
	}
	if rl := fleet.AsRateLimit(o.Err); rl != nil {
		a = append(a, slog.Time("until", rl.Until.UTC()))
	}
	if o.EventErr != nil {
		a = append(a, slog.String("event_error", o.EventErr.Error()))
	}
	return a
}

// startWait is what held a never-started runner back, or nil where
// nothing said (a wait that only tells when the pod was scheduled).
func startWait(c reconcile.Candidate) *fleet.StartWait {
	if c.Verdict != fleet.NeverStarted || c.Pod == nil || c.Pod.StartWait == nil || c.Pod.StartWait.Reason == "" {
		return nil
	}
	return c.Pod.StartWait
}

// jobAttrs name the job the runner is known to have held, so that a
// post-mortem goes from the runner to its job: repository, run, job name
// and the run's page; and, where the guard asked GitHub, the job's state
// and conclusion then. A runner known to have held no job gets none.
func jobAttrs(webHost string, o reap.Outcome) []slog.Attr {
	j := o.Candidate.Job
	if j == nil {
		return nil
	}
	var a []slog.Attr
	if j.Known() {
		a = append(a, slog.String("job_repository", j.Repository()), slog.Int64("job_run_id", j.RunID),
			slog.String("job_run_url", j.RunURL(webHost)))
	}
	if j.JobID != 0 {
		a = append(a, slog.Int64("job_id", j.JobID))
	}
	name := j.Name
	if st := o.Job; st != nil {
		a = append(a, slog.String("job_status", st.Status), slog.String("job_conclusion", st.Conclusion))
		if st.HTMLURL != "" {
			a = append(a, slog.String("job_url", st.HTMLURL))
		}
		if name == "" {
			name = st.Name
		}
	}
	if name != "" {
		a = append(a, slog.String("job_name", name))
	}
	if j.RequestID != 0 {
		a = append(a, slog.Int64("job_request_id", j.RequestID))
	}
	return a
}

// runnerLogAttrs say what the runner's own log said when the guard read
// it: the word (listening, running, completed, silent, or unread with
// why), and the job it named where nothing else named one. The name is
// already bounded and escaped (package runnerlog).
func runnerLogAttrs(o reap.Outcome) []slog.Attr {
	l := o.RunnerLog
	if l == nil {
		return nil
	}
	if l.Err != nil {
		return []slog.Attr{slog.String("runner_log", "unread"), slog.String("runner_log_error", l.Err.Error())}
	}
	a := []slog.Attr{slog.String("runner_log", l.Word.Kind.String())}
	if l.Word.Job != "" && o.Candidate.Job == nil {
		a = append(a, slog.String("job_name", l.Word.Job))
	}
	if l.Word.Result != "" {
		a = append(a, slog.String("job_result", l.Word.Result))
	}
	return a
}

// warnNoLogRight says once a sweep, not once per runner, that RBAC refused
// the runners' logs, which right is missing and how to grant it or turn
// the read off. Without the right the guard has no evidence: the sweep
// goes on by today's rules, and exits as it would have.
func warnNoLogRight(ctx context.Context, log *slog.Logger, outs []reap.Outcome) {
	n := 0
	var first error
	for _, o := range outs {
		if o.RunnerLog != nil && errors.Is(o.RunnerLog.Err, fleet.ErrNoLogRight) {
			if n == 0 {
				first = o.RunnerLog.Err
			}
			n++
		}
	}
	if n == 0 {
		return
	}
	log.LogAttrs(ctx, slog.LevelWarn, "runner logs not readable",
		slog.Int("runners", n), slog.String("right", "get pods/log"), slog.String("reason", first.Error()),
		slog.String("fix", "grant get on pods/log in the runners' namespaces (chart: runnerLog.enabled=true; kustomize: the base, or components/runner-log), or set REAPER_READ_RUNNER_LOG=false"),
		slog.String("effect", "runners with no recorded job are acted on without their own word on it: GitHub's flags and the 422 alone, as with the read off"))
}

// warnLogBlind says once a sweep that the runner-log guard let runners be
// removed with no word from their own logs, and how many for each reason:
// a guard that reads nothing useful looks, from the results alone, like
// one that read and found no job, and the operator must see the
// difference.
func warnLogBlind(ctx context.Context, log *slog.Logger, outs []reap.Outcome) {
	n, why := logBlind(outs)
	if n == 0 {
		return
	}
	log.LogAttrs(ctx, slog.LevelWarn, "runner log guard blind",
		slog.Int("runners", n),
		slog.Int(reap.BlindUnread, why[reap.BlindUnread]), slog.Int(reap.BlindCut, why[reap.BlindCut]), slog.Int(reap.BlindSilent, why[reap.BlindSilent]),
		slog.String("fix", "unread: the action lines' runner_log_error; cut or silent: the runner's own lines were not among the last 50 lines (16 KiB) of its log, as when ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT copies the worker's trace there: unset it in the runner's pod, or record jobs (REAPER_JOB_FROM)"),
		slog.String("effect", "these runners were removed with no word from their own logs: GitHub's flags and the 422 alone decided, as with the read off"))
}

// logBlind counts the outcomes the runner-log guard let go on blind
// (reap.Outcome.LogBlind), in all and by why.
func logBlind(outs []reap.Outcome) (int, map[string]int) {
	n, why := 0, map[string]int{}
	for _, o := range outs {
		if w, ok := o.LogBlind(); ok {
			n++
			why[w]++
		}
	}
	return n, why
}

func summaryLevel(res sweep.Result) slog.Level {
	switch res.Status {
	case sweep.StatusComplete:
		return slog.LevelInfo
	case sweep.StatusDegraded:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func summaryAttrs(res sweep.Result) []slog.Attr {
	verdicts := map[string]int{}
	for _, c := range res.Confirmation.Candidates {
		verdicts[string(c.Verdict)]++
	}
	results := map[string]int{}
	for _, o := range res.Outcomes {
		results[string(o.Result)]++
	}
	if len(res.Pending) > 0 {
		results[sweep.PendingConfirmation] = len(res.Pending)
	}
	skipped := make([]string, 0, len(res.Class.Skipped))
	for _, s := range res.Class.Skipped {
		if s.Kind != fleet.SkipDeferred {
			skipped = append(skipped, s.ScopeKey)
		}
	}
	unobserved := make([]string, 0, len(res.Class.Unobserved))
	for _, u := range res.Class.Unobserved {
		unobserved = append(unobserved, u.Namespace)
	}
	// Runners reaped that are known to have held a job: the deaths a
	// post-mortem may have to trace to a job.
	holdingJob := 0
	for _, o := range res.Outcomes {
		if o.Candidate.Job != nil && (o.Result == fleet.Deleted || o.Result == fleet.WouldDelete) {
			holdingJob++
		}
	}
	blind, _ := logBlind(res.Outcomes)
	registrations := 0
	for _, l := range res.Observation.Lists {
		registrations += len(l.Runners)
	}
	a := []slog.Attr{
		slog.String("mode", res.Mode.String()),
		slog.Bool("dry_run", res.Mode != sweep.Act),
		slog.Int("status", int(res.Status)),
		slog.Int64("duration_ms", res.Duration.Milliseconds()),
		slog.Bool("observed", res.Looked),
		slog.Int("pods_observed", res.Observed.Pods),
		slog.Int("registrations_observed", registrations),
		slog.Int("scopes", len(res.Observation.Lists)),
		slog.Any("scopes_skipped", skipped),
		slog.Any("scopes_deferred", nonNil(res.Deferred)),
		slog.Any("scopes_moved", nonNil(res.Moved)),
		slog.String("ledger", res.Ledger),
		slog.Any("namespaces_unobserved", unobserved),
		countsGroup("verdicts", verdicts),
		countsGroup("results", results),
		slog.Int("protected_busy", res.Class.Protected),
		slog.Int("reaped_holding_job", holdingJob),
		slog.Int("runner_log_blind", blind),
		slog.Int("unscoped_pods", res.Class.Unscoped),
		slog.Int("not_runner_pods", res.Class.NotRunner),
		slog.Int("owner_deleting_pods", res.Class.OwnerDeleting),
		slog.Int("ambiguous_runners", len(res.Class.Ambiguities)),
		slog.Int("marks", len(res.Confirmation.Marks)),
		slog.Int("marks_cleared", len(res.Confirmation.Cleared)),
		slog.Int("marks_held", len(res.Confirmation.Held)),
		slog.Int("mass_suspicion_scopes", len(res.Confirmation.MassSuspicion)),
		slog.Int64("github_requests", res.GitHub.Requests),
		slog.Int64("github_not_modified", res.GitHub.NotModified),
		slog.Int64("kube_requests", res.Kube.Requests),
		// The bytes of the API server's answers read: in the long-running
		// mode those the watches read since the last sweep's summary too.
		slog.Int64("kube_bytes", res.Kube.Bytes),
		// Which build swept: ties a summary line to a release and commit.
		slog.String("version", Version()),
		slog.String("revision", Revision()),
	}
	if until := RateLimitedUntil(res); !until.IsZero() {
		a = append(a, slog.Time("github_rate_limited_until", until))
	}
	if res.LedgerTrim.Trimmed() {
		// Only when the save had to drop something, as the backend's own
		// "ledger trimmed" warning says; the summary is what gets read.
		a = append(a,
			slog.Int("ledger_trimmed_marks", res.LedgerTrim.DroppedMarks),
			slog.Int("ledger_trimmed_lists", res.LedgerTrim.DroppedLists),
			slog.Int("ledger_trimmed_records", res.LedgerTrim.DroppedRecords),
			slog.Int("ledger_trimmed_loop_groups", res.LedgerTrim.DroppedLoops))
	}
	if res.Err != nil {
		a = append(a, slog.String("error", res.Err.Error()))
	}
	if res.Stopped != "" {
		a = append(a, slog.String("stopped", res.Stopped))
	}
	return a
}

// RateLimitedUntil is the latest time GitHub said it would take requests
// again, from a skipped scope or an action held back; zero when GitHub did
// not rate-limit the sweep.
func RateLimitedUntil(res sweep.Result) time.Time {
	var until time.Time
	for _, s := range res.Class.Skipped {
		if s.Until.After(until) {
			until = s.Until
		}
	}
	for _, o := range res.Outcomes {
		if rl := fleet.AsRateLimit(o.Err); rl != nil && rl.Until.After(until) {
			until = rl.Until
		}
	}
	return until.UTC()
}

// countsGroup renders a count map with sorted keys, so that two summaries
// of the same sweep are byte-identical.
func countsGroup(name string, m map[string]int) slog.Attr {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]any, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Int(k, m[k]))
	}
	return slog.Group(name, attrs...)
}

// Summary is the sweep's summary line as a JSON object, with the same keys:
// the Lambda's response.
func Summary(res sweep.Result) map[string]any {
	return attrsMap(summaryAttrs(res))
}

func attrsMap(attrs []slog.Attr) map[string]any {
	m := make(map[string]any, len(attrs))
	for _, a := range attrs {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			m[a.Key] = attrsMap(v.Group())
			continue
		}
		m[a.Key] = v.Any()
	}
	return m
}

// age is how long before now t was, in seconds, and never less than none:
// a time written on the API server's clock can read a moment after the
// sweep's now, which agrees with it only to within refclock.Tolerance.
func age(now, t time.Time) float64 { return max(now.Sub(t), 0).Seconds() }
