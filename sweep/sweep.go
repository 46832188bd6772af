// Package sweep drives one sweep: observe, classify, confirm, bound, act,
// report. It owns the order of those steps and nothing else; every decision
// is made by the pure functions of package reconcile, every delete passes
// through package reap.
package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/history"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/internal/refclock"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

// PodLister lists the managed pods, already reduced to what classification
// needs.
type PodLister interface {
	ListPods(ctx context.Context) ([]fleet.Pod, error)
}

// NamespaceChecker says which configured namespaces the pods listed cannot
// vouch for: those that do not exist, or whose existence could not be
// checked. An empty list from a misspelt namespace would otherwise make the
// registrations of pods elsewhere look like ghosts.
type NamespaceChecker interface {
	UnobservedNamespaces(ctx context.Context, pods []fleet.Pod) []fleet.UnobservedNamespace
}

// RunnerLister reads one scope's runner list, using and renewing the
// conditional-request cache. A list that moved while it was read comes
// with its registrations and cache and an error wrapping fleet.ErrMoved;
// any other error comes with neither.
type RunnerLister interface {
	ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error)
}

// EphemeralRunnerLister lists ARC's EphemeralRunners, for ARC's own leaks
// and for the runner ids they know. It is given the pods already listed,
// which it only reads, so that a runner's view can share what its pod's
// view holds.
type EphemeralRunnerLister interface {
	ListEphemeralRunners(ctx context.Context, pods []fleet.Pod) ([]fleet.EphemeralRunner, error)
}

// ObjectEvents records a Warning Event on any object: the reap-loop
// report, on what makes a looping group's pods (kube.Client).
type ObjectEvents interface {
	RecordObjectEvent(ctx context.Context, namespace string, o fleet.Owner, reason, message string) error
}

// Counter reports the requests a client has sent.
type Counter interface {
	Counts() httpcount.Counts
}

// Mode is what a sweep may change.
type Mode int

const (
	// Act marks, confirms and deletes.
	Act Mode = iota
	// DryRun marks and confirms like Act, and reads what Act reads before
	// it writes (the re-check by name, the pre-flight dry run), so that its
	// output shows what a real sweep would do; it deletes nothing.
	DryRun
	// Audit changes nothing at all, not even the ledger.
	Audit
)

// String is the mode's name in log lines and metrics.
func (m Mode) String() string {
	switch m {
	case Act:
		return "sweep"
	case DryRun:
		return "dry-run"
	default:
		return "audit"
	}
}

// PendingConfirmation is how reports and metrics count a candidate whose
// mark has not yet held for long enough to act.
const PendingConfirmation = "pending-confirmation"

// Status is the process exit status a sweep maps to.
type Status int

const (
	StatusComplete Status = 0
	// StatusFailed: the sweep could not observe or act.
	StatusFailed Status = 1
	// StatusDegraded: complete, but something was held back (a scope
	// skipped, a namespace unobserved, actions rate-limited or not
	// reached). Status 2 is the entry points' own: bad configuration.
	StatusDegraded Status = 3
)

// Sweeper holds what a sweep needs; it keeps nothing between sweeps.
type Sweeper struct {
	Pods PodLister
	// WebHost is the GitHub web host (github.com, or a GHES host) whose
	// run pages the report links a runner's job to.
	WebHost string
	// Namespaces checks the configured namespaces the pod list found
	// empty; nil checks none (all namespaces are listed at once).
	Namespaces NamespaceChecker
	Runners    RunnerLister
	// EphemeralRunners is consulted only when Policy.ARC is on.
	EphemeralRunners EphemeralRunnerLister
	Ledger           state.Store
	// LedgerName says which ledger Ledger is and where, as REAPER_LEDGER
	// would name it (a file's path made absolute), for the summary: a
	// sweep run by hand must say where it left its marks.
	LedgerName string
	// Reaper builds the choke point for the sweep's mode, the only thing
	// that tells it whether to write.
	Reaper func(mode Mode) *reap.Reaper
	Scopes []fleet.Scope
	Policy reconcile.Policy
	Hold   reconcile.Hold
	Log    *slog.Logger
	// Now is the reference clock every age is measured on: the API
	// server's (kube.Client.Now), read again once the API server has
	// answered in this sweep, so that marks written on any node, pod times
	// and EphemeralRunner times share one clock.
	Now func() time.Time
	// Local is this machine's own clock, the second of the two every
	// confirmation needs (reconcile.Clocks): a lying Date moves Now alone
	// and cannot hurry a mark. Nil means Now: one clock, as a test that
	// drives time by hand has.
	Local func() time.Time
	// Skew, when set, says how far the reference clock is ahead of the
	// local one and whether it has been read yet, for the skew warning.
	Skew func() (time.Duration, bool)
	// GitHub and Kube count requests for the summary; either may be nil.
	GitHub Counter
	Kube   Counter
	// Timeout bounds the whole sweep: observation past it fails, and the
	// reaper starts no action within its spare time of it. A context with
	// a sooner deadline of its own (a Lambda invocation's) keeps that one.
	// Zero sets no deadline of the sweep's own.
	Timeout time.Duration
	// MaxScopes caps the scopes listed per sweep (REAPER_MAX_SCOPES_PER_SWEEP);
	// zero lists every scope that fits the deadline. See budget.
	MaxScopes int
	// ListRoom is the time before the sweep's deadline (its own or its
	// context's) that listing leaves to the rest of the sweep: classify,
	// the ledger's save and the actions, the reaper's spare included. Zero
	// defers no scope for time.
	ListRoom time.Duration
	// HistorySize is how many records of actions done the ledger keeps
	// (REAPER_HISTORY_SIZE), the newest; zero records nothing, and an Act
	// sweep's first save then clears what earlier ones recorded.
	HistorySize int
	// Version is the release of runner-reaper, stamped on each record.
	Version string
	// Redact removes the process's secrets from a text before the record
	// keeps it, and from what holds a runner back before it is judged;
	// nil keeps it as it is.
	Redact func(string) string
	// Loops is when a group's actions are a reap loop
	// (REAPER_LOOP_THRESHOLD, REAPER_LOOP_WINDOW); the zero Policy finds
	// none and keeps no window.
	Loops loops.Policy
	// Events records a loop's Event on what makes the group's pods; nil
	// records none.
	Events ObjectEvents
}

