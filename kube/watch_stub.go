package kube

// TEMPORARY: the shared contract's kube.Watch API, so that the serve mode
// compiles while the real watch is written elsewhere. It never syncs:
// every list is ErrIncomplete. Dropped when the real kube/watch*.go land.

import (
	"context"
	"errors"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ErrIncomplete: a store that cannot vouch for the whole fleet right now.
var ErrIncomplete = errors.New("incomplete observation")

// DefaultStaleAfter is WatchOptions.StaleAfter's default.
const DefaultStaleAfter = 2 * time.Minute

// WatchOptions say what a Watch keeps.
type WatchOptions struct {
	Namespaces []string
	Selector   string
	Mapping    Mapping
	ARC        bool
	StaleAfter time.Duration
}

// Watch keeps the fleet's pods (and EphemeralRunners) in stores.
type Watch struct{ o WatchOptions }

// WatchState is one reflector's state.
type WatchState struct {
	Resource  string
	Namespace string
	Live      bool
	Why       string
	Objects   int
	Relists   int
	LastEvent time.Time
}

// Watch returns a Watch of o's objects.
func (c *Client) Watch(o WatchOptions) *Watch { return &Watch{o: o} }

// Run runs until ctx ends.
func (w *Watch) Run(ctx context.Context) { <-ctx.Done() }

// ListPods is ErrIncomplete: the stub never syncs.
func (w *Watch) ListPods(context.Context) ([]fleet.Pod, error) {
	return nil, ErrIncomplete
}

// ListEphemeralRunners is ErrIncomplete, or nil, nil when !ARC.
func (w *Watch) ListEphemeralRunners(context.Context) ([]fleet.EphemeralRunner, error) {
	if !w.o.ARC {
		return nil, nil
	}
	return nil, ErrIncomplete
}

// Synced is false: the stub never syncs.
func (w *Watch) Synced() bool { return false }

// State is one never-synced state per resource.
func (w *Watch) State() []WatchState {
	s := []WatchState{{Resource: "pods", Why: "not synced yet"}}
	if w.o.ARC {
		s = append(s, WatchState{Resource: "ephemeralrunners", Why: "not synced yet"})
	}
	return s
}
