// Package lambdafn is the sweep as an AWS Lambda: a cold start builds
// everything once through app.Open (configuration, the GitHub secret,
// cluster access, clients), and each scheduled invocation runs one sweep
// within the invocation's deadline, reported as log lines, EMF metrics and
// the summary as the response.
package lambdafn

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/reconcile/reap"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
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
	rt *app.Runtime
	// mode is decided once, at the cold start, where the CLI decides it.
	mode sweep.Mode
}

// New builds the Handler on a cold start. out receives the JSON log lines
// (and EMF lines), which Lambda forwards to CloudWatch. Its error passes
// through the process's redactor and is escaped, like everything else the
// function says: the bootstrap prints it as plain text.
func New(ctx context.Context, out io.Writer) (*Handler, error) {
	secrets := redact.New()
	h, err := newHandler(ctx, out, secrets)
	return h, report.PlainError(err, secrets)
}

func newHandler(ctx context.Context, out io.Writer, secrets *redact.Set) (*Handler, error) {
	cfg, err := config.Load(false, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	rt, err := app.Open(ctx, cfg, out, app.Options{Spare: Spare, Secrets: secrets})
	if errors.Is(err, app.ErrConfig) {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err != nil {
		return nil, err
	}
	return &Handler{rt: rt, mode: app.Mode(cfg, sweep.Act)}, nil
}

// Handle runs one sweep and answers with its summary. A sweep that could
// not observe or act is an error, so that the invocation counts as failed
// in Lambda's own metrics; a degraded one (a scope skipped, an action not
// reached before the deadline) is not: its summary says status 3.
func (h *Handler) Handle(ctx context.Context) (map[string]any, error) {
	return answer(h.rt.Sweep(ctx, h.mode), h.rt.Secrets)
}

// answer is the invocation's answer for res. It is text leaving the process
// too, read in the console or by whoever invoked the function, and it
// quotes GitHub's and Kubernetes' errors: redacted, then escaped (package
// safetext), in shape.
func answer(res sweep.Result, secrets *redact.Set) (map[string]any, error) {
	summary, _ := safetext.Value(secrets.Value(report.Summary(res))).(map[string]any)
	if res.Status == sweep.StatusFailed {
		return summary, report.PlainError(fmt.Errorf("sweep could not observe or act: %w", res.Err), secrets)
	}
	return summary, nil
}