// trimReporter is a ledger that must fit a size limit (the ConfigMap and
// DynamoDB backends) and so may leave part of a ledger out of a save. The
// sweep reports what the last save left out: a dropped mark restarts that
// verdict's confirmation, and a dropped list cache costs rate limit.
type trimReporter interface {
	LastTrim() state.Trim
}

// ErrDeadline is the cause of a sweep stopped by its own Timeout.
var ErrDeadline = errors.New("the sweep's deadline (REAPER_SWEEP_TIMEOUT) passed")

// Result is everything one sweep did and found.
type Result struct {
	Mode     Mode
	Status   Status
	Started  time.Time
	Duration time.Duration
	// Observation is what the sweep saw. Its Pods and EphemeralRunners
	// are let go of once the sweep has judged them (see letGo); Observed
	// keeps the number of pods.
	Observation reconcile.Observation
	Observed    Observed
	// Looked is true once the sweep has observed everything it judges:
	// the ledger, the pods, the EphemeralRunners where watched, and the
	// runner lists (each one read, or skipped for a reason it reports).
	// A sweep that could not look shows nothing that could be read as a
	// clean fleet.
	Looked       bool
	Class        reconcile.Classification
	Confirmation reconcile.Confirmation
	// Outcomes holds the fate of every ready candidate.
	Outcomes []reap.Outcome
	// Pending holds candidates whose marks have not matured.
	Pending []reconcile.Candidate
	GitHub  httpcount.Counts
	Kube    httpcount.Counts
	// Err is why the sweep could not observe or act, if it could not.
	Err error
	// Stopped says why the sweep's context ended before the sweep did (a
	// signal, the deadline); empty when it did not.
	Stopped string
	// Deferred are the keys of the scopes the budget left for later sweeps
	// of the rotation, in rotation order; NextScope is where the next
	// sweep starts (empty when this one reached every scope).
	Deferred  []string
	NextScope string
	// Moved are the keys of the scopes whose list moved while it was read:
	// listed, so judged, with each absence acted on looked up by name.
	Moved []string
	// LedgerTrim is what the sweep's last successful save of the ledger
	// left out to fit the backend's size limit; zero when nothing was left
	// out, or the backend has no limit.
	LedgerTrim state.Trim
	// WebHost is Sweeper.WebHost, for the report's links to runs.
	WebHost string
	// Ledger is Sweeper.LedgerName.
	Ledger string
	// Streaks are the ledger's streaks as this sweep leaves them (as it
	// found them, when it ended before classifying), for the metrics;
	// StreaksKnown is false when the ledger could not be read.
	Streaks      state.Streaks
	StreaksKnown bool
	// Loops are the groups in a reap loop as the sweep leaves the
	// ledger's window (as it found it, for a dry run or an audit, which
	// add nothing to it), most actions first.
	Loops []loops.Loop
}

