package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseOptions say which Lease to campaign for, as whom, and how to reach
// the API server.
type LeaseOptions struct {
	Namespace, Name string
	// Identity is this process's holderIdentity.
	Identity string
	// Duration is REAPER_LEASE_DURATION; the renew deadline is two
	// thirds of it and the retry period two fifteenths, client-go's own
	// defaults (15 s, 10 s, 2 s) in proportion.
	Duration time.Duration
	// Config and HTTP are what the coordination client is built from
	// (kube.Client.ForLeases): every request of the election goes through
	// the counted HTTP client of the sweeps.
	Config *rest.Config
	HTTP   *http.Client
	Log    *slog.Logger
}

// LeaseElector is client-go's leader election on a coordination.k8s.io
// Lease, with ReleaseOnCancel: a process that stops releases the Lease at
// once rather than leaving the others to wait for it to expire.
type LeaseElector struct {
	config leaderelection.LeaderElectionConfig
	log    *slog.Logger
}

// NewLeaseElector checks o as client-go's election would and returns the
// elector; nothing is sent before Campaign.
func NewLeaseElector(o LeaseOptions) (*LeaseElector, error) {
	client, err := coordinationv1.NewForConfigAndClient(o.Config, o.HTTP)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.Duration,
		RenewDeadline:   o.Duration * 2 / 3,
		RetryPeriod:     o.Duration * 2 / 15,
		ReleaseOnCancel: true,
		Name:            o.Namespace + "/" + o.Name,
	}
	// The election's own checks, once, with callbacks that do nothing,
	// so that a bad setting fails at start-up and not at Campaign.
	check := cfg
	check.Callbacks = leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}}
	if _, err := leaderelection.NewLeaderElector(check); err != nil {
		return nil, fmt.Errorf("leader election on lease %s/%s: %w", o.Namespace, o.Name, err)
	}
	return &LeaseElector{config: cfg, log: o.Log.With(slog.String("lease", o.Namespace+"/"+o.Name), slog.String("identity", o.Identity))}, nil
}

// Campaign campaigns until ctx ends, calling lead at the start of each
// term, and again after each loss. client-go ends a term when the leader
// could not renew within the renew deadline; at ctx's end it releases the
// Lease it holds (an empty holderIdentity) before Campaign returns.
func (e *LeaseElector) Campaign(ctx context.Context, lead func(term context.Context)) {
	for ctx.Err() == nil {
		cfg := e.config
		lock := &writes{Interface: cfg.Lock}
		cfg.Lock = lock
		cfg.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				e.log.Info("leading")
				lead(term)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != lock.Identity() {
					e.log.Info("standing by", slog.String("leader", id))
				}
			},
		}
		el, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			// NewLeaseElector made the same checks.
			e.log.Error("leader election", slog.String("error", err.Error()))
			return
		}
		el.Run(ctx)
		switch {
		case lock.released.Load():
			e.log.Info("lease released")
		case ctx.Err() != nil && lock.held.Load():
			e.log.Warn("lease not released",
				slog.String("effect", "the Lease could not be written; another replica takes it over once it has gone unrenewed for REAPER_LEASE_DURATION"))
		case ctx.Err() == nil:
			e.log.Warn("lost the lease",
				slog.String("effect", "the sweep in flight stops as on SIGTERM; this process stands by and campaigns again"))
		}
	}
}

// writes is the Lease lock, noting what its writes achieved: whether this
// process held the Lease in this round of the election, and whether it
// released it (client-go's release writes an empty holderIdentity).
type writes struct {
	resourcelock.Interface
	held, released atomic.Bool
}

func (w *writes) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Create(ctx, r)
	w.note(r, err)
	return err
}

func (w *writes) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Update(ctx, r)
	w.note(r, err)
	return err
}

func (w *writes) note(r resourcelock.LeaderElectionRecord, err error) {
	switch {
	case err != nil:
	case r.HolderIdentity == w.Identity():
		w.held.Store(true)
	case r.HolderIdentity == "" && w.held.Load():
		w.released.Store(true)
	}
}
