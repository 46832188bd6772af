package serve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/runner-reaper/runner-reaper/kube"
)

// renewalsCut fails the Lease writes that would renew id's hold while
// cut is set (an API server that does not answer them in time), and lets
// every other request through: the Gets, and the release (an empty
// holderIdentity), as when the API server answers again by the time
// client-go gives the term up.
type renewalsCut struct {
	base http.RoundTripper
	id   atomic.Value
	cut  atomic.Bool
}

func (r *renewalsCut) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.cut.Load() && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil, err
		}
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == r.id.Load() {
			return nil, &net.OpError{Op: "write", Net: "tcp", Err: context.DeadlineExceeded}
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	return r.base.RoundTrip(req)
}

// heldSweep is a sweep whose action in flight outlives its context's end
// until the test lets it finish, as reap's detached action does (up to
// ActionTimeout per step, then the ledger's save).
type heldSweep struct {
	began    chan context.Context
	hold     chan struct{}
	returned chan struct{}
}

func (h *heldSweep) Sweep(ctx context.Context) {
	h.began <- ctx
	<-ctx.Done()
	<-h.hold
	close(h.returned)
}

// A leader whose renewals fail loses its term while its sweep is still
// finishing its action in flight. It does not release the Lease then
// (client-go's ReleaseOnCancel would, under the sweep): the standby takes
// it over only once it has expired, and its term says so (not Clean), so
// that its first sweep waits out the last leader's wind-down.
func TestLostTermIsNotReleasedAndItsTakeoverWaits(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "lease")
	leases := env.Client.CoordinationV1().Leases(ns)

	kc, err := kube.New(env.Config, kube.Options{})
	require.NoError(t, err)
	lc, hc, err := kc.ForLeases(env.Config)
	require.NoError(t, err)
	cut := &renewalsCut{base: hc.Transport}
	log := slog.New(slog.DiscardHandler)
	el, err := NewLeaseElector(LeaseOptions{Namespace: ns, Name: leaseName, Identity: "a", Duration: 3 * time.Second,
		Config: lc, HTTP: &http.Client{Transport: cut}, Log: log})
	require.NoError(t, err)
	cut.id.Store(el.Identity())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w := &fakeWatch{}
	w.set(kube.WatchState{Resource: "pods", Live: true})
	sw := &heldSweep{began: make(chan context.Context, 1), hold: make(chan struct{}), returned: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Parts{Watch: w, Elector: el, Listener: ln, Figures: &Figures{}, Log: log,
			Loop: &Loop{Sweeper: sw, Stores: w, Interval: time.Hour, SyncPoll: time.Hour, Log: log}})
	}()
	defer func() {
		stop()
		select {
		case <-sw.hold:
		default:
			close(sw.hold)
		}
		assert.NoError(t, <-ran)
	}()

	var sweepA context.Context
	select {
	case sweepA = <-sw.began:
	case <-time.After(30 * time.Second):
		t.Fatal("a never swept")
	}
	lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, el.Identity(), *lease.Spec.HolderIdentity)
	watcher, err := leases.Watch(context.Background(), metav1.ListOptions{ResourceVersion: lease.ResourceVersion})
	require.NoError(t, err)
	defer watcher.Stop()

	b := campaign(t, env, ns, "b")
	cut.cut.Store(true)

	select {
	case <-sweepA.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a's sweep was never told its term ended")
	}
	assert.ErrorIs(t, context.Cause(sweepA), ErrLostLease)

	// The Lease's history while a's sweep is still in flight.
	var holders []string
	for len(holders) == 0 || holders[len(holders)-1] != b.id {
		select {
		case ev := <-watcher.ResultChan():
			l, ok := ev.Object.(*coordinationv1.Lease)
			require.True(t, ok, "%v", ev)
			h := ""
			if l.Spec.HolderIdentity != nil {
				h = *l.Spec.HolderIdentity
			}
			if len(holders) == 0 || holders[len(holders)-1] != h {
				holders = append(holders, h)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("b never took the Lease; holders: %v", holders)
		}
	}
	termB := b.term(t, 30*time.Second)

	select {
	case <-sw.returned:
		t.Fatal("the test holds a's sweep; it cannot have returned")
	default:
	}
	assert.NotContains(t, holders, "", "a released the Lease while its sweep was still in flight; holders: %v", holders)
	assert.False(t, termB.Clean, "b took over an unreleased Lease: its first sweep must wait out a's wind-down")
}

// Two processes given one REAPER_IDENTITY are two holders (a random
// suffix each): one leads, the other stands by behind it. client-go takes
// a Lease whose holder is its own identity as its own, so one identity
// for both would make both lead.
func TestOneIdentityPrefixIsTwoHolders(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "lease")

	first := campaign(t, env, ns, "runner-reaper-0")
	termFirst := first.term(t, 30*time.Second)
	second := campaign(t, env, ns, "runner-reaper-0")
	assert.NotEqual(t, first.id, second.id)
	assert.True(t, strings.HasPrefix(second.id, "runner-reaper-0_"), second.id)
	require.Eventually(t, func() bool { return strings.Contains(second.log.String(), `"leader":"`+first.id+`"`) },
		30*time.Second, 50*time.Millisecond, "the second stands by behind the first")
	assert.NoError(t, termFirst.Err(), "the first still leads")
	assert.Empty(t, second.terms, "the second does not lead")
}