// Run performs one sweep. It never returns an error without a Result: the
// Result's Status and Err say how it ended, and its outcomes what it did.
func (s *Sweeper) Run(ctx context.Context, mode Mode) (res Result) {
	// Marks outlive the process, so the sweep's time is wall-clock UTC
	// with no monotonic reading, exactly as it reads back from the ledger.
	// It is read again once the API server has answered (below).
	now := s.Now().UTC().Round(0)
	began := time.Now()
	res = Result{Mode: mode, Started: now, WebHost: s.WebHost, Ledger: s.LedgerName}
	gh0, kube0 := counts(s.GitHub), counts(s.Kube)
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.Timeout, ErrDeadline)
		defer cancel()
	}
	defer func() {
		res.Duration = time.Since(began)
		res.GitHub, res.Kube = counts(s.GitHub).Sub(gh0), counts(s.Kube).Sub(kube0)
		if ctx.Err() != nil {
			res.Stopped = context.Cause(ctx).Error()
			if res.Err != nil && !errors.Is(res.Err, context.Cause(ctx)) {
				// The adapters only say "context canceled"; say why.
				res.Err = fmt.Errorf("%w (stopped: %w)", res.Err, context.Cause(ctx))
			}
		}
	}()

	ledger, version, err := s.Ledger.Load(ctx)
	if err != nil {
		res.Status, res.Err = StatusFailed, fmt.Errorf("load ledger: %w", err)
		return res
	}
	res.Streaks, res.StreaksKnown = ledger.Streaks, true
	// A sweep that cannot see every pod deletes nothing: a missing pod
	// would make its registration look like a ghost.
	pods, err := s.Pods.ListPods(ctx)
	if err != nil {
		res.Status, res.Err = StatusFailed, fmt.Errorf("observe pods: %w", err)
		return res
	}
	// The cached registrations take the pod views' copies of their names
	// before the EphemeralRunners' views pile up on them.
	state.ShareWithPods(ledger.Lists, pods)
	// The API server has answered: from here on every age is measured on
	// its clock.
	now = s.Now().UTC().Round(0)
	local := now
	if s.Local != nil {
		local = s.Local().UTC().Round(0)
	}
	res.Started = now
	s.warnSkew(ctx)
	var unobserved []fleet.UnobservedNamespace
	if s.Namespaces != nil {
		unobserved = s.Namespaces.UnobservedNamespaces(ctx, pods)
	}
	var ers []fleet.EphemeralRunner
	if s.Policy.ARC {
		// Like the pod list: an incomplete view would make a runner
		// look podless.
		ers, err = s.EphemeralRunners.ListEphemeralRunners(ctx, pods)
		if err != nil {
			res.Status, res.Err = StatusFailed, fmt.Errorf("observe ephemeralrunners: %w", err)
			return res
		}
	}
	// What holds a runner back is the cluster's text, which every line,
	// Event and record of its verdict repeats: redacted whole, then cut,
	// before anything is built from it (reconcile.BoundWait). Only the
	// few pods that have not started have one.
	for i := range pods {
		if pods[i].StartWait != nil {
			pods[i].StartWait = reconcile.BoundWait(pods[i].StartWait, s.Redact)
		}
	}
	obs := reconcile.Observation{Now: now, Local: local, Pods: pods, EphemeralRunners: ers, Unobserved: unobserved}
	var lists map[string]state.ListCache
	var limit *fleet.RateLimitError
	obs.Lists, lists, limit = s.listScopes(ctx, ledger, &res)
	// A deadline or a signal during the lists ends the sweep as one during
	// the pod list does: the observation is unfinished, so nothing is
	// saved or deleted, whatever the ledger backend would still accept.
	if ctx.Err() != nil {
		res.Status, res.Err = StatusFailed, fmt.Errorf("observe runner lists: %w", context.Cause(ctx))
		return res
	}
	ledger.Lists = lists
	ledger.NextScope = res.NextScope
	res.Observation, res.Looked = obs, true

	res.Class = reconcile.Classify(obs, s.Policy, ledger.Marks)
	ledger.Streaks.Skips = skipStreaks(ledger.Streaks.Skips, s.Scopes, res.Class.Skipped)
	res.Streaks = ledger.Streaks
	s.warnFutureStarts(ctx, res.Class.FutureStarts)
	if f := res.Class.ForeignOwners; len(f) > 0 {
		s.Log.LogAttrs(ctx, slog.LevelWarn, "runner pods of another GitHub",
			slog.Int("pods", len(f)), slog.Any("first", f[:min(len(f), 10)]),
			slog.String("web_host", s.WebHost),
			slog.String("effect", "their EphemeralRunner's githubConfigUrl, which wins over their labels, names no configured scope: a GitHub host other than web_host (derived from REAPER_GITHUB_API_URL), or a scope not in REAPER_SCOPES; GitHub's lists say nothing of them, and only a terminal one is acted on"))
	}
	res.Confirmation = reconcile.Confirm(reconcile.Clocks{Ref: now, Local: local}, res.Class, ledger.Marks, s.Hold)
	s.warnFuture(ctx, res.Confirmation.FromFuture)
	if d := res.Confirmation.Disagreed; len(d) > 0 {
		s.Log.LogAttrs(ctx, slog.LevelWarn, "clocks disagree",
			slog.Int("marks", len(d)), slog.Any("keys", d),
			slog.String("effect", "the API server's clock and this machine's disagree about how long ago these marks were first seen: one of them lied; each starts again"))
	}
	// The loops that stand as the sweep begins: their groups' actions
	// that need confirmation are held to one a sweep (reap.HoldLoops).
	window := loops.Prune(ledger.Loops, now, s.Loops)
	res.Loops = loops.Detect(window, now, s.Loops)
	res.Observed = letGo(&res)
	obs, pods, ers = reconcile.Observation{}, nil, nil //nolint:ineffassign // where the sweep lets go of its views: nothing after may read them
	var ready []reconcile.Candidate
	for _, c := range res.Confirmation.Candidates {
		if c.Ready {
			ready = append(ready, c)
		} else {
			res.Pending = append(res.Pending, c)
		}
	}

	if mode != Audit {
		ledger.Marks = res.Confirmation.Marks
		if mode == Act {
			// The record's bound holds from this save on, a bound
			// lowered (or 0, the record off) too. A dry run keeps the
			// record as it found it: it is not its to change.
			ledger.History = state.KeepLast(ledger.History, s.HistorySize)
			// Likewise the window: what has aged out of it goes.
			ledger.Loops = window
		}
		// Save before acting: if another sweep saved since we loaded,
		// it may be acting on the same verdicts, so this one must not.
		version, err = s.Ledger.Save(ctx, ledger, version)
		if err != nil {
			res.Status, res.Err = StatusFailed, fmt.Errorf("save ledger before acting (no action taken): %w", err)
			return res
		}
		res.LedgerTrim = s.lastTrim()
	}

	reaper := s.Reaper(mode)
	if limit != nil {
		reaper.HoldGitHub(limit)
	}
	reaper.HoldLoops(loops.Looping(res.Loops))
	res.Outcomes = reaper.Reap(ctx, res.Class.ManagedPods, ready)
	res.Streaks.Bound = boundStreak(ledger.Streaks.Bound, res.Outcomes)

	var acts []loops.Act
	var grown []loops.Loop
	if mode == Act {
		acts = actsOf(res.Outcomes, now)
		window = loops.Add(window, acts, now, s.Loops)
		before := res.Loops
		res.Loops = loops.Detect(window, now, s.Loops)
		grown = newLoops(before, res.Loops)
	}
	s.warnLoops(ctx, res.Loops)

	var records []state.Record
	if mode == Act && s.HistorySize > 0 {
		records = history.Records(res.Outcomes, history.Stamp{At: s.Now().UTC().Round(0), Version: s.Version,
			WebHost: s.WebHost, Redact: s.Redact})
	}
	var lost error
	if mode != Audit {
		lost = s.saveActed(ctx, ledger, version, &res, mode == Act, records, window, acts)
	}
	s.recordLoopEvents(ctx, grown, res.Outcomes)

	res.Status, res.Err = settle(res)
	if lost != nil {
		// The actions are done and reported as done; what the ledger
		// could not keep is a failure of the sweep all the same.
		res.Status, res.Err = StatusFailed, errors.Join(res.Err, lost)
	}
	return res
}

