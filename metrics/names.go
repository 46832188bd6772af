package metrics

// Prometheus names of a sweep's figures: a contract, as the shipped alerts,
// the dashboard and users' own rules key on them (test/monitoring checks
// the alerts and the dashboard name only these). Every figure is the last
// sweep's, pushed once at its end, so each is a gauge: a batch job's
// per-run count is not a counter, and `_total` would invite rate() over a
// value that restarts every sweep.
//
// Labels come only from closed sets (mode, verdict, result, kind); never a
// scope, namespace or runner name, so 1,000 scopes add no series.
const (
	// PromActions is the number of candidates by verdict and result,
	// pending ones under the result "pending-confirmation" (EMF: Actions
	// by Verdict and Result).
	PromActions = "runner_reaper_sweep_actions"
	// PromScopesSkipped is the scopes whose list could not be used, by
	// kind: failed, rate-limited, inconsistent; each kind always present
	// (EMF: ScopesSkipped by SkipKind).
	PromScopesSkipped = "runner_reaper_sweep_scopes_skipped"
	// PromScopesDeferred is the scopes the budget left for a later sweep
	// of the rotation (EMF: ScopesDeferred).
	PromScopesDeferred = "runner_reaper_sweep_scopes_deferred"
	// PromRateLimitedUntil is when GitHub's rate limit, as it said, ends;
	// 0 when it did not limit the sweep (EMF: RateLimitedUntil).
	PromRateLimitedUntil = "runner_reaper_rate_limited_until_timestamp_seconds"
	// PromGitHubRequests, PromGitHubNotModified and PromKubeRequests count
	// the sweep's requests (EMF: GitHubRequests, GitHubNotModified,
	// KubeRequests).
	PromGitHubRequests    = "runner_reaper_sweep_github_requests"
	PromGitHubNotModified = "runner_reaper_sweep_github_not_modified"
	PromKubeRequests      = "runner_reaper_sweep_kube_requests"
	// PromDuration is the sweep's wall time (EMF: SweepDuration, in ms).
	PromDuration = "runner_reaper_sweep_duration_seconds"
	// PromExitCode is the process's exit status for the sweep, 0, 1 or 3,
	// labelled with the mode (EMF: ExitCode).
	PromExitCode = "runner_reaper_sweep_exit_code"
	// PromLastSweep is when the sweep started (EMF: the line's Timestamp).
	PromLastSweep = "runner_reaper_last_sweep_timestamp_seconds"
	// PromLastSuccess is when the last sweep that exited 0 started; pushed
	// only by such a sweep, in a group of its own, so a failing sweep
	// leaves it in place (EMF: LastSuccessTimestamp, on success only).
	PromLastSuccess = "runner_reaper_last_success_timestamp_seconds"
	// PromMassSuspicion is the scopes that set off the mass-suspicion
	// alarm this sweep (EMF: MassSuspicionScopes).
	PromMassSuspicion = "runner_reaper_sweep_mass_suspicion_scopes"
	// PromRunnerLogBlind is the runners the sweep removed (or, in a dry
	// run, would have) after reading their logs and getting no word
	// either way: the read failed, or the tail was cut or held none of
	// the runner's lines (EMF: RunnerLogBlind).
	PromRunnerLogBlind = "runner_reaper_sweep_runner_log_blind"
	// PromSkipStreak is the most sweeps in a row that any one configured
	// scope has been skipped (failed, rate-limited or inconsistent; a
	// deferral is neither a skip nor a break), from the ledger (EMF:
	// ScopeSkipStreak).
	PromSkipStreak = "runner_reaper_scope_skip_streak_max"
	// PromBoundStreak is how many sweeps in a row the action bound
	// (REAPER_MAX_ACTIONS, REAPER_MAX_FRACTION) left a candidate for
	// later, from the ledger (EMF: ActionBoundStreak).
	PromBoundStreak = "runner_reaper_action_bound_streak"
	// PromReapLoops is the groups in a reap loop as the sweep leaves the
	// ledger's window (EMF: ReapLoops).
	PromReapLoops = "runner_reaper_reap_loops"
	// PromReapLoopActions is, for the MaxLoopSeries groups in a reap loop
	// with the most actions, the actions of the window with the loop's
	// fingerprint, labelled with the group and the fingerprint (EMF:
	// ReapLoopActions by Group, Fingerprint). The group is the one label
	// not from a closed set: the cap keeps its series bounded, and the
	// warning `reap loop` names every group.
	PromReapLoopActions = "runner_reaper_reap_loop_actions"
)

// The long-running mode's own figures (`runner-reaper serve`), served on
// its /metrics beside the last sweep's: the state of the process now, not
// of a sweep, so that neither a Pushgateway nor EMF carries them. resource
// is "pods" or "ephemeralrunners"; a resource watched in several
// namespaces is summed over them (live only when all are), so that no
// namespace is a label.
const (
	// PromLeader is 1 while the process holds the Lease and sweeps, 0
	// while it stands by.
	PromLeader = "runner_reaper_leader"
	// PromWatchLive is 1 while every watch of the resource is live
	// (synced, open, and heard from within its stale bound), 0 while a
	// sweep would find its store incomplete.
	PromWatchLive = "runner_reaper_watch_live"
	// PromWatchRelists is the complete lists of the resource's watches
	// since the process started, the first included.
	PromWatchRelists = "runner_reaper_watch_relists"
	// PromStoreObjects is the objects the resource's stores hold now.
	PromStoreObjects = "runner_reaper_store_objects"
)

// MaxLoopSeries is the most groups PromReapLoopActions carries.
const MaxLoopSeries = 10
