package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kelseyhightower/envconfig"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

// LedgerKind is where the marks are kept.
type LedgerKind string

const (
	LedgerConfigMap LedgerKind = "configmap"
	LedgerFile      LedgerKind = "file"
	LedgerMemory    LedgerKind = "memory"
	LedgerDynamoDB  LedgerKind = "dynamodb"
)

// Ledger locates the ledger.
type Ledger struct {
	Kind      LedgerKind
	Namespace string
	Name      string
	Path      string
	// Table is the DynamoDB table of a dynamodb ledger.
	Table string
}

// GitHub is how to reach GitHub. Token and PrivateKey are secrets: they are
// never formatted into a message. With SecretARN set, the one that the auth
// kind needs (the token, or the App's key when AppID is set) is read from
// AWS Secrets Manager at start-up instead.
type GitHub struct {
	SecretARN      string
	APIURL         string
	Token          string
	AppID          int64
	InstallationID int64
	PrivateKey     []byte
	Timeout        time.Duration
}

// Config is the validated configuration.
type Config struct {
	Scopes          []fleet.Scope
	Namespaces      []string // empty: all namespaces
	PodSelector     string
	RunnerContainer string
	RunnerName      NameSource
	ScopeLabel      string
	StampLabel      string
	// JobAnnotation is the annotation a pool's dispatcher writes the
	// runner's job into (REAPER_JOB_FROM); "" when not configured.
	JobAnnotation string
	// ReadRunnerLog reads a running runner's log before acting on it when
	// no job is recorded for it (REAPER_READ_RUNNER_LOG).
	ReadRunnerLog bool

	Policy reconcile.Policy
	Hold   reconcile.Hold
	Limits reconcile.Limits

	// RemoveFinalizers lets the reaper clear the finalizers of an
	// EphemeralRunner stuck deleting.
	RemoveFinalizers bool
	DryRun           bool
	Ledger           Ledger
	// HistorySize is how many records of actions done the ledger keeps
	// (REAPER_HISTORY_SIZE); zero records none.
	HistorySize int
	// Loops is when a group's actions are a reap loop
	// (REAPER_LOOP_THRESHOLD, REAPER_LOOP_WINDOW).
	Loops                loops.Policy
	DeleteServiceAccount bool
	KubeConcurrency      int
	// KubeTimeout bounds each Kubernetes request: an API server that
	// accepts a connection and never answers must not hold a sweep.
	KubeTimeout time.Duration
	// SweepTimeout bounds the whole sweep; past it less reap.DefaultSpare
	// no action starts.
	SweepTimeout time.Duration
	// MaxScopesPerSweep caps the scopes one sweep lists; the rest wait for
	// the next sweeps of the rotation. Zero lists every scope that fits
	// the sweep's deadline.
	MaxScopesPerSweep int
	LogLevel          slog.Level
	// EKSCluster, when set, reaches the cluster from outside through
	// eks:DescribeCluster and an IAM token.
	EKSCluster string
	// MetricsNamespace, when set, adds CloudWatch EMF lines to the log.
	MetricsNamespace string
	// Push is where each sweep's metrics are pushed, when anywhere.
	Push   Push
	GitHub GitHub
	// Serve is the long-running mode's settings: checked in form by Load,
	// whole by LoadServe.
	Serve Serve
}

// Push is where a sweep's metrics go at its end, besides the log.
type Push struct {
	// PushgatewayURL is the Pushgateway's base URL; "" pushes nothing
	// there.
	PushgatewayURL string
	// Instance is the grouping key's instance: REAPER_METRICS_INSTANCE, or
	// else the ledger's name, which two shards never have in common (they
	// would fight over it), so their pushes never replace each other's.
	Instance string
	// OTLP is where the OTLP/HTTP export goes, read from the OpenTelemetry
	// SDK's own variables; nil when neither OTEL_EXPORTER_OTLP_ENDPOINT
	// nor OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set.
	OTLP *OTLP
	// HeaderValues are the values of OTEL_EXPORTER_OTLP_HEADERS and
	// OTEL_EXPORTER_OTLP_METRICS_HEADERS: secrets (an Authorization), so
	// that no line ever shows them. Never formatted into a message.
	HeaderValues []string
}

// Problem is one bad variable.
type Problem struct {
	Var     string
	What    string
	Example string
}

func (p Problem) String() string {
	if p.Example == "" {
		return fmt.Sprintf("%s: %s", p.Var, p.What)
	}
	return fmt.Sprintf("%s: %s (example: %s=%s)", p.Var, p.What, p.Var, p.Example)
}