// Observed is how much of the fleet a sweep saw, counted before its views
// were let go of (see letGo).
type Observed struct {
	Pods int
}

// letGo drops the observation's pod and EphemeralRunner views, once the
// sweep has classified and confirmed them, and collects them at once. At
// 100,000 runners they are about 40 of the 67 MB the sweep holds at its
// highest, which was during the ledger's save, whose encoding and request
// were allocated on top of them: collected before it, their room takes the
// save's allocations instead of new pages. (The registrations stay: the
// list cache the ledger saves holds them, and they hold the pod views'
// runner names.) A collection of what is left costs milliseconds.
//
// Nothing after reads the views but through the findings and candidates,
// which point into the views' slices and so would keep each slice whole:
// they are pointed at copies of the objects they name first (see detach).
// A list more than a quarter of whose objects are named (every pod failed
// at once, a GitHub that lists no one) is kept instead: the copies would
// cost about as much as the list they free, and more while both live.
func letGo(res *Result) Observed {
	obs := &res.Observation
	n := Observed{Pods: len(obs.Pods)}
	fs := make([]*reconcile.Finding, 0, len(res.Class.Findings)+len(res.Confirmation.Candidates))
	for i := range res.Class.Findings {
		fs = append(fs, &res.Class.Findings[i])
	}
	for i := range res.Confirmation.Candidates {
		fs = append(fs, &res.Confirmation.Candidates[i].Finding)
	}
	if detach(fs, len(obs.Pods), func(f *reconcile.Finding) **fleet.Pod { return &f.Pod }) {
		obs.Pods = nil
	}
	if detach(fs, len(obs.EphemeralRunners),
		func(f *reconcile.Finding) **fleet.EphemeralRunner { return &f.EphemeralRunner },
		func(f *reconcile.Finding) **fleet.EphemeralRunner { return &f.OwnerRunner }) {
		obs.EphemeralRunners = nil
	}
	runtime.GC()
	return n
}

// detach points the fields of fs at copies of the objects they name, one
// copy for each object (a finding and its candidate share it, as they
// shared the original), and reports that it did; or, when the objects
// named are more than a quarter of the total in their list, changes
// nothing and reports that it did not. Nothing compares these pointers,
// only what they point to.
func detach[T any](fs []*reconcile.Finding, total int, fields ...func(*reconcile.Finding) **T) bool {
	copies := map[*T]*T{}
	for _, f := range fs {
		for _, field := range fields {
			if p := *field(f); p != nil {
				copies[p] = nil
				if len(copies) > total/4 {
					return false
				}
			}
		}
	}
	for p := range copies {
		c := *p
		copies[p] = &c
	}
	for _, f := range fs {
		for _, field := range fields {
			if p := field(f); *p != nil {
				*p = copies[*p]
			}
		}
	}
	return true
}

