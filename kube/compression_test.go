package kube

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// A pod page is asked for uncompressed where the API server is in reach of
// a cluster network (the API server would gzip each page of a few megabytes
// on its own CPU, and the reaper unzip it: 40% of the reaper's CPU over
// 10,000 ARC runner pods), and compressed for a cluster reached from
// outside, where the pages would otherwise cross the network several times
// larger every minute.
func TestPodPagesAreCompressedOnlyFromOutside(t *testing.T) {
	for _, tc := range []struct {
		compress bool
		gzip     bool
	}{{false, false}, {true, true}} {
		var mu sync.Mutex
		var encodings []string
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			encodings = append(encodings, r.Header.Get("Accept-Encoding"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
		}))
		t.Cleanup(srv.Close)

		// Over TLS, as every API server is: client-go gives a plain-HTTP
		// config Go's default transport, which would ignore the setting.
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		c, err := New(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, Options{Compress: tc.compress})
		require.NoError(t, err)
		_, err = c.ListPods(context.Background(), []string{"arc-runners"}, "actions-ephemeral-runner=True", Mapping{RunnerContainer: "runner"})
		require.NoError(t, err)

		mu.Lock()
		if tc.gzip {
			// The API server never compresses a watch: from outside,
			// the pods are read in pages alone.
			require.Len(t, encodings, 1)
			assert.Contains(t, encodings[0], "gzip", "compressed from outside")
		} else {
			// This server answers the watch-list with a list, so the
			// pods are read twice: as a watch-list, then in pages.
			require.Len(t, encodings, 2)
			for _, e := range encodings {
				assert.NotContains(t, e, "gzip", "uncompressed in reach of a cluster network")
			}
		}
		mu.Unlock()
	}
}
