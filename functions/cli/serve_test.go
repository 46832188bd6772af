package main

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What only the long-running mode needs is refused by `serve` at start-up,
// exit 2, naming the variable, what was wrong and an example, before it
// reads or writes anything: no GitHub request, no Lease, nothing deleted.
func TestServeBadConfigurationExitsTwoAndTouchesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		variable string
		says     string
	}{
		{"an interval within the sweep timeout", map[string]string{"REAPER_INTERVAL": "30s"}, "REAPER_INTERVAL",
			"must be longer than REAPER_SWEEP_TIMEOUT"},
		{"no Lease namespace outside a pod", map[string]string{"REAPER_LEASE_NAMESPACE": ""}, "REAPER_LEASE_NAMESPACE",
			"is required outside a pod"},
		{"a port that is not one", map[string]string{"REAPER_LISTEN": ":http"}, "REAPER_LISTEN", "is not a number from 1 to 65535"},
		{"a Lease name that is not one", map[string]string{"REAPER_LEASE_NAME": "Runner_Reaper"}, "REAPER_LEASE_NAME", "is not a Lease name"},
		// Well formed, but another process holds the port: found only
		// by listening, before anything is read or written.
		{"a port another process holds", map[string]string{"REAPER_LISTEN": heldPort(t)}, "REAPER_LISTEN", "cannot listen on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setup(t)
			t.Setenv("REAPER_LEASE_NAMESPACE", w.ns)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, stderr := runCLI("serve")
			assert.Equal(t, exitBadConfig, code, stderr)
			assert.Contains(t, stderr, tc.variable+": ", "the message names the variable")
			assert.Contains(t, stderr, tc.says)
			assert.Contains(t, stderr, "example: "+tc.variable+"=", "the message gives a right example")
			assert.Empty(t, out)
			assert.Empty(t, w.sim.Requests(), "nothing was asked of GitHub")
			assert.True(t, w.podExists(t, "acme-dead"), "nothing was deleted")
			_, err := plane.Env(t).Client.CoordinationV1().Leases(w.ns).Get(context.Background(), "runner-reaper", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "no Lease was written: %v", err)
		})
	}
}

// heldPort is a loopback address a listener of this test holds until the
// test ends.
func heldPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}
