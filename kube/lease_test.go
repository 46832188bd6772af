package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// The Lease's client shares the Client's HTTP client, so its requests are
// counted with the sweep's, and gets the Client's rate limit defaults on a
// copy of the config, which is left as it was.
func TestForLeasesSharesTheCountedClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	c, err := New(cfg, Options{})
	require.NoError(t, err)

	lc, hc, err := c.ForLeases(cfg)
	require.NoError(t, err)
	assert.NotSame(t, cfg, lc)
	assert.Equal(t, DefaultQPS, lc.QPS)
	assert.Zero(t, cfg.QPS, "the config given is not changed")
	assert.NotNil(t, lc.WarningHandlerWithContext)

	before := c.Counts()
	resp, err := hc.Get(srv.URL + "/apis/coordination.k8s.io/v1/namespaces/x/leases/y")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(1), c.Counts().Sub(before).Requests, "the Lease's request is the Client's")
}