// listScopes reads the runner list of each scope the budget lets this sweep
// afford, in rotation order from where the last sweep stopped, and returns
// the lists, the list cache to save, and GitHub's rate limit if it said so.
// It records in res the scopes it deferred and where the next sweep starts.
func (s *Sweeper) listScopes(ctx context.Context, ledger state.Ledger, res *Result) (map[string]reconcile.ScopeList, map[string]state.ListCache, *fleet.RateLimitError) {
	// The cache is rebuilt from the configured scopes, so a scope removed
	// from the configuration leaves nothing behind in the ledger; a scope
	// whose list failed keeps its old pages for the next conditional read.
	lists := make(map[string]state.ListCache, len(s.Scopes))
	out := make(map[string]reconcile.ScopeList, len(s.Scopes))
	// Once GitHub says rate-limited, the rest of the sweep sends it
	// nothing (see notListed): later scopes are skipped as rate-limited.
	var limit *fleet.RateLimitError
	b := budget{max: s.MaxScopes, room: s.ListRoom}
	for _, scope := range rotation(s.Scopes, ledger.NextScope) {
		key := scope.Key()
		var cache *state.ListCache
		if c, ok := ledger.Lists[key]; ok {
			cache = &c
			lists[key] = c
		}
		if limit != nil {
			out[key] = notListed(scope, limit)
			res.NextScope = cmp.Or(res.NextScope, key)
			continue
		}
		if why := b.full(ctx); why != "" {
			out[key] = reconcile.ScopeList{Scope: scope, Skip: fleet.SkipDeferred,
				Problem: "not listed this sweep: deferred to a later sweep by the scope budget: " + why}
			res.Deferred = append(res.Deferred, key)
			res.NextScope = cmp.Or(res.NextScope, key)
			continue
		}
		began := time.Now()
		runners, fresh, err := s.Runners.ListRunners(ctx, scope, cache)
		b.spent(time.Since(began))
		if errors.Is(err, fleet.ErrMoved) && fresh != nil {
			// Runners came or went while it was read: the list serves
			// what it listed, and each absence acted on is looked up
			// by name (reconcile.ScopeList.Moved).
			out[key] = reconcile.ScopeList{Scope: scope, Moved: err.Error(), Runners: runners}
			lists[key] = *fresh
			res.Moved = append(res.Moved, key)
			continue
		}
		if err != nil {
			l := reconcile.ScopeList{Scope: scope, Problem: err.Error()}
			l.Skip, limit = fleet.SkipOf(err)
			if limit != nil {
				l.Until = limit.Until
			}
			out[key] = l
			continue
		}
		out[key] = reconcile.ScopeList{Scope: scope, Complete: true, Runners: runners}
		if fresh != nil {
			lists[key] = *fresh
		}
	}
	return out, lists, limit
}