// Error lists every bad variable at once, so a user fixes them in one go.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	lines = append(lines, "invalid configuration:")
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// Load reads and validates the configuration from the process environment.
// inCluster and podNamespace choose the default ledger.
func Load(inCluster bool, podNamespace string) (Config, error) {
	return load(inCluster, podNamespace, nil)
}

// load is Load, with more rules checked after the common ones: a mode's
// own (the long-running mode's), which may also fill in what it
// defaults. Every problem, common or the mode's, is reported at once.
func load(inCluster bool, podNamespace string, more func(s spec, c *Config) []Problem) (Config, error) {
	var s spec
	problems, err := readEnv(&s)
	if err != nil {
		return Config{}, err
	}
	c, found := validate(s, inCluster, podNamespace)
	problems = append(problems, found...)
	if more != nil {
		problems = append(problems, more(s, &c)...)
	}
	if len(problems) > 0 {
		return Config{}, &Error{Problems: problems}
	}
	return c, nil
}

// decimal is how a whole number is written in a variable.
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// nonDecimal finds the first whole-number variable not written in plain
// decimal. envconfig reads integers in Go's base 0, where 0123456 is octal
// 42798 and 0x1E240 and 123_456 are numbers too: an App id copied from a
// Secret that ARC reads in decimal would silently name another App.
func nonDecimal(into any) (Problem, bool) {
	t := reflect.TypeOf(into).Elem()
	for i := range t.NumField() {
		f := t.Field(i)
		if k := f.Type.Kind(); (k != reflect.Int && k != reflect.Int64) || f.Type == reflect.TypeOf(time.Duration(0)) {
			continue
		}
		name := key(f.Name)
		v, set := os.LookupEnv(name)
		if !set || decimal.MatchString(v) {
			continue
		}
		return Problem{Var: name, What: fmt.Sprintf("cannot read %q as a whole number written in decimal, without a leading zero", v),
			Example: f.Tag.Get("example")}, true
	}
	return Problem{}, false
}

// readEnv reads the REAPER_ variables into into, a spec or a part of one,
// and says which variable is no variable runner-reaper reads at all (a
// typo), whatever into holds. A value that cannot be parsed is an *Error
// of its own, with the typo if there is one: the rest cannot be checked.
func readEnv(into any) ([]Problem, error) {
	var problems []Problem
	if err := envconfig.CheckDisallowed(Prefix, &spec{}); err != nil {
		name := strings.TrimPrefix(err.Error(), "unknown environment variable ")
		p := Problem{Var: name, What: "is not a variable runner-reaper reads; every variable is in docs/configuration.md"}
		if field, ok := nearest(name); ok {
			p.What = "is not a variable runner-reaper reads; did you mean " + key(field) + "? (example: " + key(field) + "=" + example(field) + ")"
		}
		problems = append(problems, p)
	}
	if p, ok := nonDecimal(into); ok {
		return nil, &Error{Problems: append(problems, p)}
	}
	if err := envconfig.Process(Prefix, into); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{Problems: append(problems, Problem{
				Var:     pe.KeyName,
				What:    fmt.Sprintf("cannot read %q as %s", pe.Value, typeWord(pe.TypeName)),
				Example: example(pe.FieldName),
			})}
		}
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return problems, nil
}

func typeWord(t string) string {
	switch t {
	case "Duration", "time.Duration":
		return "a duration"
	case "int", "int64":
		return "a whole number"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	default:
		return t
	}
}

func example(field string) string {
	f, ok := reflect.TypeOf(spec{}).FieldByName(field)
	if !ok {
		return ""
	}
	return f.Tag.Get("example")
}

// nearest finds the spec field whose variable a typo most likely meant:
// the same letters without underscores, or at most three edits away.
func nearest(name string) (string, bool) {
	squash := func(s string) string { return strings.ReplaceAll(s, "_", "") }
	t := reflect.TypeOf(spec{})
	best, bestDist := "", 4
	for i := range t.NumField() {
		f := t.Field(i).Name
		if squash(key(f)) == squash(name) {
			return f, true
		}
		if d := editDistance(key(f), name); d < bestDist {
			best, bestDist = f, d
		}
	}
	return best, best != ""
}

