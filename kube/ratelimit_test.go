package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// A sweep's burst of requests is not throttled by the client: 60 requests
// (more than client-go's default burst of 10, which at its default 5 a
// second would hold them for 10 s) go out at once when the cluster's
// config, like a kubeconfig or the in-cluster config, sets no limit.
func TestBurstIsNotThrottled(t *testing.T) {
	env := plane.Env(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 0, 0 // as a kubeconfig leaves them
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	ns := env.Namespace(t, "burst")

	const requests = 60
	start := time.Now()
	for i := 0; i < requests; i++ {
		res, err := c.DryRun().DeleteServiceAccount(context.Background(), ns, fmt.Sprintf("gone-%d", i))
		require.NoError(t, err)
		require.Equal(t, fleet.AlreadyGone, res)
	}
	took := time.Since(start)
	assert.Equal(t, int64(requests), c.Counts().Requests)
	assert.Less(t, took, 3*time.Second, "%d requests took %s: the client throttled them", requests, took)
}

// A limit the caller set is kept: the default applies only where there is
// none.
func TestConfiguredLimitIsKept(t *testing.T) {
	env := plane.Env(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 10, 1
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	ns := env.Namespace(t, "limit")

	start := time.Now()
	for i := 0; i < 6; i++ {
		_, err := c.DryRun().DeleteServiceAccount(context.Background(), ns, fmt.Sprintf("gone-%d", i))
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "5 requests past a burst of 1 at 10 a second wait 0.5 s")
}
