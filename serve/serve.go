package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"k8s.io/klog/v2"

	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/report"
)

// syncPoll is how often a due sweep looks again at stores not synced yet.
const syncPoll = time.Second

// Serve is `runner-reaper serve`: it starts as app.StartServe starts
// (its error wraps app.ErrConfig when the configuration is the cause),
// then runs until ctx ends (Run) and returns nil after a clean stop.
// e.Began is ignored: each sweep's REAPER_SWEEP_TIMEOUT counts from its
// own start.
func Serve(ctx context.Context, e app.Entry) error {
	e.Began = time.Time{}
	s, err := app.StartServe(ctx, e)
	if err != nil {
		return err
	}
	// Whatever it says, the error is printed as every text the process
	// shows: redacted, then escaped.
	return report.PlainError(serve(ctx, s), s.Secrets)
}

// serve runs what StartServe opened.
func serve(ctx context.Context, s *app.Served) error {
	log := s.Log
	// client-go's own lines (the election's, the reflectors') as the
	// process's: JSON, redacted and escaped, not klog's text on stderr.
	klog.SetSlogLogger(log)
	ln, err := net.Listen("tcp", s.Serve.Listen)
	if err != nil {
		// The address is the operator's (a port another process holds,
		// a host name this pod does not have): a setting to change, and
		// nothing has been read or written yet.
		return app.ConfigProblem("REAPER_LISTEN", fmt.Sprintf("cannot listen on %q: %v", s.Serve.Listen, err), ":8080")
	}
	lc, hc, err := s.Kube.ForLeases(s.REST)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	elector, err := NewLeaseElector(LeaseOptions{Namespace: s.Serve.LeaseNamespace, Name: s.Serve.LeaseName, Identity: s.Serve.Identity,
		Duration: s.Serve.LeaseDuration, Config: lc, HTTP: hc, Log: log})
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	figs := &Figures{}
	log.Info("serving", slog.String("listen", ln.Addr().String()), slog.String("lease", s.Serve.LeaseNamespace+"/"+s.Serve.LeaseName),
		slog.String("identity", elector.Identity()), slog.Float64("interval_seconds", s.Serve.Interval.Seconds()),
		slog.Float64("lease_duration_seconds", s.Serve.LeaseDuration.Seconds()))
	return Run(ctx, Parts{
		Watch: s.Watch,
		Loop: &Loop{Sweeper: Recorded{Runtime: s.Runtime, Figures: figs}, Stores: s.Watch, Interval: s.Serve.Interval, SyncPoll: syncPoll,
			WindDown: windDown, OnTerm: figs.Reset, Log: log},
		Elector:  elector,
		Listener: ln,
		Figures:  figs,
		Redact:   s.Secrets.String,
		Log:      log,
	})
}
