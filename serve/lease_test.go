package serve

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the control plane this package's tests share, started by the
// first that needs it.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }

// lockedBuffer is a log both the test and the elector's goroutines use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// candidate is one LeaseElector campaigning on the test's Lease, over a
// counted kube.Client of its own.
type candidate struct {
	client *kube.Client
	terms  chan Term
	// id is its holderIdentity: the prefix it was given and a suffix.
	id   string
	done chan struct{}
	stop context.CancelFunc
	log  *lockedBuffer
}

const leaseName = "runner-reaper"

func campaign(t *testing.T, env *testenv.Env, ns, id string) *candidate {
	t.Helper()
	kc, err := kube.New(env.Config, kube.Options{})
	require.NoError(t, err)
	lc, hc, err := kc.ForLeases(env.Config)
	require.NoError(t, err)
	c := &candidate{client: kc, terms: make(chan Term, 4), done: make(chan struct{}), log: &lockedBuffer{}}
	el, err := NewLeaseElector(LeaseOptions{Namespace: ns, Name: leaseName, Identity: id, Duration: 3 * time.Second,
		Config: lc, HTTP: hc, Log: slog.New(slog.NewJSONHandler(c.log, nil))})
	require.NoError(t, err)
	c.id = el.Identity()
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go func() {
		defer close(c.done)
		el.Campaign(ctx, func(term Term) { c.terms <- term })
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

func (c *candidate) term(t *testing.T, within time.Duration) Term {
	t.Helper()
	select {
	case term := <-c.terms:
		return term
	case <-time.After(within):
		t.Fatalf("no term of leadership within %s; log:\n%s", within, c.log.String())
		return Term{}
	}
}

// Two candidates on one Lease, through client-go's election against a
// real API server: one leads, the other stands by; the leader that stops
// releases the Lease (an empty holderIdentity, seen before the other
// takes it), and its term ends before Campaign returns; the other takes
// it at its next try, long before the Lease would have expired. Every
// request of the election goes through the kube Client's counter.
func TestLeaseHandsOverOnRelease(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "lease")
	leases := env.Client.CoordinationV1().Leases(ns)

	a := campaign(t, env, ns, "a")
	termA := a.term(t, 30*time.Second)
	lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, a.id, *lease.Spec.HolderIdentity)
	assert.EqualValues(t, 3, *lease.Spec.LeaseDurationSeconds)

	b := campaign(t, env, ns, "b")
	w, err := leases.Watch(context.Background(), metav1.ListOptions{ResourceVersion: lease.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	a.stop()
	<-a.done
	require.Error(t, termA.Err(), "the leader's term ended before Campaign returned")
	assert.Contains(t, a.log.String(), `"msg":"lease released"`, "log:\n%s", a.log.String())
	assert.Positive(t, a.client.Counts().Requests, "the election's requests are counted")

	// The Lease's history from the leader's last renewal: its own
	// renewals, then the release, then b.
	lastRenewed := lease.Spec.RenewTime.Time
	var holders []string
	var acquired time.Time
	deadline := time.After(30 * time.Second)
	for acquired.IsZero() {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-deadline:
			t.Fatalf("b never took the Lease; holders seen: %v; b's log:\n%s", holders, b.log.String())
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		require.True(t, ok, "%v", ev)
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		switch holder {
		case a.id:
			lastRenewed = l.Spec.RenewTime.Time
			continue
		case b.id:
			acquired = l.Spec.AcquireTime.Time
		}
		if len(holders) == 0 || holders[len(holders)-1] != holder {
			holders = append(holders, holder)
		}
	}
	assert.Equal(t, []string{"", b.id}, holders, "released, then taken")
	assert.True(t, acquired.Before(lastRenewed.Add(3*time.Second)),
		"b took it at %s, before it would have expired (a renewed it last at %s)", acquired, lastRenewed)
	b.term(t, 10*time.Second)
}

// A leader whose Lease another takes loses its term within the renew
// deadline, says so, stands by, and leads again once the Lease is free.
func TestLeaseLostEndsTheTermAndCampaignsAgain(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "lease")
	leases := env.Client.CoordinationV1().Leases(ns)

	a := campaign(t, env, ns, "a")
	term := a.term(t, 30*time.Second)
	// The leader renews as the intruder writes: the write is retried on
	// a conflict, as any client's would be.
	intruder := "intruder"
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = &intruder, &now, &now
		_, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
		return err
	}))

	select {
	case <-term.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("the term did not end; log:\n%s", a.log.String())
	}
	require.Eventually(t, func() bool { return bytes.Contains([]byte(a.log.String()), []byte(`"msg":"lost the lease"`)) },
		10*time.Second, 50*time.Millisecond, "the loss is logged")
	again := a.term(t, 30*time.Second)
	assert.NoError(t, again.Err(), "a new term, once the intruder's Lease expired")
	lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, a.id, *lease.Spec.HolderIdentity)
}
