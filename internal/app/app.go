// Package app is the one composition root: from a validated configuration
// it builds everything a sweep needs (the GitHub credential, the cluster,
// the clients, the ledger, metrics), the same way for every entry point, so
// that the CLI and the Lambda only wire and no setting is honoured by one
// and ignored by the other.
package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/ghclient"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/memlimit"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/kube/eks"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/metrics/otlp"
	"github.com/runner-reaper/runner-reaper/metrics/push"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/secret"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/state/dynamo"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/state/memory"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// ErrConfig marks a start-up failure that the configuration caused (a
// secret that holds no credential, no cluster to reach): the entry points
// exit 2 on it, as on any other bad setting.
var ErrConfig = errors.New("bad configuration")

// configCause marks a configuration error as ErrConfig without changing
// its text: the loader's own words, one problem a line, are what a person
// needs.
type configCause struct{ err error }

func (c configCause) Error() string   { return c.err.Error() }
func (c configCause) Unwrap() []error { return []error{ErrConfig, c.err} }

// ConfigProblem is a start-up failure that one variable caused but only
// its use could find (an address that cannot be listened on): it reads as
// the loader's problems do and exits 2 as they do.
func ConfigProblem(variable, what, example string) error {
	return configCause{&config.Error{Problems: []config.Problem{{Var: variable, What: what, Example: example}}}}
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// InCluster reports whether the process runs in a pod, and the pod's
// namespace, which is where the default ledger lives.
func InCluster() (bool, string) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return false, ""
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return true, ""
	}
	return true, strings.TrimSpace(string(b))
}

// Options are what an entry point adds to the configuration.
type Options struct {
	// AWS is the AWS configuration for a DynamoDB ledger; the SDK's
	// default chain is loaded when it is needed and nil.
	AWS *aws.Config
	// Secrets is the process's one redactor, which the entry point's
	// logger and answers use too. Build teaches it the configured GitHub
	// credentials and hands it to the GitHub client, which adds every
	// credential it sends, and to the Events; nil gets a Set of its own.
	Secrets *redact.Set
}

// LearnSecrets teaches s the configured GitHub credentials: the token and
// every line of the App's private key. An entry point calls it as soon as
// it holds them (the Lambda reads them from Secrets Manager); Build calls
// it again, which is harmless.
func LearnSecrets(s *redact.Set, g config.GitHub) {
	s.Add(g.Token)
	s.AddPEM(g.PrivateKey)
}

// Mode is the one place the sweep's mode is decided, for every entry
// point: REAPER_DRY_RUN=true turns a requested real sweep into a dry run,
// and nothing turns a dry run or an audit into anything that writes more.
// The summary, every action line and the metrics all read the mode this
// returns, so they cannot disagree about it.
func Mode(cfg config.Config, requested sweep.Mode) sweep.Mode {
	if requested == sweep.Act && cfg.DryRun {
		return sweep.DryRun
	}
	return requested
}

// Runtime is what an entry point holds between sweeps: everything Open
// built, reused by every sweep of the process.
type Runtime struct {
	Sweeper *sweep.Sweeper
	// Log is the process's logger; every line passes through Secrets.
	Log *slog.Logger
	// Secrets is the process's one redactor.
	Secrets *redact.Set
	// out receives the log lines and, with metricsNamespace set, the EMF
	// metric lines.
	out              io.Writer
	metricsNamespace string
	// push is where the sweep's metrics go at its end, besides the log.
	push config.Push
	// mode is decided once, by Start, for every sweep of the process.
	mode sweep.Mode
	// audit receives an audit's table, or its JSON when auditJSON.
	audit     io.Writer
	auditJSON bool
	// memory is the process's memory limit and the soft limit set below
	// it, decided once by Start; a sweep whose peak comes near the limit
	// says so (warnMemory).
	memory memlimit.Decision
	// timeout is REAPER_SWEEP_TIMEOUT, the bound on a sweep and the push
	// of its metrics together; began is Entry.Began, from which the
	// first sweep's bound counts, so that the process as a whole ends
	// within it (a CronJob's activeDeadlineSeconds is checked against it).
	timeout time.Duration
	began   time.Time
	// kubeSince, in the long-running mode, makes each sweep's Kubernetes
	// counts those since the last sweep's summary, the watches' and the
	// Lease's requests between sweeps included; nil counts the sweep's own.
	kubeSince *countsSince
	// warnedPeak, in the long-running mode, is the peak the last memory
	// warning named (warnMemory).
	warnedPeak int64
}