// editDistance is Levenshtein's distance, for typo suggestions only.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// key is a field's variable name, so messages and the spec cannot drift.
func key(field string) string {
	var b strings.Builder
	for i, r := range field {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return Prefix + "_" + strings.ToUpper(b.String())
}

func validate(s spec, inCluster bool, podNamespace string) (Config, []Problem) {
	var ps []Problem
	bad := func(field, what string) {
		ps = append(ps, Problem{Var: key(field), What: what, Example: example(field)})
	}
	// Each concern checks its own variables, in the spec's order, so that
	// the same environment always gives the same message.
	c := fromSpec(s)
	c.Scopes = validateScopes(s.Scopes, bad)
	c.Namespaces = validateNamespaces(s.Namespaces, bad)
	validateSelection(s, bad)
	c.RunnerName = parseNameSource(s.RunnerNameFrom, bad)
	c.JobAnnotation = parseJobFrom(s.JobFrom, bad)
	validateDurations(s, bad)
	validateBounds(s, bad)
	c.LogLevel = validateLogLevel(s.LogLevel, bad)
	validateAWS(s, bad)
	validateARC(s, bad)
	c.Ledger = parseLedger(s.Ledger, inCluster, podNamespace, bad)
	c.GitHub = validateGitHub(s, c.Scopes, bad)
	c.Push = validatePush(s, c.Ledger, bad, func(name, what, ex string) {
		ps = append(ps, Problem{Var: name, What: what, Example: ex})
	})
	c.Serve = validateServe(s, bad)
	return c, ps
}

// fromSpec carries the settings that need no parsing over as they are.
func fromSpec(s spec) Config {
	return Config{
		PodSelector:          s.PodSelector,
		RunnerContainer:      s.RunnerContainer,
		ReadRunnerLog:        s.ReadRunnerLog,
		ScopeLabel:           s.ScopeLabel,
		StampLabel:           s.OwnerStampLabel,
		DryRun:               s.DryRun,
		RemoveFinalizers:     s.ArcRemoveFinalizers,
		DeleteServiceAccount: s.DeleteServiceAccount,
		KubeConcurrency:      s.KubeConcurrency,
		KubeTimeout:          s.KubeTimeout,
		SweepTimeout:         s.SweepTimeout,
		MaxScopesPerSweep:    s.MaxScopesPerSweep,
		HistorySize:          s.HistorySize,
		Loops:                loops.Policy{Threshold: s.LoopThreshold, Window: s.LoopWindow},
		EKSCluster:           s.EksCluster,
		MetricsNamespace:     s.MetricsNamespace,
		Limits:               reconcile.Limits{MaxActions: s.MaxActions, MaxFraction: s.MaxFraction},
		Hold: reconcile.Hold{
			ConfirmAfter:          s.ConfirmAfter,
			StampMaxAge:           s.StampMaxAge,
			MassSuspicionFraction: s.MassSuspicionFraction,
			MassSuspicionMin:      s.MassSuspicionMin,
			ARCFailedAfter:        s.ArcFailedAfter,
			ARCPodlessAfter:       s.ArcPodlessAfter,
		},
		Policy: reconcile.Policy{
			RegistrationDeadline:  s.RegistrationDeadline,
			StartDeadline:         s.StartDeadline,
			DeleteUnschedulable:   s.DeleteUnschedulable,
			StampEnabled:          s.OwnerStampLabel != "",
			GhostNamePrefix:       s.GhostNamePrefix,
			GhostLabel:            s.GhostLabel,
			ARC:                   s.ArcLeaks,
			ARCStuckDeletingAfter: s.ArcStuckDeletingAfter,
		},
	}
}

// validateScopes parses the GitHub scopes, each once.
func validateScopes(raw []string, bad func(field, what string)) []fleet.Scope {
	var scopes []fleet.Scope
	seen := map[string]bool{}
	for _, r := range raw {
		sc, err := fleet.ParseScope(r)
		if err != nil {
			bad("Scopes", err.Error())
			continue
		}
		if seen[sc.Key()] {
			bad("Scopes", fmt.Sprintf("scope %s is listed twice", sc))
			continue
		}
		seen[sc.Key()] = true
		scopes = append(scopes, sc)
	}
	if len(raw) == 0 {
		bad("Scopes", "is required: the GitHub scopes whose runners this deployment manages")
	}
	return scopes
}

// validateNamespaces checks the namespaces of the runner pods; * alone is
// every namespace, which is nil.
func validateNamespaces(names []string, bad func(field, what string)) []string {
	switch {
	case len(names) == 0:
		bad("Namespaces", "is required: the namespaces of the runner pods, comma-separated, or * for all")
	case len(names) == 1 && names[0] == "*":
	default:
		for _, ns := range names {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				bad("Namespaces", fmt.Sprintf("%q is not a namespace name (lower-case letters, digits and '-'; or * alone for all)", ns))
			}
		}
		return names
	}
	return nil
}

