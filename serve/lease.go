package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// releaseBudget bounds the release of the Lease at a stop: one read and
// one write. Past it the Lease is left to expire, which costs the others
// REAPER_LEASE_DURATION and nothing else.
const releaseBudget = 5 * time.Second

// LeaseOptions say which Lease to campaign for, as whom, and how to reach
// the API server.
type LeaseOptions struct {
	Namespace, Name string
	// Identity is the prefix of this process's holderIdentity
	// (REAPER_IDENTITY, or the host name); a random suffix is always
	// added, so that two processes given one prefix (a container
	// restarted in place, a copied manifest) are never the same holder:
	// client-go takes a Lease held under its own identity as its own.
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
// Lease, without client-go's ReleaseOnCancel: client-go releases whenever
// its renewals end, a lost term included, and without waiting for what
// its leader runs. This elector releases the Lease itself, only when its
// context ends (a stop, or a step-down), and only once lead has returned.
type LeaseElector struct {
	config   leaderelection.LeaderElectionConfig
	identity string
	log      *slog.Logger
}

// Identity is the prefix and a random suffix, as client-go's own
// controllers name themselves in a Lease.
func Identity(prefix string) (string, error) {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a random suffix for the Lease's holder identity: %w", err)
	}
	return prefix + "_" + hex.EncodeToString(b), nil
}

// NewLeaseElector checks o as client-go's election would and returns the
// elector; nothing is sent before Campaign.
func NewLeaseElector(o LeaseOptions) (*LeaseElector, error) {
	client, err := coordinationv1.NewForConfigAndClient(o.Config, o.HTTP)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	id, err := Identity(o.Identity)
	if err != nil {
		return nil, err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: o.Duration,
		RenewDeadline: o.Duration * 2 / 3,
		RetryPeriod:   o.Duration * 2 / 15,
		Name:          o.Namespace + "/" + o.Name,
	}
	// The election's own checks, once, with callbacks that do nothing,
	// so that a bad setting fails at start-up and not at Campaign.
	check := cfg
	check.Callbacks = leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}}
	if _, err := leaderelection.NewLeaderElector(check); err != nil {
		return nil, fmt.Errorf("leader election on lease %s/%s: %w", o.Namespace, o.Name, err)
	}
	return &LeaseElector{config: cfg, identity: id,
		log: o.Log.With(slog.String("lease", o.Namespace+"/"+o.Name), slog.String("identity", id))}, nil
}

// Identity is this process's holderIdentity, suffix included.
func (e *LeaseElector) Identity() string { return e.identity }

// Campaign campaigns until ctx ends, calling lead at the start of each
// term, and again after each loss. client-go ends a term when the leader
// could not renew within the renew deadline: a lost term is never
// released, since the Lease then expires only after the leader's last
// successful renewal plus the Lease's duration, the time the next leader
// waits anyway. At ctx's end, once lead has returned, Campaign releases
// the Lease it holds (an empty holderIdentity, as client-go's release
// writes) before it returns.
func (e *LeaseElector) Campaign(ctx context.Context, lead func(term Term)) {
	for ctx.Err() == nil {
		cfg := e.config
		lock := &writes{Interface: cfg.Lock}
		cfg.Lock = lock
		led := make(chan struct{})
		var started atomic.Bool
		cfg.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				defer close(led)
				started.Store(true)
				clean := lock.clean.Load()
				e.log.Info("leading", slog.Bool("released_before", clean))
				lead(Term{Context: term, Clean: clean})
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
		if started.Load() {
			// client-go does not wait for what its leader runs; this
			// does, so that nothing of the term acts after the release.
			<-led
		}
		switch {
		case ctx.Err() != nil && lock.held.Load():
			e.release(ctx, lock)
		case ctx.Err() == nil:
			e.log.Warn("lost the lease",
				slog.String("effect", "the sweep in flight stops as on SIGTERM; the Lease is not released, and this process stands by and campaigns again"))
		}
	}
}

// release writes an empty holder on the Lease if this process still holds
// it, within releaseBudget.
func (e *LeaseElector) release(ctx context.Context, lock *writes) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseBudget)
	defer cancel()
	rec, _, err := lock.Get(rctx)
	if err == nil && rec.HolderIdentity != lock.Identity() {
		e.log.Info("lease not ours to release", slog.String("holder", rec.HolderIdentity))
		return
	}
	if err == nil {
		now := metav1.NewTime(time.Now())
		err = lock.Interface.Update(rctx, resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions,
			LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
	}
	if err != nil {
		e.log.Warn("lease not released", slog.String("error", err.Error()),
			slog.String("effect", "another replica takes it over once it has gone unrenewed for REAPER_LEASE_DURATION"))
		return
	}
	e.log.Info("lease released")
}

// writes is the Lease lock, noting what its reads and writes saw: whether
// this process took the Lease in this round of the election, and whether
// it was free when taken (never held, or released: a holder only
// releases once its sweep has returned), as opposed to taken over once
// it expired, from a holder that may still be winding down.
type writes struct {
	resourcelock.Interface
	held, clean atomic.Bool
	// observed is the holder the last Get saw.
	observed atomic.Pointer[string]
}

func (w *writes) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := w.Interface.Get(ctx)
	if err == nil {
		h := rec.HolderIdentity
		w.observed.Store(&h)
	}
	return rec, raw, err
}

func (w *writes) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Create(ctx, r)
	if err == nil && !w.held.Load() {
		w.clean.Store(true)
		w.held.Store(true)
	}
	return err
}

func (w *writes) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == w.Identity() && !w.held.Load() {
		prev := w.observed.Load()
		w.clean.Store(prev != nil && *prev == "")
		w.held.Store(true)
	}
	return err
}