// Entry is what an entry point asks of the run: the mode it was asked for,
// where the process runs, and where its text goes.
type Entry struct {
	// Mode is the mode asked for (the command line's, or Act); the
	// configuration may turn it into a dry run (see Mode), never more.
	Mode sweep.Mode
	// InCluster and PodNamespace say whether the process runs in a pod
	// and in which namespace (InCluster), for the default ledger.
	InCluster    bool
	PodNamespace string
	// Stdout and Stderr are the process's. The JSON lines go to Stdout,
	// except in an audit, whose table (or JSON, when AuditJSON) goes to
	// Stdout and its lines to Stderr.
	Stdout, Stderr io.Writer
	AuditJSON      bool
	// AWS is the AWS configuration; nil loads the SDK's default chain
	// when a setting needs it.
	AWS *aws.Config
	// Began is when the process began, from which the first sweep's
	// REAPER_SWEEP_TIMEOUT counts, so that a one-sweep process ends within
	// it as a whole; zero counts each sweep's from its own start (a
	// Lambda, whose environment may be initialised long before its first
	// invocation).
	Began time.Time
}

// Start is the first half of the one story every entry point tells, done
// once per process: load the configuration, open everything it names, and
// decide the mode. Its error is ready to print (redacted, then escaped, one
// problem a line) and wraps ErrConfig when the configuration is the cause:
// the entry points exit 2 on it. The second half is Runtime.Sweep.
func Start(ctx context.Context, e Entry) (*Runtime, error) {
	o, err := start(ctx, e, config.Load, memlimit.GCPercent)
	if err != nil {
		return nil, err
	}
	return o.rt, nil
}

// started is what start opened: the Runtime, and for the long-running
// mode the configuration, the cluster's client and its config.
type started struct {
	rt      *Runtime
	cfg     config.Config
	kube    *kube.Client
	restCfg *rest.Config
}

// start is Start, with the configuration read by load and the collector's
// pace where GOGC is unset: a sweep's (memlimit.GCPercent), or the
// long-running mode's.
func start(ctx context.Context, e Entry, load func(inCluster bool, podNamespace string) (config.Config, error), gcPercent int) (started, error) {
	// Every line and message from here on passes through the one
	// redactor, and is escaped after it (package safetext).
	secrets := redact.New()
	cfg, err := load(e.InCluster, e.PodNamespace)
	if err != nil {
		return started{}, report.PlainError(configCause{err}, secrets)
	}
	// The soft memory limit is set before anything large is allocated, so
	// that the collector works to stay under the process's limit (the
	// cgroup's, or the Lambda's) instead of letting garbage grow the heap
	// to twice what is live and the kernel kill the sweep without a word.
	host := memlimit.System()
	memory, memErr := host.Setup(memlimit.CodeRoom)
	if errors.Is(memErr, memlimit.ErrLambdaMemory) {
		return started{}, report.PlainError(configCause{memErr}, secrets)
	}
	// And the collector's pace, before anything large is allocated too:
	// the peak of a sweep without a limit is set by it (memlimit.GCPercent).
	gc := host.ApplyGCAt(gcPercent)
	mode := Mode(cfg, e.Mode)
	out := e.Stdout
	if mode == sweep.Audit {
		out = e.Stderr
	}
	rt, kc, restCfg, err := open(ctx, cfg, out, Options{AWS: e.AWS, Secrets: secrets})
	if err != nil {
		return started{}, report.PlainError(err, secrets)
	}
	rt.mode, rt.audit, rt.auditJSON, rt.memory, rt.began = mode, e.Stdout, e.AuditJSON, memory, e.Began
	rt.Log.LogAttrs(ctx, slog.LevelDebug, "memory limit", append(memory.Attrs(), gc.Attrs()...)...)
	if memErr != nil {
		// A cgroup that cannot be read (an unusual mount, a permission)
		// costs the soft limit and the warning, not the sweep.
		rt.Log.LogAttrs(ctx, slog.LevelWarn, "memory limit unknown", slog.String("error", memErr.Error()),
			slog.String("effect", "no soft memory limit is set and no warning comes near the limit: a sweep that outgrows the limit is killed without a report; set GOMEMLIMIT to keep the collector under it"))
	}
	return started{rt: rt, cfg: cfg, kube: kc, restCfg: restCfg}, nil
}