// validateSelection checks what says which pods are runners and which
// registrations are this deployment's.
func validateSelection(s spec, bad func(field, what string)) {
	if strings.TrimSpace(s.PodSelector) == "" {
		bad("PodSelector", "must not be empty: without a selector every pod in the namespaces would be judged")
	} else if sel, err := labels.Parse(s.PodSelector); err != nil {
		bad("PodSelector", fmt.Sprintf("is not a label selector: %v", err))
	} else if !positive(sel) {
		bad("PodSelector", fmt.Sprintf("%q has no positive requirement (key, key=value or key in (...)): a selector of only exclusions (!key, key!=value, key notin (...)) matches nearly every pod in the namespaces", s.PodSelector))
	}
	if errs := validation.IsDNS1123Label(s.RunnerContainer); len(errs) > 0 {
		bad("RunnerContainer", fmt.Sprintf("%q is not a container name", s.RunnerContainer))
	}
	// Problems are found in the spec's order, never a map's, so that the
	// same environment always gives the same message.
	for _, f := range []struct{ field, v string }{{"ScopeLabel", s.ScopeLabel}, {"OwnerStampLabel", s.OwnerStampLabel}} {
		if f.v == "" {
			continue
		}
		if errs := validation.IsQualifiedName(f.v); len(errs) > 0 {
			bad(f.field, fmt.Sprintf("%q is not a label key: %s", f.v, strings.Join(errs, "; ")))
		}
	}
	for _, f := range []struct{ field, v string }{{"GhostNamePrefix", s.GhostNamePrefix}, {"GhostLabel", s.GhostLabel}} {
		if i := notPrintable(f.v); i >= 0 {
			bad(f.field, fmt.Sprintf("has a control character or non-ASCII byte at position %d", i+1))
		}
	}
	// A ghost rule says which registrations are this deployment's: one
	// that every runner matches would hand it other teams' runners.
	if n := len(s.GhostNamePrefix); n > 0 && n < minGhostPrefix {
		bad("GhostNamePrefix", fmt.Sprintf("is %d character(s); at least %d, so that it names this deployment's runners and not everyone's", n, minGhostPrefix))
	}
	if githubDefaultLabel(s.GhostLabel) {
		bad("GhostLabel", fmt.Sprintf("%q is a label GitHub gives every self-hosted runner; choose one only this deployment's runners carry", s.GhostLabel))
	}
}

// validateDurations checks every duration and its bounds.
func validateDurations(s spec, bad func(field, what string)) {
	for _, f := range []struct {
		field string
		d     time.Duration
	}{
		{"StampMaxAge", s.StampMaxAge},
		{"ArcFailedAfter", s.ArcFailedAfter}, {"ArcPodlessAfter", s.ArcPodlessAfter}, {"ArcStuckDeletingAfter", s.ArcStuckDeletingAfter},
		{"RegistrationDeadline", s.RegistrationDeadline}, {"StartDeadline", s.StartDeadline}, {"ConfirmAfter", s.ConfirmAfter},
		{"GithubTimeout", s.GithubTimeout},
		{"KubeTimeout", s.KubeTimeout}, {"SweepTimeout", s.SweepTimeout},
	} {
		if f.d <= 0 {
			bad(f.field, fmt.Sprintf("must be a positive duration, got %s", f.d))
		}
	}
	// One request that may wait longer than this would hold a sweep past
	// any schedule it runs on.
	if s.GithubTimeout > maxGitHubTimeout {
		bad("GithubTimeout", fmt.Sprintf("must be at most %s, got %s", maxGitHubTimeout, s.GithubTimeout))
	}
	if s.KubeTimeout > maxKubeTimeout {
		bad("KubeTimeout", fmt.Sprintf("must be at most %s, got %s", maxKubeTimeout, s.KubeTimeout))
	}
	// The last reap.DefaultSpare of a sweep starts no action, so a sweep
	// no longer than that could never act; one longer than an hour would
	// hold any schedule it runs on.
	if s.SweepTimeout > 0 && s.SweepTimeout <= reap.DefaultSpare {
		bad("SweepTimeout", fmt.Sprintf("must be above %s, the time before the deadline in which no action starts, got %s", reap.DefaultSpare, s.SweepTimeout))
	}
	if s.SweepTimeout > maxSweepTimeout {
		bad("SweepTimeout", fmt.Sprintf("must be at most %s, got %s", maxSweepTimeout, s.SweepTimeout))
	}
}