// saveActed saves the ledger again without the marks of the candidates that
// are finished with, with when an unanswered job check was made
// (settleMarks), with the action bound's streak, and with the records of
// the actions done (records, which only a real sweep has); a dry run,
// which finished nothing, saves only the streak and the checks, so that
// its job checks take turns as a real sweep's do. It runs detached, like
// the actions it records (a signal that came during them must not lose
// what they did), and bounded like their writes: never into the time the
// report needs before the deadline. A failed save fails the sweep (exit
// 1, as for any ledger not saved), its actions still reported as done:
// its error says what the ledger lost and what the next sweep will redo
// (the marks only point at objects that are gone or busy now, which the
// next sweep drops; a stamp lost only reorders its checks). Only the
// record cannot be redone, so a save that lost the race to another sweep
// adds it to what that sweep saved (keepRecords), and settles the marks
// there too: that save of the record can itself win over the other
// sweep's save after acting, which would otherwise lose that sweep's
// marks to this sweep's record.
func (s *Sweeper) saveActed(ctx context.Context, ledger state.Ledger, version state.Version, res *Result, acted bool, records []state.Record, window map[string][]state.LoopEntry, acts []loops.Act) error {
	cleared, asked := settleMarks(ledger.Marks, res.Outcomes, res.Started, acted)
	streak := res.Streaks.Bound != ledger.Streaks.Bound
	if streak {
		ledger.Streaks.Bound = res.Streaks.Bound
	}
	if len(records) > 0 {
		ledger.History = state.KeepLast(append(ledger.History, records...), s.HistorySize)
	}
	if len(acts) > 0 {
		ledger.Loops = window
	}
	if cleared == 0 && asked == 0 && !streak && len(records) == 0 && len(acts) == 0 {
		return nil
	}
	end := time.Now().Add(reap.DefaultSpare)
	if d, ok := ctx.Deadline(); ok && d.Add(-reap.ReportReserve).Before(end) {
		end = d.Add(-reap.ReportReserve)
	}
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	_, err := s.Ledger.Save(sctx, ledger, version)
	if err == nil {
		res.LedgerTrim = s.lastTrim()
		return nil
	}
	kept := false
	if errors.Is(err, state.ErrConflict) && acted && (len(records) > 0 || len(acts) > 0 || cleared > 0 || asked > 0) {
		// The save that won may be another sweep's own save after
		// acting, or this very merge may win over it: what acting taught
		// the marks goes with the record, or the last of the two sweeps
		// to save would lose it (a spared runner's mark left to confirm
		// it at once).
		settle := func(marks map[string]fleet.Mark) {
			settleMarks(marks, res.Outcomes, res.Started, acted)
		}
		var landed bool
		if landed, kept = s.keepRecords(sctx, records, acts, settle); landed {
			// The save had landed; only its answer was lost.
			res.LedgerTrim = s.lastTrim()
			return nil
		}
	}
	var lost []string
	if cleared > 0 && !kept {
		lost = append(lost, fmt.Sprintf("the %d mark(s) of what was acted on, which the next sweep drops when it finds their objects gone or judges them again", cleared))
	}
	if asked > 0 && !kept {
		lost = append(lost, fmt.Sprintf("when %d unanswered job check(s) were asked, so the next sweep may ask about them first again", asked))
	}
	if streak {
		lost = append(lost, "the action bound's streak, which the next sweep counts from the one saved before")
	}
	if len(records) > 0 && !kept {
		lost = append(lost, fmt.Sprintf("the record of %d action(s), which no later sweep can write again (the action lines above say what was done)", len(records)))
	}
	if len(acts) > 0 && !kept {
		lost = append(lost, fmt.Sprintf("%d action(s) of the reap-loop window, so a loop of their groups is reported later", len(acts)))
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("save ledger after acting: the actions above were done, but the ledger keeps the state saved before them; lost: %s: %w", strings.Join(lost, "; "), err)
}

// recordTries bounds the saves keepRecords makes: each is lost only to
// another sweep's save, and sweeps start minutes apart.
const recordTries = 3

// keepRecords adds the records of this sweep's actions to the ledger as it
// is now, after the save after acting lost the race to another sweep that
// saved since this one did (its save before acting, or its own after),
// so that the record is never lost to a race, and settles the marks
// there as acting taught (settle: the marks of what is finished with
// dropped, job checks stamped), which only ever restarts a confirmation
// or reorders checks; the other sweep's marks are otherwise left as that
// sweep saved them. A ledger that settle leaves as it was, with no record
// to add, is not saved again. It reports whether the save that lost
// had landed after all, its answer lost (a retry of a save that had
// succeeded is refused as a conflict), and whether the records are in
// the ledger. A record is never written twice: each is stamped with this
// sweep's clock and names its own object, so one already there was put
// there by this sweep, and a save is whole or nothing, so one of them
// there means that all of them were saved (some may since have been
// trimmed, as the oldest, to fit).
func (s *Sweeper) keepRecords(ctx context.Context, records []state.Record, acts []loops.Act, settle func(map[string]fleet.Mark)) (landed, kept bool) {
	for try := range recordTries {
		l, v, err := s.Ledger.Load(ctx)
		if err != nil {
			return false, false
		}
		if anyOf(l.History, records) || anyAct(l.Loops, acts) {
			return try == 0, true
		}
		before := maps.Clone(l.Marks)
		settle(l.Marks)
		if len(records) == 0 && len(acts) == 0 && maps.Equal(before, l.Marks) {
			return false, true
		}
		if len(acts) > 0 {
			// The other sweep's window, with this sweep's actions:
			// a loop is the actions of every sweep. It is pruned at
			// the clock as it reads now, not when this sweep began:
			// the other sweep may have begun minutes later, and its
			// actions are not from the future.
			l.Loops = loops.Add(l.Loops, acts, s.windowNow(acts), s.Loops)
		}
		if len(records) > 0 {
			// The other sweep's records may be newer than these: the
			// record stays in the order of the actions.
			h := append(slices.Clip(l.History), records...)
			slices.SortStableFunc(h, func(a, b state.Record) int { return a.At.Compare(b.At) })
			l.History = state.KeepLast(h, s.HistorySize)
		}
		_, err = s.Ledger.Save(ctx, l, v)
		if err == nil {
			return false, true
		}
		if !errors.Is(err, state.ErrConflict) {
			return false, false
		}
	}
	return false, false
}

// windowNow is the time the loop window is pruned at when it is merged
// with another sweep's: the reference clock read now, and never before
// this sweep's own actions.
func (s *Sweeper) windowNow(acts []loops.Act) time.Time {
	now := s.Now().UTC().Round(0)
	for _, a := range acts {
		if a.Entry.At.After(now) {
			now = a.Entry.At
		}
	}
	return now
}

// anyAct reports whether the window w holds any of acts: each is stamped
// with its sweep's clock, so one there was put there by this sweep (a
// save is whole or nothing, so then all of them were).
func anyAct(w map[string][]state.LoopEntry, acts []loops.Act) bool {
	for _, a := range acts {
		if slices.Contains(w[a.Group.String()], a.Entry) {
			return true
		}
	}
	return false
}

// anyOf reports whether h holds any of records, compared as the ledger
// stores them.
func anyOf(h, records []state.Record) bool {
	mine := make(map[string]bool, len(records))
	for _, r := range records {
		if b, err := json.Marshal(r); err == nil {
			mine[string(b)] = true
		}
	}
	for _, r := range h {
		if b, err := json.Marshal(r); err == nil && mine[string(b)] {
			return true
		}
	}
	return false
}

// settle is how the sweep ended once it has acted: degraded when a scope
// was skipped, a namespace not observed, or an action not reached or held
// for GitHub's rate limit; failed when an action failed.
func settle(res Result) (Status, error) {
	status := StatusComplete
	if len(res.Class.Skipped) > len(res.Deferred) || len(res.Class.Unobserved) > 0 {
		// A deferred scope is the budget working as configured, not a
		// fault: the rotation lists it within a bounded number of sweeps.
		status = StatusDegraded
	}
	// An action the deadline or a signal kept from starting is owed: the
	// sweep did less than it decided to.
	for _, o := range res.Outcomes {
		if o.Result == fleet.NotReached {
			status = StatusDegraded
		}
	}
	var failed []error
	for _, o := range res.Outcomes {
		switch o.Result {
		case fleet.Failed:
			failed = append(failed, o.Err)
		case fleet.RateLimited:
			// GitHub's limit is not an action failure: the candidate
			// waits for a later sweep, as a skipped scope's marks do.
			status = StatusDegraded
		case fleet.JobUnchecked:
			// A runner held because its job could not be asked about
			// is a leak that may never be cleaned (a token without
			// actions:read fails every check): never a quiet success.
			status = StatusDegraded
		case fleet.Reported:
			// A leak reported with a reason (a scale-set pod whose
			// EphemeralRunner was not listed) is one the configuration
			// keeps the reaper from cleaning: never a quiet success.
			if o.Err != nil {
				status = StatusDegraded
			}
		}
	}
	if len(failed) > 0 {
		return StatusFailed, fmt.Errorf("%d action(s) failed: %w", len(failed), errors.Join(failed...))
	}
	return status, nil
}

// notListed is the skip of a scope left unlisted because GitHub rate-limited
// an earlier one in this sweep. GitHub's primary limit is per credential
// across every REST endpoint, and its secondary limits are counted per
// credential too; a client that keeps sending while limited risks being
// blocked for longer. So the later scopes are not asked at all, and the skip
// is a rate limit with the same until.
func notListed(scope fleet.Scope, limit *fleet.RateLimitError) reconcile.ScopeList {
	err := &fleet.RateLimitError{Until: limit.Until, Secondary: limit.Secondary,
		Err: errors.New("not listed: GitHub rate-limited an earlier request of this sweep")}
	return reconcile.ScopeList{Scope: scope, Problem: err.Error(), Skip: fleet.SkipRateLimited, Until: limit.Until}
}

// settleMarks records what acting taught the ledger and reports how many
// marks it cleared and how many it stamped with a job check: the marks of candidates that are finished with are
// dropped (see clearActed), and a mark whose job could not be asked about
// records when, so that the next sweep's bounded checks go to the others
// first (reap's jobCheckTurns).
func settleMarks(marks map[string]fleet.Mark, outs []reap.Outcome, now time.Time, acted bool) (cleared, asked int) {
	if acted {
		cleared = clearActed(marks, outs)
	}
	for _, o := range outs {
		if m, ok := marks[o.Candidate.Key]; ok && o.Result == fleet.JobUnchecked {
			m.JobCheckedAt = now
			marks[o.Candidate.Key] = m
			asked++
		}
	}
	return cleared, asked
}

// clearActed drops the marks of candidates that are finished with: deleted,
// gone already, or spared because GitHub said busy or said the job it is
// known to hold is still queued or running (the protocol clears that
// mark: its verdict must be earned again, from the start).
func clearActed(marks map[string]fleet.Mark, outs []reap.Outcome) int {
	n := 0
	for _, o := range outs {
		switch o.Result {
		case fleet.Deleted, fleet.AlreadyGone, fleet.SparedBusy, fleet.SkippedRegistered, fleet.ProtectedJob:
			if _, ok := marks[o.Candidate.Key]; ok {
				delete(marks, o.Candidate.Key)
				n++
			}
		}
	}
	return n
}

// warnSkew says so when the local clock and the API server's disagree by
// more than a Date can be trusted to: ages are measured on the API server's
// clock either way, but a skewed node is worth fixing.
func (s *Sweeper) warnSkew(ctx context.Context) {
	if s.Skew == nil {
		return
	}
	off, ok := s.Skew()
	if !ok {
		// The API server has answered (the pod list), with no Date a
		// proxy left: the two clocks of a confirmation are then one.
		s.Log.LogAttrs(ctx, slog.LevelWarn, "no clock from the API server",
			slog.String("effect", "its answers carry no Date: ages and confirmations are measured on this machine's clock alone, so a clock running ahead here would confirm marks early"))
		return
	}
	if off <= refclock.Tolerance && off >= -refclock.Tolerance {
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelWarn, "clock skew",
		slog.Float64("api_server_ahead_seconds", off.Seconds()),
		slog.String("effect", "ages and marks are measured on the API server's clock (its Date header), not this machine's"))
}

// warnFuture says which marks were dated after now, on either clock, as a
// sweep on a machine whose clock ran ahead leaves them, or had no first
// sighting: each was counted from now instead, so that the skew neither
// confirms it early nor holds it for the length of the skew.
func (s *Sweeper) warnFuture(ctx context.Context, marks []reconcile.FutureMark) {
	var ahead time.Duration
	var keys []string
	for _, m := range marks {
		// Within the reference clock's own precision, a mark a little
		// ahead is not news (two nodes whose clocks agree that well).
		if m.Ahead > refclock.Tolerance || m.FirstSeen.IsZero() {
			ahead = max(ahead, m.Ahead)
			keys = append(keys, m.Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelWarn, "marks from the future",
		slog.Int("marks", len(keys)), slog.Float64("max_ahead_seconds", ahead.Seconds()),
		slog.Any("keys", keys),
		slog.String("effect", "each is counted from now: a skewed clock wrote them; confirmation starts again from this sweep"))
}

// warnFutureStarts names the runners whose node's clock runs ahead of the
// API server's by more than a Date can be trusted to.
func (s *Sweeper) warnFutureStarts(ctx context.Context, starts []reconcile.FutureStart) {
	var pods []string
	var ahead time.Duration
	for _, f := range starts {
		if f.Ahead > refclock.Tolerance {
			pods = append(pods, f.Namespace+"/"+f.Pod)
			ahead = max(ahead, f.Ahead)
		}
	}
	if len(pods) == 0 {
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelWarn, "runner started in the future",
		slog.Any("pods", pods), slog.Float64("max_ahead_seconds", ahead.Seconds()),
		slog.String("effect", "their nodes' clocks run ahead of the API server's; each registration deadline counts from the pod's creation instead"))
}

func counts(c Counter) httpcount.Counts {
	if c == nil {
		return httpcount.Counts{}
	}
	return c.Counts()
}

// budget decides, before each scope's list, whether the sweep can still
// afford it. GitHub asks that one credential's requests be serial, so the
// lists take time in proportion to the scopes, and a fleet of many scopes
// can outgrow one sweep. Two limits, both simple to predict:
//   - at most max scopes a sweep (0: no cap), the operator's choice, sized
//     to keep a sweep's requests under GitHub's secondary limit;
//   - no new list once the time left before the deadline is less than room
//     plus the longest list so far in this sweep, so that the actions keep
//     their time.
//
// The first scope is always listed, so every sweep moves the rotation on.
type budget struct {
	max     int
	room    time.Duration
	listed  int
	longest time.Duration
}

// full says why no further scope fits, or "" when one does.
func (b *budget) full(ctx context.Context) string {
	if b.listed == 0 {
		return ""
	}
	if b.max > 0 && b.listed >= b.max {
		return fmt.Sprintf("the cap of %d scope(s) a sweep (REAPER_MAX_SCOPES_PER_SWEEP) is reached", b.max)
	}
	if deadline, ok := ctx.Deadline(); ok && b.room > 0 {
		if left := time.Until(deadline); left < b.room+b.longest {
			return fmt.Sprintf("%s left before the sweep's deadline, under the %s kept for acting plus the %s the longest list took",
				left.Round(time.Millisecond), b.room, b.longest.Round(time.Millisecond))
		}
	}
	return ""
}

// spent counts one list that was sent.
func (b *budget) spent(took time.Duration) {
	b.listed++
	b.longest = max(b.longest, took)
}

// rotation orders the configured scopes for this sweep's lists: from the
// scope the last sweep did not reach, round to the one before it, so that
// the scopes a budget leaves are the first of the next sweep and every scope
// is listed within ceil(scopes / scopes per sweep) sweeps. A position that
// names no configured scope (the configuration changed) starts at the first.
func rotation(scopes []fleet.Scope, next string) []fleet.Scope {
	for i, s := range scopes {
		if s.Key() == next {
			return append(scopes[i:len(scopes):len(scopes)], scopes[:i]...)
		}
	}
	return scopes
}

// lastTrim is what the ledger's last successful save left out, for a ledger
// that says; the zero Trim for one that cannot leave anything out.
func (s *Sweeper) lastTrim() state.Trim {
	if tr, ok := s.Ledger.(trimReporter); ok {
		return tr.LastTrim()
	}
	return state.Trim{}
}

// skipStreaks counts each configured scope's skips in a row: a skipped
// scope's count grows, a scope listed whole drops out, and a deferred one
// keeps its count, as it was not asked. A scope no longer configured drops
// out, so its old streak cannot fire an alert for ever.
func skipStreaks(prev map[string]int, scopes []fleet.Scope, skipped []reconcile.Skip) map[string]int {
	kinds := make(map[string]fleet.SkipKind, len(skipped))
	for _, sk := range skipped {
		kinds[sk.ScopeKey] = sk.Kind
	}
	var out map[string]int
	for _, sc := range scopes {
		key := sc.Key()
		kind, ok := kinds[key]
		n := 0
		switch {
		case !ok:
		case kind == fleet.SkipDeferred:
			n = prev[key]
		default:
			n = prev[key] + 1
		}
		if n > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[key] = n
		}
	}
	return out
}

// boundStreak counts the sweeps in a row in which the action bound left a
// ready candidate for later; a job check that waits for its turn is not
// the bound.
func boundStreak(prev int, outcomes []reap.Outcome) int {
	for _, o := range outcomes {
		if o.Result == fleet.Deferred && o.Bounded {
			return prev + 1
		}
	}
	return 0
}
