package app

import (
	"context"
	"os"

	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/internal/memlimit"
	"github.com/runner-reaper/runner-reaper/kube"
)

// Served is what the long-running mode (`runner-reaper serve`) runs on:
// the Runtime every sweep goes through, whose pods and EphemeralRunners
// come from the watch's stores, and what the leader election and the
// HTTP endpoints need. The election, the endpoints and the loop live in
// package serve, which this package must not import: the Lambda links
// this one, and must not link client-go's leader election.
type Served struct {
	*Runtime
	// Watch keeps the stores the sweeps read; its Run is the caller's.
	Watch *kube.Watch
	// Serve is the long-running mode's settings, Identity decided.
	Serve config.Serve
	// Kube is the cluster's client the sweeps use, and REST the config
	// it was made from, for the Lease's client (kube.Client.ForLeases).
	Kube *kube.Client
	REST *rest.Config
}

// StartServe is Start for the long-running mode: the configuration as
// config.LoadServe reads it, the collector at memlimit.ServeGCPercent
// unless GOGC is set (the soft limit from the cgroup as for a sweep), and
// the Sweeper's pods and EphemeralRunners read from a watch of the same
// namespaces, selector and mapping as a sweep's lists. The namespace
// check stays a sweep's own (UnobservedNamespaces). e.Began should be
// zero: each sweep's REAPER_SWEEP_TIMEOUT counts from its own start.
func StartServe(ctx context.Context, e Entry) (*Served, error) {
	o, err := start(ctx, e, config.LoadServe, memlimit.ServeGCPercent)
	if err != nil {
		return nil, err
	}
	cfg := o.cfg
	w := o.kube.Watch(kube.WatchOptions{Namespaces: cfg.Namespaces, Selector: cfg.PodSelector, Mapping: mapping(cfg), ARC: cfg.Policy.ARC})
	s := o.rt.Sweeper
	s.Pods = watchedPods{w}
	s.EphemeralRunners = watchedEphemeralRunners{w}
	// The first sweep counts from the Client's start: the watches' first
	// lists are its cost as much as any sweep's.
	o.rt.kubeSince = &countsSince{counter: o.kube}
	serve := cfg.Serve
	if serve.Identity == "" {
		serve.Identity = hostname()
	}
	return &Served{Runtime: o.rt, Watch: w, Serve: serve, Kube: o.kube, REST: o.restCfg}, nil
}

// hostname is the default prefix of the Lease's holder identity: in a
// pod, its name. The elector adds a random suffix to any prefix.
func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "runner-reaper"
	}
	return host
}

// watchedPods is the watch's store as the Sweeper's pod list: a store that
// cannot vouch for the whole fleet answers kube.ErrIncomplete, and the
// sweep fails at observation as it does on a list cut short: no verdict,
// nothing deleted, nothing saved.
type watchedPods struct{ w *kube.Watch }

func (p watchedPods) ListPods(ctx context.Context) ([]fleet.Pod, error) { return p.w.ListPods(ctx) }

// watchedEphemeralRunners is the watch's EphemeralRunner store, likewise.
type watchedEphemeralRunners struct{ w *kube.Watch }

func (e watchedEphemeralRunners) ListEphemeralRunners(ctx context.Context, _ []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	return e.w.ListEphemeralRunners(ctx)
}

// countsSince hands out a counter's counts since it last did: each sweep's
// figure in the long-running mode is what the Client read since the last
// sweep's summary, so that the figures of the sweeps add up to all that
// the process read. Sweeps run one at a time.
type countsSince struct {
	counter interface{ Counts() httpcount.Counts }
	last    httpcount.Counts
}

func (c *countsSince) next() httpcount.Counts {
	now := c.counter.Counts()
	d := now.Sub(c.last)
	c.last = now
	return d
}