// validateBounds checks the counts and fractions that bound a sweep.
func validateBounds(s spec, bad func(field, what string)) {
	if s.MaxActions < 1 {
		bad("MaxActions", fmt.Sprintf("must be at least 1, got %d", s.MaxActions))
	}
	if s.MaxScopesPerSweep < 0 || s.MaxScopesPerSweep > maxScopesPerSweep {
		bad("MaxScopesPerSweep", fmt.Sprintf("must be between 0 (every scope that fits the deadline) and %d, got %d", maxScopesPerSweep, s.MaxScopesPerSweep))
	}
	// Written so that NaN fails too: every comparison with NaN is false,
	// and a NaN bound would defer every action, or turn the alarm off.
	for _, f := range []struct {
		field string
		v     float64
	}{{"MaxFraction", s.MaxFraction}, {"MassSuspicionFraction", s.MassSuspicionFraction}} {
		if !(f.v > 0 && f.v <= 1) {
			bad(f.field, fmt.Sprintf("must be a number above 0 and at most 1, got %g", f.v))
		}
	}
	if s.MassSuspicionMin < 1 {
		bad("MassSuspicionMin", fmt.Sprintf("must be at least 1, got %d", s.MassSuspicionMin))
	}
	if s.KubeConcurrency < 1 || s.KubeConcurrency > 64 {
		bad("KubeConcurrency", fmt.Sprintf("must be between 1 and 64, got %d", s.KubeConcurrency))
	}
	if s.HistorySize < 0 || s.HistorySize > state.MaxHistory {
		bad("HistorySize", fmt.Sprintf("must be between 0 (no record of actions) and %d, got %d", state.MaxHistory, s.HistorySize))
	}
	if s.LoopThreshold < loops.MinThreshold || s.LoopThreshold > loops.MaxThreshold {
		bad("LoopThreshold", fmt.Sprintf("must be between %d and %d actions, got %d", loops.MinThreshold, loops.MaxThreshold, s.LoopThreshold))
	}
	if s.LoopWindow < minLoopWindow || s.LoopWindow > loops.MaxWindow {
		bad("LoopWindow", fmt.Sprintf("must be between %s and %s, got %s", minLoopWindow, loops.MaxWindow, s.LoopWindow))
	}
}

// minLoopWindow: a window shorter than a CronJob's minute holds one
// sweep's actions at most.
const minLoopWindow = time.Minute

// validateLogLevel reads the level that filters diagnostics.
func validateLogLevel(v string, bad func(field, what string)) slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(v)); err != nil {
		bad("LogLevel", fmt.Sprintf("%q is not a log level", v))
	}
	return level
}

// validateAWS checks the AWS names: the EKS cluster and the metrics
// namespace.
func validateAWS(s spec, bad func(field, what string)) {
	if s.EksCluster != "" && !eksClusterName.MatchString(s.EksCluster) {
		bad("EksCluster", fmt.Sprintf("%q is not an EKS cluster name (1 to 100 letters, digits, '-' and '_', starting with a letter or digit)", s.EksCluster))
	}
	if s.MetricsNamespace != "" && !metricsNamespace.MatchString(s.MetricsNamespace) {
		bad("MetricsNamespace", fmt.Sprintf("%q is not a CloudWatch namespace (1 to 255 of letters, digits and . - _ / # :, not starting with AWS/)", s.MetricsNamespace))
	} else if strings.HasPrefix(strings.ToUpper(s.MetricsNamespace), "AWS/") {
		bad("MetricsNamespace", fmt.Sprintf("%q starts with AWS/, which CloudWatch keeps for AWS's own metrics", s.MetricsNamespace))
	}
}

// validateARC checks the ARC settings against the selector they depend on.
func validateARC(s spec, bad func(field, what string)) {
	// An EphemeralRunner is podless only if no observed pod is its own, so
	// the selector must see every scale-set pod; one that sees fewer would
	// make healthy EphemeralRunners look podless.
	if sel, err := labels.Parse(s.PodSelector); err == nil && s.ArcLeaks &&
		!sel.Matches(labels.Set{"actions-ephemeral-runner": "True"}) {
		bad("ArcLeaks", fmt.Sprintf("needs REAPER_POD_SELECTOR to select every scale-set pod (a pod labelled only actions-ephemeral-runner=True); %q does not, and would make healthy EphemeralRunners look podless", s.PodSelector))
	}
	if s.ArcRemoveFinalizers && !s.ArcLeaks {
		bad("ArcRemoveFinalizers", "needs REAPER_ARC_LEAKS=true: finalizers are only removed from EphemeralRunners the reaper watches")
	}
}

// positive reports whether the selector requires some label to be present:
// only such a requirement says what a runner pod is, rather than what it is
// not.
func positive(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Exists, selection.Equals, selection.DoubleEquals, selection.In:
			return true
		}
	}
	return false
}

func parseNameSource(v string, bad func(field, what string)) NameSource {
	src, err := ParseNameSource(v)
	if err != nil {
		bad("RunnerNameFrom", err.Error())
		return src
	}
	if src.From != NameFromPod {
		if errs := validation.IsQualifiedName(src.Key); len(errs) > 0 {
			bad("RunnerNameFrom", fmt.Sprintf("%q is not a label or annotation key: %s", src.Key, strings.Join(errs, "; ")))
		}
	}
	return src
}