// open builds the Runtime for cfg: the redactor and the logger (lines to
// out), the GitHub credential (read from Secrets Manager when
// REAPER_GITHUB_SECRET_ARN is set), the cluster (EKS from outside when
// REAPER_EKS_CLUSTER is set, else in-cluster inside a pod, else the
// kubeconfig), the clients, the ledger and the metrics. AWS's
// configuration is loaded only when a setting needs it. It returns too
// the cluster's client and its config, for the long-running mode's watch
// and Lease.
func open(ctx context.Context, cfg config.Config, out io.Writer, o Options) (*Runtime, *kube.Client, *rest.Config, error) {
	if o.Secrets == nil {
		o.Secrets = redact.New()
	}
	LearnSecrets(o.Secrets, cfg.GitHub)
	for _, v := range cfg.Push.HeaderValues {
		o.Secrets.AddAuthorization(v)
		o.Secrets.Add(v)
	}
	log := Logger(out, cfg.LogLevel, o.Secrets)
	awsConfig := func() (aws.Config, error) {
		if o.AWS != nil {
			return *o.AWS, nil
		}
		c, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return aws.Config{}, fmt.Errorf("aws configuration: %w", err)
		}
		o.AWS = &c
		return c, nil
	}
	if cfg.GitHub.SecretARN != "" {
		awsCfg, err := awsConfig()
		if err != nil {
			return nil, nil, nil, err
		}
		value, err := secret.Get(ctx, awsCfg, cfg.GitHub.SecretARN)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read github credentials: %w", err)
		}
		if err := cfg.GitHub.SetSecret(value); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		LearnSecrets(o.Secrets, cfg.GitHub)
	}
	var restCfg *rest.Config
	if cfg.EKSCluster != "" {
		awsCfg, err := awsConfig()
		if err != nil {
			return nil, nil, nil, err
		}
		if restCfg, err = eks.RESTConfig(ctx, awsCfg, cfg.EKSCluster); err != nil {
			return nil, nil, nil, err
		}
	} else {
		c, err := kube.RESTConfig()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: kubernetes: %w", ErrConfig, err)
		}
		restCfg = c
	}
	if cfg.Ledger.Kind == config.LedgerDynamoDB {
		if _, err := awsConfig(); err != nil {
			return nil, nil, nil, err
		}
	}
	// What Build refuses (a client it cannot make from these settings) is
	// the configuration's fault too.
	s, kc, err := Build(cfg, restCfg, log, o)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &Runtime{Sweeper: s, Log: log, Secrets: o.Secrets, out: out, metricsNamespace: cfg.MetricsNamespace, push: cfg.Push, timeout: cfg.SweepTimeout},
		kc, restCfg, nil
}

// Logger is the process's logger, writing JSON lines to out. level filters
// the diagnostics only: the action lines and the summary are the product's
// output and are written at every level (report.Diagnostics). Every record
// is redacted, then escaped (safetext), so that no secret and no control
// character from outside reaches a reader, whoever logs it; the redactor
// sees the text as it came, before escaping could split a secret.
func Logger(out io.Writer, level slog.Level, secrets *redact.Set) *slog.Logger {
	json := slog.NewJSONHandler(out, &slog.HandlerOptions{Level: min(level, slog.LevelInfo)})
	return slog.New(report.Diagnostics(level, secrets.Handler(safetext.Handler(json))))
}

