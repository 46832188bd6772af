package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The long-running mode's timings: the shortest interval there is, a
// sweep timeout below it, the default Lease.
const (
	serveInterval = 10 * time.Second
	leaseDuration = 15 * time.Second
	leaseName     = "runner-reaper"
)

// replica is one `runner-reaper serve` process of a world.
type replica struct {
	id  string
	url string
	p   *testenv.Started
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// serve starts a replica named id, with an address of its own.
func (w *world) serve(id string) *replica {
	w.t.Helper()
	addr := freeAddr(w.t)
	env := map[string]string{"REAPER_IDENTITY": id, "REAPER_LISTEN": addr}
	for k, v := range w.env {
		env[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	w.t.Cleanup(cancel)
	p, err := testenv.StartBinary(ctx, bin, env, "serve")
	require.NoError(w.t, err)
	return &replica{id: id, url: "http://" + addr, p: p}
}

// get is one request to a replica: its status and body, or 0 when it does
// not answer.
func (r *replica) get(path string) (int, string) {
	resp, err := http.Get(r.url + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gauge reads one series of a replica's /metrics, by its line's name and
// labels as the text format writes them.
func (r *replica) gauge(t *testing.T, series string) (float64, bool) {
	t.Helper()
	code, body := r.get("/metrics")
	if code != http.StatusOK {
		return 0, false
	}
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err, l)
			return f, true
		}
	}
	return 0, false
}

// stop sends SIGTERM and waits for the exit, checking what every run
// must pass (no credential in any output, every line JSON).
func (w *world) stop(r *replica) run {
	w.t.Helper()
	require.NoError(w.t, r.p.Signal(syscall.SIGTERM))
	res, err := r.p.Wait()
	require.NoError(w.t, err)
	return w.check(res, "serve")
}

// eventually polls cond until it holds, failing after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lease reads the world's Lease; nil while there is none.
func (w *world) lease() *coordinationv1.Lease {
	w.t.Helper()
	l, err := env.Client.CoordinationV1().Leases(w.ns).Get(context.Background(), leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(w.t, err)
	return l
}

// holder is the Lease's holder as the replica was named: the process adds
// `_` and a random suffix to REAPER_IDENTITY.
func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	h := *l.Spec.HolderIdentity
	if i := strings.LastIndex(h, "_"); i > 0 {
		return h[:i]
	}
	return h
}

// Two replicas of `runner-reaper serve` on one Lease and one ledger: one
// holds the Lease and sweeps, the other stands by with its stores synced;
// the leader reaps a zombie once its mark has held across sweeps. SIGTERM
// to the leader: it exits 0 after its sweep has ended, releasing the
// Lease (an empty holder, seen before the other takes it, and long before
// it would have expired); the other takes it and sweeps, and reaps the
// next zombie.
func TestServeTwoReplicasHandOverTheLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{
		"REAPER_INTERVAL":       serveInterval.String(),
		"REAPER_SWEEP_TIMEOUT":  "8s",
		"REAPER_LEASE_DURATION": leaseDuration.String(),
	})
	w.env["REAPER_LEASE_NAMESPACE"] = w.ns
	first := w.runner("acme-zombie-1", "offline", false)
	w.pod("acme-zombie-1", testenv.Running())

	a, b := w.serve("serve-a"), w.serve("serve-b")
	byID := map[string]*replica{a.id: a, b.id: b}
	var lease *coordinationv1.Lease
	eventually(t, 30*time.Second, "a replica holds the Lease", func() bool {
		lease = w.lease()
		return byID[holder(lease)] != nil
	})
	leader := byID[holder(lease)]
	standby := a
	if leader == a {
		standby = b
	}
	assert.EqualValues(t, leaseDuration.Seconds(), *lease.Spec.LeaseDurationSeconds)

	// Both are ready once synced; each says what it is, and so do the
	// gauges: exactly one leads.
	for _, r := range []*replica{leader, standby} {
		eventually(t, 60*time.Second, r.id+" is ready", func() bool { code, _ := r.get("/readyz"); return code == http.StatusOK })
		code, _ := r.get("/healthz")
		assert.Equal(t, http.StatusOK, code, r.id)
	}
	_, body := leader.get("/readyz")
	assert.Equal(t, "leading\n", body)
	_, body = standby.get("/readyz")
	assert.Equal(t, "standby\n", body)
	v, ok := leader.gauge(t, "runner_reaper_leader")
	assert.True(t, ok && v == 1, "the leader's gauge")
	v, ok = standby.gauge(t, "runner_reaper_leader")
	assert.True(t, ok && v == 0, "the standby's gauge")
	v, ok = standby.gauge(t, `runner_reaper_watch_live{resource="pods"}`)
	assert.True(t, ok && v == 1, "the standby keeps its store synced")

	// The leader marks the zombie, and reaps it a sweep later.
	eventually(t, 3*serveInterval+30*time.Second, "the leader reaps the zombie", func() bool {
		return !w.podExists("acme-zombie-1") && !w.runnerExists(first.ID)
	})
	v, ok = leader.gauge(t, `runner_reaper_sweep_exit_code{mode="sweep"}`)
	assert.True(t, ok, "the leader serves its last sweep's figures")
	assert.Zero(t, v)
	_, ok = standby.gauge(t, `runner_reaper_sweep_exit_code{mode="sweep"}`)
	assert.False(t, ok, "a standby serves no sweep's figures")

	second := w.runner("acme-zombie-2", "offline", false)
	w.pod("acme-zombie-2", testenv.Running())

	// SIGTERM to the leader, the Lease watched from where it stands.
	before := w.lease()
	lw, err := env.Client.CoordinationV1().Leases(w.ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	require.NoError(t, err)
	defer lw.Stop()
	stopped := w.stop(leader)
	stopped.requireCode(t, 0)
	assert.NotEmpty(t, stopped.msg("sweep"), "it swept")
	for _, s := range stopped.msg("sweep") {
		assert.Contains(t, s, "kube_bytes", "each summary says what was read from the API server")
	}
	released := stopped.msg("lease released")
	require.Len(t, released, 1, "it released the Lease:\n%s", stopped.Stdout)
	lines := stopped.Logs
	assert.Equal(t, "stopped", lines[len(lines)-1]["msg"], "its last line")

	lastRenewed := before.Spec.RenewTime.Time
	var holders []string
	var acquired time.Time
	deadline := time.After(30 * time.Second)
	for acquired.IsZero() {
		var ev watch.Event
		select {
		case ev = <-lw.ResultChan():
		case <-deadline:
			t.Fatalf("the standby never took the Lease; holders seen: %v", holders)
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		require.True(t, ok, "%v", ev)
		h := holder(l)
		switch h {
		case leader.id:
			lastRenewed = l.Spec.RenewTime.Time
			continue
		case standby.id:
			acquired = l.Spec.AcquireTime.Time
		}
		if len(holders) == 0 || holders[len(holders)-1] != h {
			holders = append(holders, h)
		}
	}
	assert.Equal(t, []string{"", standby.id}, holders, "released, then taken")
	assert.True(t, acquired.Before(lastRenewed.Add(leaseDuration)),
		"taken at %s, before the Lease last renewed at %s would have expired", acquired, lastRenewed)

	// The new leader sweeps, and reaps the second zombie.
	eventually(t, 3*serveInterval+30*time.Second, "the new leader reaps the second zombie", func() bool {
		return !w.podExists("acme-zombie-2") && !w.runnerExists(second.ID)
	})
	_, body = standby.get("/readyz")
	assert.Equal(t, "leading\n", body)
	last := w.stop(standby)
	last.requireCode(t, 0)
	assert.NotEmpty(t, last.msg("sweep"), "the new leader swept")
	reaped := 0
	for _, l := range last.msg("action") {
		if l["pod"] == "acme-zombie-2" && l["result"] == "deleted" {
			reaped++
		}
	}
	assert.Equal(t, 1, reaped, "the new leader reaped the second zombie, once")
	assert.Equal(t, 1, w.reapedEvents()["acme-zombie-1"], "nothing done twice")
}

// SIGTERM to the leader while an action's registration delete is in
// flight: the action finishes (its registration and its pod both gone),
// no other starts, the sweep's summary says why it stopped, and only then
// is the Lease released, before the process exits 0.
func TestServeSignalDuringAnActionReleasesTheLeaseAfterIt(t *testing.T) {
	t.Parallel()
	const hang = 3 * time.Second
	w := newWorld(t, map[string]string{
		"REAPER_INTERVAL":      serveInterval.String(),
		"REAPER_SWEEP_TIMEOUT": "8s",
	})
	w.env["REAPER_LEASE_NAMESPACE"] = w.ns
	_, _, firstReg, secondReg := terminalPair(w)
	w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Hang: hang, Times: 1})

	r := w.serve("serve-a")
	inFlight := w.waitFor(ghsim.EndpointDelete)
	require.True(t, strings.HasSuffix(inFlight.Path, "/"+strconv.FormatInt(firstReg.ID, 10)), "the first action's delete is in flight: %s", inFlight.Path)
	stopped := w.stop(r)

	stopped.requireCode(t, 0)
	acts := stopped.actions(t)
	assert.Equal(t, "deleted", acts["acme-first"]["result"], "the action in flight finished")
	assert.False(t, w.runnerExists(firstReg.ID))
	assert.False(t, w.podExists("acme-first"), "its pod went with its registration")
	assert.Equal(t, "not-reached", acts["acme-second"]["result"], "no action starts after the signal")
	assert.True(t, w.runnerExists(secondReg.ID))
	assert.True(t, w.podExists("acme-second"))
	s := stopped.summary(t)
	assert.EqualValues(t, 3, s["status"])
	assert.Contains(t, s["stopped"], "received SIGTERM")

	order := map[string]int{}
	for i, l := range stopped.Logs {
		if m, _ := l["msg"].(string); m == "sweep" || m == "lease released" || m == "stopped" {
			order[m] = i
		}
	}
	require.Len(t, order, 3, "a summary, the release, the end:\n%s", stopped.Stdout)
	assert.Less(t, order["sweep"], order["lease released"], "the Lease is released after the sweep has ended")
	assert.Less(t, order["lease released"], order["stopped"])
	assert.Empty(t, holder(w.lease()), "released, not left to expire")
}