// parseJobFrom reads REAPER_JOB_FROM, "annotation:KEY". A label cannot
// hold a job reference (its value allows no '/'), so "label:" is refused
// rather than read as a source that never says anything.
func parseJobFrom(v string, bad func(field, what string)) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	kind, key, ok := strings.Cut(v, ":")
	key = strings.TrimSpace(key)
	switch {
	case !ok || key == "":
		bad("JobFrom", fmt.Sprintf("%q is not annotation:KEY", v))
	case kind == "label":
		bad("JobFrom", fmt.Sprintf("%q: a label's value cannot hold OWNER/REPO/RUN_ID (no '/' is allowed in it); use an annotation", v))
	case kind != "annotation":
		bad("JobFrom", fmt.Sprintf("%q has unknown kind %q (want annotation)", v, kind))
	default:
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			bad("JobFrom", fmt.Sprintf("%q is not an annotation key: %s", key, strings.Join(errs, "; ")))
			return ""
		}
		return key
	}
	return ""
}

func parseLedger(v string, inCluster bool, podNamespace string, bad func(field, what string)) Ledger {
	if v == "" {
		if inCluster && podNamespace != "" {
			return Ledger{Kind: LedgerConfigMap, Namespace: podNamespace, Name: "runner-reaper-ledger"}
		}
		return Ledger{Kind: LedgerFile, Path: "runner-reaper-ledger.json"}
	}
	kind, rest, _ := strings.Cut(v, ":")
	switch LedgerKind(kind) {
	case LedgerMemory:
		if rest != "" || strings.Contains(v, ":") {
			bad("Ledger", fmt.Sprintf("%q: memory takes no argument", v))
		}
		return Ledger{Kind: LedgerMemory}
	case LedgerDynamoDB:
		if len(rest) < 3 || len(rest) > 255 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "" {
			bad("Ledger", fmt.Sprintf("%q is not dynamodb:TABLE with a DynamoDB table name (3 to 255 of letters, digits, _ . -)", v))
		}
		return Ledger{Kind: LedgerDynamoDB, Table: rest}
	case LedgerFile:
		if rest == "" {
			bad("Ledger", "file: needs a path")
		} else if i := notPrintableUnicode(rest); i >= 0 {
			bad("Ledger", fmt.Sprintf("the file path has a control character at position %d", i+1))
		}
		return Ledger{Kind: LedgerFile, Path: rest}
	case LedgerConfigMap:
		ns, name, ok := strings.Cut(rest, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			bad("Ledger", fmt.Sprintf("%q is not configmap:NAMESPACE/NAME", v))
		}
		return Ledger{Kind: LedgerConfigMap, Namespace: ns, Name: name}
	default:
		bad("Ledger", fmt.Sprintf("%q is not configmap:NAMESPACE/NAME, dynamodb:TABLE, file:PATH or memory", v))
		return Ledger{}
	}
}

func validateGitHub(s spec, scopes []fleet.Scope, bad func(field, what string)) GitHub {
	g := GitHub{SecretARN: s.GithubSecretArn, APIURL: s.GithubApiUrl, Token: s.GithubToken, AppID: s.GithubAppId,
		InstallationID: s.GithubInstallationId, Timeout: s.GithubTimeout}
	if why := apiURLProblem(s.GithubApiUrl); why != "" {
		bad("GithubApiUrl", why)
	} else if !strings.HasSuffix(g.APIURL, "/") {
		g.APIURL += "/"
	}
	app := s.GithubAppId != 0 || s.GithubInstallationId != 0 || s.GithubPrivateKey != "" || s.GithubPrivateKeyFile != ""
	fromSecret := s.GithubSecretArn != ""
	if fromSecret && !secretARN.MatchString(s.GithubSecretArn) {
		bad("GithubSecretArn", "is not an ARN of a Secrets Manager secret (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME)")
	}
	switch {
	case fromSecret && (s.GithubToken != "" || s.GithubPrivateKey != "" || s.GithubPrivateKeyFile != ""):
		bad("GithubSecretArn", "is set together with a token or key in the environment; choose one source")
	case fromSecret && app:
		if s.GithubAppId <= 0 {
			bad("GithubAppId", "is required with GitHub App auth")
		}
		if s.GithubInstallationId <= 0 {
			bad("GithubInstallationId", "is required with GitHub App auth")
		}
		refuseEnterpriseApp(scopes, bad)
	case fromSecret:
		// The token comes from the secret at start-up (SetSecret).
	case s.GithubToken != "" && app:
		bad("GithubToken", "is set together with GitHub App settings; choose one way to authenticate")
	case s.GithubToken != "":
		if why := tokenProblem(s.GithubToken); why != "" {
			bad("GithubToken", why)
		}
	case app:
		if s.GithubAppId <= 0 {
			bad("GithubAppId", "is required with GitHub App auth")
		}
		if s.GithubInstallationId <= 0 {
			bad("GithubInstallationId", "is required with GitHub App auth")
		}
		g.PrivateKey = loadKey(s, bad)
		refuseEnterpriseApp(scopes, bad)
	default:
		bad("GithubToken", "no GitHub credentials: set REAPER_GITHUB_TOKEN, or REAPER_GITHUB_APP_ID, REAPER_GITHUB_INSTALLATION_ID and a private key")
	}
	return g
}