// Sweep is the second half of the one story, once per sweep: it sweeps in
// the mode Start decided and reports everything there is to report, in one
// place: the warnings, the action lines and the summary, the EMF metric
// lines where configured, and an audit's table or JSON. An audit that could
// not be written fails the sweep.
func (r *Runtime) Sweep(ctx context.Context) sweep.Result {
	// The push is held to REAPER_SWEEP_TIMEOUT from the process's start
	// (pctx); the sweep to its own deadline, which keeps back what the
	// push needs, so that it ends as a sweep stopped by the timeout does,
	// with the push's room after it.
	pctx := ctx
	if r.timeout > 0 {
		begin := time.Now()
		if !r.began.IsZero() {
			begin, r.began = r.began, time.Time{}
		}
		end := begin.Add(r.timeout)
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
		r.Sweeper.Timeout = max(time.Until(end)-r.pushRoom(), time.Second)
	}
	res := r.Sweeper.Run(ctx, r.mode)
	if r.kubeSince != nil {
		res.Kube = r.kubeSince.next()
	}
	report.Log(ctx, r.Log, res)
	r.warnMemory(ctx, res)
	if r.metricsNamespace != "" {
		if err := metrics.WriteEMF(r.out, res, r.metricsNamespace, time.Now()); err != nil {
			r.Log.Warn("write metrics", slog.String("error", err.Error()))
		}
	}
	r.publish(pctx, res)
	if r.mode == sweep.Audit {
		if err := r.writeAudit(res); err != nil {
			r.Log.Error("write audit", slog.String("error", err.Error()))
			res.Status, res.Err = sweep.StatusFailed, err
		}
	}
	return res
}

// warnMemory says so when the process's peak resident set has passed 80%
// of its memory limit, with the fleet size that limit fits and the limit
// this fleet needs (memlimit.Default's formula): a fleet grows sweep by
// sweep, and past the limit the kernel kills the sweep before it can
// report anything. Without a known limit, or a peak that cannot be read,
// there is nothing to say.
//
// In the long-running mode the peak is the process's lifetime one: after
// a large first list every sweep would repeat the same warning, so it is
// given again only when the peak has grown since. The peak, not the
// current resident set, stays the measure: it is what a relist of the
// whole fleet needs again, and what the kernel kills on.
func (r *Runtime) warnMemory(ctx context.Context, res sweep.Result) {
	limit := r.memory.Limit
	if limit.Bytes <= 0 {
		return
	}
	peak, err := memlimit.PeakRSS()
	if err != nil {
		return
	}
	// A sweep that ended before it had observed everything (a list failed,
	// the deadline came) keeps no Observation: its fleet is unknown, not
	// empty.
	size := memlimit.Fleet{Pods: int64(res.Observed.Pods), Unobserved: res.Observation.Now.IsZero()}
	for _, l := range res.Observation.Lists {
		size.Registrations += int64(len(l.Runners))
	}
	if warn, fit := memlimit.Check(peak, limit.Bytes, size, memlimit.Default()); warn {
		if r.kubeSince != nil {
			if peak <= r.warnedPeak {
				return
			}
			r.warnedPeak = peak
		}
		r.Log.LogAttrs(ctx, slog.LevelWarn, memlimit.Message, memlimit.WarnAttrs(peak, limit, size, fit)...)
	}
}

// pushBudget bounds the pushes of the metrics, together: a Pushgateway on
// the cluster's network answers in milliseconds, and the push must end
// within REAPER_SWEEP_TIMEOUT with the sweep (pushRoom).
const pushBudget = 3 * time.Second

// pushReserve is kept back from the deadline (REAPER_SWEEP_TIMEOUT's, an
// invocation's), so that the process can still exit, and a Lambda answer.
const pushReserve = 500 * time.Millisecond

// minPush is the least time a push is started with: with less left before
// the deadline, it is dropped with a warning rather than cut short.
const minPush = 250 * time.Millisecond

// pushRoom is what a sweep keeps back from REAPER_SWEEP_TIMEOUT for the
// push of its metrics: the push's budget and reserve, and never more than a
// quarter of the timeout; nothing when the sweep pushes nothing.
func (r *Runtime) pushRoom() time.Duration {
	if r.mode == sweep.Audit || (r.push.PushgatewayURL == "" && r.push.OTLP == nil) {
		return 0
	}
	return min(pushBudget+pushReserve, r.timeout/4)
}

