package kube

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// recordedConn notes how much each read of the socket asked for.
type recordedConn struct {
	net.Conn
	mu   *sync.Mutex
	asks *[]int
}

func (c recordedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	*c.asks = append(*c.asks, len(p))
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// The client dials through the config's own Dial (kept, as a proxy or an
// exec plugin's rotation needs it), and reads each connection's socket
// through coalesce's buffer: the socket is asked for 32 KiB at a time,
// where net/http alone asks for 4 KiB.
func TestConnectionsKeepTheConfigsDialAndReadThroughABuffer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ledger","namespace":"arc-runners"}}`))
	}))
	defer srv.Close()

	var mu sync.Mutex
	var asks []int
	dials := 0
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return recordedConn{Conn: c, mu: &mu, asks: &asks}, nil
	}
	c, err := New(&rest.Config{Host: srv.URL, Dial: dial}, Options{})
	require.NoError(t, err)
	cm, err := c.ConfigMaps("arc-runners").Get(context.Background(), "ledger", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ledger", cm.Name)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, dials, "the config's Dial")
	require.NotEmpty(t, asks)
	for _, n := range asks {
		assert.Equal(t, 32<<10, n, "a read of the socket: %v", asks)
	}
}
