// Package lambdafn is the sweep as an AWS Lambda: what a cold start builds
// once (configuration, the GitHub secret, cluster access, clients) and what
// each scheduled invocation does (one sweep within the invocation's
// deadline, reported as log lines, EMF metrics, and the summary as the
// response).
package lambdafn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/reconcile/reap"
	"github.com/runner-reaper/runner-reaper/reconcile/sweep"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/secret"
)

// Spare is the time before the invocation's deadline (or the sweep's own,
// REAPER_SWEEP_TIMEOUT, when that is sooner) after which a sweep starts no
// new action: enough for a delete under way to finish and for the report to
// be written before Lambda stops the process.
const Spare = reap.DefaultSpare

// ErrConfig marks a start-up failure caused by the configuration.
var ErrConfig = errors.New("bad configuration")

// Handler runs one sweep per invocation. Everything it holds was built at
// the cold start and is reused while the process stays warm: the clients,
// the GitHub token or key, the EKS token source.
type Handler struct {
	sweeper *sweep.Sweeper
	secrets *redact.Set
	// mode is decided once, at the cold start, where the CLI decides it.
	mode    sweep.Mode
	log     *slog.Logger
	metrics string
	out     io.Writer
	now     func() time.Time
}

// New builds the Handler on a cold start. out receives the JSON log lines
// (and EMF lines), which Lambda forwards to CloudWatch. Its error passes
// through the process's redactor, like everything else the function says.
func New(ctx context.Context, out io.Writer) (*Handler, error) {
	secrets := redact.New()
	h, err := newHandler(ctx, out, secrets)
	return h, secrets.Error(err)
}

func newHandler(ctx context.Context, out io.Writer, secrets *redact.Set) (*Handler, error) {
	cfg, err := config.Load(false, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	app.LearnSecrets(secrets, cfg.GitHub)
	log := slog.New(secrets.Handler(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: cfg.LogLevel})))
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws configuration: %w", err)
	}
	if cfg.GitHub.SecretARN != "" {
		value, err := secret.Get(ctx, awsCfg, cfg.GitHub.SecretARN)
		if err != nil {
			return nil, fmt.Errorf("read github credentials: %w", err)
		}
		if err := cfg.GitHub.SetSecret(value); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		app.LearnSecrets(secrets, cfg.GitHub)
	}
	restCfg, err := clusterConfig(ctx, cfg, awsCfg)
	if err != nil {
		return nil, err
	}
	s, err := app.Build(cfg, restCfg, log, app.Options{AWS: &awsCfg, Spare: Spare, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	return &Handler{sweeper: s, secrets: secrets, mode: app.Mode(cfg, sweep.Act), log: log, metrics: cfg.MetricsNamespace, out: out, now: time.Now}, nil
}

// clusterConfig reaches EKS from outside when a cluster is named, else
// in-cluster or a kubeconfig as the CLI does.
func clusterConfig(ctx context.Context, cfg config.Config, awsCfg aws.Config) (*rest.Config, error) {
	if cfg.EKSCluster != "" {
		return kube.EKSRESTConfig(ctx, awsCfg, cfg.EKSCluster)
	}
	return kube.RESTConfig()
}

// Handle runs one sweep and answers with its summary. A sweep that could
// not observe or act is an error, so that the invocation counts as failed
// in Lambda's own metrics; a degraded one (a scope skipped, an action not
// reached before the deadline) is not: its summary says status 3.
func (h *Handler) Handle(ctx context.Context) (map[string]any, error) {
	res := app.Sweep(ctx, h.sweeper, h.mode, h.log)
	if h.metrics != "" {
		if err := metrics.WriteEMF(h.out, res, h.metrics, h.now()); err != nil {
			h.log.Warn("write metrics", slog.String("error", err.Error()))
		}
	}
	// The answer is text leaving the process too: redacted, in shape.
	summary, _ := h.secrets.Value(report.Summary(res)).(map[string]any)
	if res.Status == sweep.Failed {
		return summary, h.secrets.Error(fmt.Errorf("sweep could not observe or act: %w", res.Err))
	}
	return summary, nil
}