// publish pushes the sweep's metrics where configured, both sinks at once
// within one budget. It runs detached from ctx's cancellation (a sweep a
// signal stopped is the one most worth seeing) but not from its deadline.
// A push that fails is a warning and never the sweep's failure: the
// sweep's work is done, and the alert on the last success catches a push
// that keeps failing. An audit pushes nothing: a person running one with
// the CronJob's settings must not replace the CronJob's figures.
func (r *Runtime) publish(ctx context.Context, res sweep.Result) {
	if r.mode == sweep.Audit || (r.push.PushgatewayURL == "" && r.push.OTLP == nil) {
		return
	}
	end := time.Now().Add(pushBudget)
	if d, ok := ctx.Deadline(); ok && d.Add(-pushReserve).Before(end) {
		end = d.Add(-pushReserve)
	}
	if left := time.Until(end); left < minPush {
		r.Log.Warn("push metrics dropped", slog.Duration("left", max(left, 0)),
			slog.String("effect", "the sweep left too little of REAPER_SWEEP_TIMEOUT (or of the invocation) for the push; this sweep's metrics are not published, and the sweep itself is unaffected"))
		return
	}
	pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	var wg sync.WaitGroup
	if r.push.PushgatewayURL != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := push.New(r.push.PushgatewayURL, r.push.Instance, pushBudget).Push(pctx, res); err != nil {
				r.Log.Warn("push metrics", slog.String("to", "pushgateway"), slog.String("error", err.Error()),
					slog.String("effect", "this sweep's metrics are not in Prometheus; the sweep itself is unaffected"))
			}
		}()
	}
	if o := r.push.OTLP; o != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := otlp.Export(pctx, res, r.push.Instance, pushBudget,
				otlp.Target{URL: o.URL, Headers: o.Headers, Timeout: o.Timeout, Gzip: o.Gzip, Resource: o.Resource}); err != nil {
				r.Log.Warn("push metrics", slog.String("to", "otlp"), slog.String("error", err.Error()),
					slog.String("effect", "this sweep's metrics were not exported; the sweep itself is unaffected"))
			}
		}()
	}
	wg.Wait()
}

// writeAudit prints the audit. It quotes why a scope was skipped: it is
// redacted whole, so that no secret is split across writes; its fields were
// escaped before the table was laid out (report.WriteTable). A reader who
// closed the pipe early (audit | head) is not a failure.
func (r *Runtime) writeAudit(res sweep.Result) error {
	write := report.WriteTable
	if r.auditJSON {
		write = report.WriteJSON
	}
	var audit bytes.Buffer
	err := write(&audit, res)
	if err == nil {
		_, err = io.WriteString(r.audit, r.Secrets.String(audit.String()))
	}
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}