func refuseEnterpriseApp(scopes []fleet.Scope, bad func(field, what string)) {
	for _, sc := range scopes {
		if sc.Kind == fleet.EnterpriseScope {
			bad("Scopes", fmt.Sprintf("%s needs a classic token (REAPER_GITHUB_TOKEN): GitHub does not accept App installation tokens for enterprise runners", sc))
		}
	}
}

// SetSecret places the secret read from REAPER_GITHUB_SECRET_ARN: the App's
// private key when App auth is configured (checked as such), else the token.
// The message never contains the secret.
func (g *GitHub) SetSecret(secret string) error {
	secret = strings.TrimSpace(secret)
	if g.AppID == 0 {
		if secret == "" {
			return fmt.Errorf("the secret %s does not hold a token (it is empty)", g.SecretARN)
		}
		if why := tokenProblem(secret); why != "" {
			return fmt.Errorf("the secret %s does not hold a token: it %s", g.SecretARN, why)
		}
		g.Token = secret
		return nil
	}
	if err := checkKey([]byte(secret)); err != "" {
		return fmt.Errorf("the secret %s %s", g.SecretARN, err)
	}
	g.PrivateKey = []byte(secret)
	return nil
}

// loadKey reads and parses the App's private key so that a wrong key fails
// at start-up, not at the first sweep. The key itself never reaches a
// message.
func loadKey(s spec, bad func(field, what string)) []byte {
	field, pemBytes := "GithubPrivateKey", []byte(s.GithubPrivateKey)
	switch {
	case s.GithubPrivateKey != "" && s.GithubPrivateKeyFile != "":
		bad("GithubPrivateKey", "and REAPER_GITHUB_PRIVATE_KEY_FILE are both set; set one")
		return nil
	case s.GithubPrivateKeyFile != "":
		field = "GithubPrivateKeyFile"
		b, err := os.ReadFile(s.GithubPrivateKeyFile)
		if err != nil {
			bad(field, fmt.Sprintf("cannot be read: %v", err))
			return nil
		}
		pemBytes = b
	case s.GithubPrivateKey == "":
		bad("GithubPrivateKey", "is required with GitHub App auth (or REAPER_GITHUB_PRIVATE_KEY_FILE)")
		return nil
	}
	if msg := checkKey(pemBytes); msg != "" {
		bad(field, msg)
		return nil
	}
	return pemBytes
}

// checkKey says what is wrong with a PEM private key, or "".
func checkKey(pemBytes []byte) string {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return "holds no PEM block"
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		if _, err8 := x509.ParsePKCS8PrivateKey(block.Bytes); err8 != nil {
			return "holds a PEM block that is not an RSA private key"
		}
	}
	return ""
}

const (
	// maxGitHubTimeout bounds REAPER_GITHUB_TIMEOUT.
	maxGitHubTimeout = 5 * time.Minute
	// maxKubeTimeout bounds REAPER_KUBE_TIMEOUT.
	maxKubeTimeout = 5 * time.Minute
	// maxSweepTimeout bounds REAPER_SWEEP_TIMEOUT.
	maxSweepTimeout = time.Hour
	// maxScopesPerSweep bounds REAPER_MAX_SCOPES_PER_SWEEP: past it the cap
	// means nothing a sweep's deadline would let it reach.
	maxScopesPerSweep = 10000
)

