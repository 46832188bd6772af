// Package lambdafn is the sweep as an AWS Lambda: a cold start builds
// everything once through app.Open (configuration, the GitHub secret,
// cluster access, clients), and each scheduled invocation runs one sweep
// within the invocation's deadline, reported as log lines, EMF metrics and
// the summary as the response.
package lambdafn

import (
	"context"
	"fmt"
	"io"

	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// ErrConfig marks a start-up failure caused by the configuration: the
// bootstrap exits 2 on it.
var ErrConfig = app.ErrConfig

// Handler runs one sweep per invocation. Everything it holds was built at
// the cold start and is reused while the process stays warm: the clients,
// the GitHub token or key, the EKS token source, and the mode.
type Handler struct {
	rt *app.Runtime
}

// New builds the Handler on a cold start, through app.Start as the CLI
// does. out receives the JSON log lines (and EMF lines), which Lambda
// forwards to CloudWatch. Its error is ready to print, redacted and
// escaped, like everything else the function says.
func New(ctx context.Context, out io.Writer) (*Handler, error) {
	rt, err := app.Start(ctx, app.Entry{Mode: sweep.Act, Stdout: out, Stderr: out})
	if err != nil {
		return nil, err
	}
	return &Handler{rt: rt}, nil
}

// Handle runs one sweep and answers with its summary. A sweep that could
// not observe or act is an error, so that the invocation counts as failed
// in Lambda's own metrics; a degraded one (a scope skipped, an action not
// reached before the deadline) is not: its summary says status 3.
func (h *Handler) Handle(ctx context.Context) (map[string]any, error) {
	return answer(h.rt.Sweep(ctx), h.rt.Secrets)
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