// Build returns a Sweeper for cfg, talking to the cluster of restCfg, and
// that cluster's client.
func Build(cfg config.Config, restCfg *rest.Config, log *slog.Logger, opts ...Options) (*sweep.Sweeper, *kube.Client, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Secrets == nil {
		o.Secrets = redact.New()
	}
	LearnSecrets(o.Secrets, cfg.GitHub)
	// A cluster reached from outside (EKS from a Lambda) gets its answers
	// compressed, and so its pods in pages (a watch is never compressed);
	// one in reach of a cluster network reads them as a watch-list.
	kc, err := kube.New(restCfg, kube.Options{Redact: o.Secrets.String, Timeout: cfg.KubeTimeout, Compress: cfg.EKSCluster != "", Log: log,
		GitHubHost: ghclient.WebHost(cfg.GitHub.APIURL)})
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	gh, err := ghclient.New(ghclient.Config{
		BaseURL:        cfg.GitHub.APIURL,
		Token:          cfg.GitHub.Token,
		AppID:          cfg.GitHub.AppID,
		InstallationID: cfg.GitHub.InstallationID,
		PrivateKey:     cfg.GitHub.PrivateKey,
		Timeout:        cfg.GitHub.Timeout,
		Secrets:        o.Secrets,
		OwnerLabel:     cfg.Policy.GhostLabel,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("github client: %w", err)
	}
	store, err := ledger(cfg.Ledger, kc, o.AWS, log)
	if err != nil {
		return nil, nil, err
	}
	scopes := make(map[string]fleet.Scope, len(cfg.Scopes))
	for _, s := range cfg.Scopes {
		scopes[s.Key()] = s
	}
	pods := podSource{client: kc, namespaces: cfg.Namespaces, selector: cfg.PodSelector, mapping: mapping(cfg)}
	var logs reap.RunnerLogs
	if cfg.ReadRunnerLog {
		logs = kc.RunnerLogs(cfg.RunnerContainer)
	}
	return &sweep.Sweeper{
		Pods:             pods,
		WebHost:          ghclient.WebHost(cfg.GitHub.APIURL),
		Namespaces:       pods,
		Runners:          gh,
		EphemeralRunners: ephemeralRunners{client: kc, namespaces: cfg.Namespaces},
		Ledger:           store,
		LedgerName:       ledgerName(cfg.Ledger),
		Reaper: func(mode sweep.Mode) *reap.Reaper {
			return reap.New(gh, kc, reap.Options{
				DryRun:               mode != sweep.Act,
				Limits:               cfg.Limits,
				DeleteServiceAccount: cfg.DeleteServiceAccount,
				Concurrency:          cfg.KubeConcurrency,
				Scopes:               scopes,
				RemoveFinalizers:     cfg.RemoveFinalizers,
				Jobs:                 gh,
				RunnerLogs:           logs,
				Spare:                reap.DefaultSpare,
				// An action begun with the spare time left ends
				// within it, so the report is still written.
				ActionTimeout: reap.DefaultSpare,
			})
		},
		Scopes:  cfg.Scopes,
		Policy:  cfg.Policy,
		Hold:    cfg.Hold,
		Log:     log,
		Now:     kc.Now,
		Local:   time.Now,
		Skew:    kc.ClockSkew,
		GitHub:  gh,
		Kube:    kc,
		Timeout: cfg.SweepTimeout,
		// A third of the deadline, and never less than twice the spare,
		// stays for classify, the ledger and the actions.
		MaxScopes:   cfg.MaxScopesPerSweep,
		ListRoom:    max(cfg.SweepTimeout/3, 2*reap.DefaultSpare),
		HistorySize: cfg.HistorySize,
		Version:     report.Version(),
		Redact:      o.Secrets.String,
		Loops:       cfg.Loops,
		Events:      kc,
	}, kc, nil
}

// mapping is how the configuration reads a pod, in kube's terms.
func mapping(cfg config.Config) kube.Mapping {
	return kube.Mapping{
		RunnerContainer: cfg.RunnerContainer,
		RunnerName:      kubeSource(cfg.RunnerName),
		ScopeLabel:      cfg.ScopeLabel,
		Scopes:          cfg.Scopes,
		StampLabel:      cfg.StampLabel,
		JobAnnotation:   cfg.JobAnnotation,
	}
}

// HistorySource reads the record of actions a ledger keeps, and nothing
// else: every backend offers it (LoadHistory), and none of them writes in
// it. Version "" means there is no ledger yet.
type HistorySource interface {
	LoadHistory(ctx context.Context) ([]state.Record, state.Version, error)
}

// OpenHistory opens the ledger a reads for its record of actions, as
// Build opens it for a sweep but with nothing else: no GitHub client, and
// a Kubernetes client only for a ConfigMap ledger, whose one request is a
// get of the ConfigMap. It returns the ledger's name as REAPER_LEDGER
// names it (a file's path made absolute). Its error wraps ErrConfig when
// the configuration is the cause (no cluster to reach).
func OpenHistory(ctx context.Context, a config.LedgerAccess, awsCfg *aws.Config) (HistorySource, string, error) {
	name := ledgerName(a.Ledger)
	switch a.Ledger.Kind {
	case config.LedgerConfigMap:
		var restCfg *rest.Config
		var err error
		if a.EKSCluster != "" {
			c, err := awsOrDefault(ctx, awsCfg)
			if err != nil {
				return nil, name, err
			}
			if restCfg, err = eks.RESTConfig(ctx, c, a.EKSCluster); err != nil {
				return nil, name, err
			}
		} else if restCfg, err = kube.RESTConfig(); err != nil {
			return nil, name, fmt.Errorf("%w: kubernetes: %w", ErrConfig, err)
		}
		kc, err := kube.New(restCfg, kube.Options{Timeout: a.KubeTimeout})
		if err != nil {
			return nil, name, fmt.Errorf("%w: kubernetes client: %w", ErrConfig, err)
		}
		return configmap.New(kc.ConfigMaps(a.Ledger.Namespace), a.Ledger.Namespace, a.Ledger.Name, nil), name, nil
	case config.LedgerDynamoDB:
		c, err := awsOrDefault(ctx, awsCfg)
		if err != nil {
			return nil, name, err
		}
		return dynamo.New(dynamodb.NewFromConfig(c), a.Ledger.Table, ledgerKey, nil), name, nil
	case config.LedgerFile:
		return file.New(a.Ledger.Path), name, nil
	case config.LedgerMemory:
		return memory.New(), name, nil
	default:
		return nil, name, fmt.Errorf("%w: ledger kind %q", ErrConfig, a.Ledger.Kind)
	}
}

// awsOrDefault is c, or the SDK's default chain when c is nil.
func awsOrDefault(ctx context.Context, c *aws.Config) (aws.Config, error) {
	if c != nil {
		return *c, nil
	}
	d, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws configuration: %w", err)
	}
	return d, nil
}