// No pattern here counts a long repetition: a length is checked apart
// (bounded). regexp compiles {0,99} into a hundred copies of its class:
// three such patterns allocated 0.4 MB at every start and kept 178 KB of it
// live, in a heap the collector paces from what is live. Every class here
// is ASCII, so a length in bytes is the length in characters; a class
// that admits more than ASCII would need its length counted in runes.
var (
	// eksClusterName is EKS's own rule for a cluster name: at most 100.
	eksClusterName = bounded{1, 100, regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`)}
	// metricsNamespace is CloudWatch's rule for a metric namespace.
	metricsNamespace = bounded{1, 255, regexp.MustCompile(`^[0-9A-Za-z.\-_/#:]+$`)}
	// secretARN is a Secrets Manager secret's ARN in any partition.
	secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$`)
)

// bounded is a pattern whose matches are min to max bytes long.
type bounded struct {
	min, max int
	re       *regexp.Regexp
}

func (b bounded) MatchString(s string) bool {
	return len(s) >= b.min && len(s) <= b.max && b.re.MatchString(s)
}

// tokenProblem says what makes a token unusable, or "". A token is sent in
// a header: a control character or a space would fail every request at
// sweep time (or split the header), so it is refused at start-up. The
// message never quotes the token.
func tokenProblem(tok string) string {
	if i := strings.IndexAny(tok, " \t\r\n"); i >= 0 {
		return fmt.Sprintf("contains whitespace at position %d (a stray newline from a secret file?)", i+1)
	}
	if i := notPrintable(tok); i >= 0 {
		return fmt.Sprintf("contains a control character or non-ASCII byte at position %d", i+1)
	}
	return ""
}

// notPrintable is the index of the first byte that is not printable ASCII
// (space included), or -1.
func notPrintable(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return i
		}
	}
	return -1
}

// notPrintableUnicode is the byte index of the first control character, or
// -1; other Unicode is allowed (a file path may hold it).
func notPrintableUnicode(s string) int {
	for i, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return i
		}
	}
	return -1
}

// apiURLProblem says what is wrong with the GitHub API base, or "". The
// token is sent to this URL, so it must be https, except to this machine's
// own loopback, where a simulator or a local proxy may listen; it never
// carries credentials of its own, a query or a fragment. The message never
// quotes the URL, which may hold a password.
func apiURLProblem(raw string) string {
	if why := urlProblem(raw, "; set REAPER_GITHUB_TOKEN or the App settings instead"); why != "" {
		return why
	}
	if u, _ := url.Parse(raw); u.Scheme == "http" && !loopback(u.Hostname()) {
		return "is plain http to a host that is not loopback; the token would cross the network in clear: use https"
	}
	return ""
}

// urlProblem says what is wrong with an absolute http(s) URL the reaper
// sends to, or "": one with user:password@ (the credential would be logged
// with every failure; credsHint says where it belongs), a query or a
// fragment is refused. The message never quotes the URL.
func urlProblem(raw, credsHint string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "":
		return "is not an absolute http(s) URL"
	case u.User != nil:
		return "must not carry credentials (user:password@)" + credsHint
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "must not have a query or a fragment"
	}
	return ""
}

// instancePattern is what REAPER_METRICS_INSTANCE accepts: a name a
// person reads in an alert, and one Kubernetes would accept as a label
// value, so that a chart may derive it from a release name.
var instancePattern = bounded{1, 63, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)}

// validatePush checks where metrics are pushed. otel reports a problem in
// one of the OpenTelemetry SDK's variables, outside the REAPER_ prefix.
func validatePush(s spec, l Ledger, bad func(field, what string), otel func(name, what, example string)) Push {
	p := Push{PushgatewayURL: s.PushgatewayUrl, Instance: s.MetricsInstance}
	if s.PushgatewayUrl != "" {
		if why := pushURLProblem(s.PushgatewayUrl); why != "" {
			bad("PushgatewayUrl", why)
		}
	}
	switch {
	case s.MetricsInstance != "" && !instancePattern.MatchString(s.MetricsInstance):
		bad("MetricsInstance", "must be 1 to 63 of letters, digits, . _ -, starting with a letter or digit")
	case s.MetricsInstance == "":
		p.Instance = l.String()
	}
	p.OTLP, p.HeaderValues = readOTLP(os.Getenv, otel)
	return p
}

// pushURLProblem says what is wrong with a URL metrics are pushed to, or
// "". Plain http is allowed anywhere: a push carries no credential, and an
// in-cluster Pushgateway rarely has TLS.
func pushURLProblem(raw string) string { return urlProblem(raw, "") }

// loopback reports whether host is this machine's own loopback.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// minGhostPrefix is the shortest REAPER_GHOST_NAME_PREFIX accepted.
const minGhostPrefix = 3

// githubDefaultLabel reports whether GitHub gives label to self-hosted
// runners of its own accord: every runner of a scope carries some of them.
func githubDefaultLabel(label string) bool {
	switch strings.ToLower(label) {
	case "self-hosted", "linux", "windows", "macos", "x64", "arm", "arm64":
		return true
	}
	return false
}

// String is the ledger as REAPER_LEDGER names it.
func (l Ledger) String() string {
	switch l.Kind {
	case LedgerConfigMap:
		return string(l.Kind) + ":" + l.Namespace + "/" + l.Name
	case LedgerDynamoDB:
		return string(l.Kind) + ":" + l.Table
	case LedgerFile:
		return string(l.Kind) + ":" + l.Path
	default:
		return string(l.Kind)
	}
}
