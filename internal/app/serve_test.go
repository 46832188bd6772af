package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/memory"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// neverAsked fails the test if the sweep gets as far as GitHub's lists.
type neverAsked struct{ t *testing.T }

func (n neverAsked) ListRunners(context.Context, fleet.Scope, *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	n.t.Error("a sweep that could not observe the fleet asked GitHub for its runners")
	return nil, nil, errors.New("not asked")
}

// onePod is a pod list that can vouch for its one pod.
type onePod struct{}

func (onePod) ListPods(context.Context) ([]fleet.Pod, error) {
	return []fleet.Pod{{Namespace: "arc-runners", Name: "acme-1", UID: "u1"}}, nil
}

// A store that cannot vouch for the whole fleet (here: a watch not synced,
// whose lists the contract answers kube.ErrIncomplete) fails the sweep at
// observation, as a list cut short does: no verdict, nothing acted on,
// the ledger neither saved nor changed, GitHub not asked. Pods first; then
// the EphemeralRunners, under ARC, after a pod list that was whole.
func TestAnIncompleteStoreFailsTheSweepAtObservation(t *testing.T) {
	kc, err := kube.New(&rest.Config{Host: "http://127.0.0.1:1"}, kube.Options{})
	require.NoError(t, err)
	w := kc.Watch(kube.WatchOptions{Namespaces: []string{"arc-runners"}, Selector: "actions-ephemeral-runner=True", ARC: true})
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		pods sweep.PodLister
		says string
	}{
		{"the pods", watchedPods{w}, "observe pods: "},
		{"the EphemeralRunners", onePod{}, "observe ephemeralrunners: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ledger := memory.New()
			mark := fleet.Mark{Verdict: fleet.Zombie, FirstSeen: now.Add(-time.Hour), LastSeen: now.Add(-time.Minute)}
			saved, err := ledger.Save(context.Background(), state.Ledger{Marks: map[string]fleet.Mark{"pod/u1": mark}}, "")
			require.NoError(t, err)
			s := &sweep.Sweeper{
				Pods:             tc.pods,
				EphemeralRunners: watchedEphemeralRunners{w},
				Runners:          neverAsked{t},
				Ledger:           ledger,
				Reaper: func(sweep.Mode) *reap.Reaper {
					t.Error("a sweep that could not observe the fleet built the choke point")
					return nil
				},
				Scopes: []fleet.Scope{{Kind: fleet.OrgScope, Name: "acme"}},
				Policy: reconcile.Policy{ARC: true},
				Log:    slog.New(slog.DiscardHandler),
				Now:    func() time.Time { return now },
			}
			res := s.Run(context.Background(), sweep.Act)

			assert.Equal(t, sweep.StatusFailed, res.Status)
			require.Error(t, res.Err)
			assert.ErrorIs(t, res.Err, kube.ErrIncomplete)
			assert.Contains(t, res.Err.Error(), tc.says)
			assert.False(t, res.Looked, "nothing reads as a clean fleet")
			assert.Empty(t, res.Class.Findings, "no verdict")
			assert.Empty(t, res.Outcomes, "nothing acted on")
			l, v, err := ledger.Load(context.Background())
			require.NoError(t, err)
			assert.Equal(t, saved, v, "the ledger was not saved")
			assert.Equal(t, map[string]fleet.Mark{"pod/u1": mark}, l.Marks, "its marks are as they were")
		})
	}
}

// counter is a Client's counts, as a test sets them.
type counter struct{ c httpcount.Counts }

func (c *counter) Counts() httpcount.Counts { return c.c }

// Each sweep's Kubernetes figures in the long-running mode are what was
// read since the last sweep's summary, the watches' traffic between sweeps
// included, so that the sweeps' figures add up to the process's.
func TestCountsSinceTheLastSweep(t *testing.T) {
	c := &counter{}
	since := &countsSince{counter: c}
	for _, tc := range []struct {
		name  string
		total httpcount.Counts
		want  httpcount.Counts
	}{
		{"the first sweep counts from the start, the first lists included", httpcount.Counts{Requests: 5, Bytes: 90_000}, httpcount.Counts{Requests: 5, Bytes: 90_000}},
		{"the next counts from the last summary", httpcount.Counts{Requests: 12, Bytes: 91_500}, httpcount.Counts{Requests: 7, Bytes: 1_500}},
		{"a quiet one counts nothing", httpcount.Counts{Requests: 12, Bytes: 91_500}, httpcount.Counts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.c = tc.total
			assert.Equal(t, tc.want, since.next())
		})
	}
}

// The summary of a sweep in the long-running mode carries those figures:
// kube_requests and kube_bytes since the last summary, not the sweep's own.
func TestServeSummaryCountsSinceTheLastSweep(t *testing.T) {
	c := &counter{c: httpcount.Counts{Requests: 9, Bytes: 4096}}
	var out bytes.Buffer
	rt := &Runtime{
		Sweeper: &sweep.Sweeper{Pods: failingPods{}, Ledger: memory.New(), Log: slog.New(slog.DiscardHandler),
			Now: time.Now, Kube: &counter{}},
		Log:       Logger(&out, slog.LevelInfo, redact.New()),
		kubeSince: &countsSince{counter: c},
	}
	rt.Sweep(context.Background())
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var summary map[string]any
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &summary))
	require.Equal(t, "sweep", summary["msg"])
	assert.EqualValues(t, 9, summary["kube_requests"])
	assert.EqualValues(t, 4096, summary["kube_bytes"])
}

// failingPods is a pod list that fails.
type failingPods struct{}

func (failingPods) ListPods(context.Context) ([]fleet.Pod, error) {
	return nil, errors.New("the API server went away")
}