// ledgerName is the ledger as REAPER_LEDGER names it, a file's path made
// absolute, so that a sweep run by hand says where its marks are.
func ledgerName(l config.Ledger) string {
	if l.Kind == config.LedgerFile {
		if abs, err := filepath.Abs(l.Path); err == nil {
			l.Path = abs
		}
	}
	return l.String()
}

// ledgerKey is the DynamoDB item of the ledger: one per table.
const ledgerKey = "runner-reaper"

func ledger(l config.Ledger, kc *kube.Client, awsCfg *aws.Config, log *slog.Logger) (state.Store, error) {
	switch l.Kind {
	case config.LedgerDynamoDB:
		if awsCfg == nil {
			c, err := awsconfig.LoadDefaultConfig(context.Background())
			if err != nil {
				return nil, fmt.Errorf("aws configuration for the dynamodb ledger: %w", err)
			}
			awsCfg = &c
		}
		return dynamo.New(dynamodb.NewFromConfig(*awsCfg), l.Table, ledgerKey, log), nil
	case config.LedgerMemory:
		return memory.New(), nil
	case config.LedgerFile:
		return file.New(l.Path), nil
	case config.LedgerConfigMap:
		return configmap.New(kc.ConfigMaps(l.Namespace), l.Namespace, l.Name, log), nil
	default:
		return nil, fmt.Errorf("ledger kind %q", l.Kind)
	}
}

// podSource binds the configured namespaces, selector and mapping to the
// kube client's pod list.
type podSource struct {
	client     *kube.Client
	namespaces []string
	selector   string
	mapping    kube.Mapping
}

func (p podSource) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	return p.client.ListPods(ctx, p.namespaces, p.selector, p.mapping)
}

// UnobservedNamespaces checks the configured namespaces that pods, the
// result of ListPods, leaves empty.
func (p podSource) UnobservedNamespaces(ctx context.Context, pods []fleet.Pod) []fleet.UnobservedNamespace {
	return p.client.UnobservedNamespaces(ctx, p.namespaces, pods)
}

// ephemeralRunners binds the configured namespaces to the kube client's
// EphemeralRunner list.
type ephemeralRunners struct {
	client     *kube.Client
	namespaces []string
}

func (e ephemeralRunners) ListEphemeralRunners(ctx context.Context, pods []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	return e.client.ListEphemeralRunners(ctx, e.namespaces, pods)
}

// kubeSource is the configured runner name source in kube's terms.
func kubeSource(s config.NameSource) kube.Source {
	switch s.From {
	case config.NameFromLabel:
		return kube.Source{Kind: kube.Label, Key: s.Key}
	case config.NameFromAnnotation:
		return kube.Source{Kind: kube.Annotation, Key: s.Key}
	default:
		return kube.Source{Kind: kube.PodName}
	}
}
