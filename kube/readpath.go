package kube

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// syncPoll is how often readOnce looks whether the stores have synced:
// small beside a list of the fleet, which takes a second or more at
// thousands of runners.
const syncPoll = 20 * time.Millisecond

// listPodsThroughWatch is ListPods read through Watch once (see
// readThroughWatch).
func (c *Client) listPodsThroughWatch(ctx context.Context, namespaces []string, selector string, m Mapping) ([]fleet.Pod, error) {
	var pods []fleet.Pod
	w := c.Watch(WatchOptions{Namespaces: namespaces, Selector: selector, Mapping: m})
	err := readOnce(ctx, "pods", w, func() (err error) {
		pods, err = w.ListPods(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The store is garbage now, as the hand-written path's blocks are
	// after its list, and collected here as there (see ListPods), so
	// that the two differ in their reading alone.
	runtime.GC()
	return pods, nil
}

// listEphemeralRunnersThroughWatch is ListEphemeralRunners read through
// Watch once (see readThroughWatch).
func (c *Client) listEphemeralRunnersThroughWatch(ctx context.Context, namespaces []string) ([]fleet.EphemeralRunner, error) {
	var ers []fleet.EphemeralRunner
	w := c.Watch(WatchOptions{Namespaces: namespaces, ARC: true})
	// The EphemeralRunners alone: ListPods has read the pods.
	w.pods = nil
	err := readOnce(ctx, "ephemeralrunners", w, func() (err error) {
		ers, err = w.ListEphemeralRunners(ctx)
		return err
	})
	return ers, err
}

// readOnce runs w until every store has synced, calls take, and stops
// it: one complete read of the fleet, as a CronJob's sweep makes, through
// the long-running mode's machinery. A store that cannot sync (no right
// to watch, the API server gone) leaves it waiting until ctx ends, the
// sweep's deadline, and the error then says why each store was not live.
func readOnce(ctx context.Context, what string, w *Watch, take func() error) error {
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Run(runCtx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for !w.Synced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("list %s through the reflectors: %w (%s)", what, errors.Join(context.Cause(ctx), ErrIncomplete), notLive(w.State()))
		case <-tick.C:
		}
	}
	if err := take(); err != nil {
		return fmt.Errorf("list %s through the reflectors: %w", what, err)
	}
	return nil
}

// notLive says which stores were not live, and why.
func notLive(states []WatchState) string {
	var out []string
	for _, s := range states {
		if s.Live {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = "all namespaces"
		}
		out = append(out, fmt.Sprintf("%s in %s: %s", s.Resource, ns, s.Why))
	}
	if len(out) == 0 {
		return "every store live"
	}
	return strings.Join(out, "; ")
}
