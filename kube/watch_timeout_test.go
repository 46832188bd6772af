package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestWatchStreamOutlastsTheTimeout: a watch's body is read past the
// Client's timeout, which still bounds every other request's whole answer
// and a watch's headers.
func TestWatchStreamOutlastsTheTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newStreamServer(t, release)
	c, err := New(&rest.Config{Host: srv}, Options{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	read := func(ctx context.Context) (string, error) {
		body, err := c.cs.rest.Get().AbsPath("/stream").Stream(ctx)
		if err != nil {
			return "", err
		}
		defer body.Close()
		var b strings.Builder
		buf := make([]byte, 64)
		for {
			n, err := body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				if errors.Is(err, io.EOF) {
					return b.String(), nil
				}
				return b.String(), err
			}
		}
	}
	streamed := make(chan error, 1)
	var text string
	go func() {
		var err error
		text, err = read(withStreamBound(context.Background(), time.Minute))
		streamed <- err
	}()
	// A plain request waits as long and is cut at the timeout: only
	// then is the stream's body sent.
	_, err = read(context.Background())
	require.ErrorIs(t, err, ErrTimeout)
	close(release)
	require.NoError(t, <-streamed)
	assert.Equal(t, "at last", text)

	t.Run("a stream's headers are bounded", func(t *testing.T) {
		c, err := New(&rest.Config{Host: "http://" + testenv.SilentServer(t)}, Options{Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		_, err = c.cs.rest.Get().AbsPath("/stream").Stream(withStreamBound(context.Background(), time.Hour))
		require.ErrorIs(t, err, ErrTimeout)
		assert.Contains(t, err.Error(), "within 300ms")
	})
}

// newStreamServer answers every request's headers at once, then its body
// only once release is closed (or the client gave up), and returns its
// URL.
func newStreamServer(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
			_, _ = w.Write([]byte("at last"))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStreamTailTellsAnEndFromACut: a stream's record of its end says
// clean only when its server ended the body (the last chunk), not when the
// connection was closed under it or the Client's bound cut it.
func TestStreamTailTellsAnEndFromACut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "some")
		_ = http.NewResponseController(w).Flush()
		switch r.URL.Path {
		case "/ends":
		case "/cut":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		case "/stalls":
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	for _, tc := range []struct {
		path  string
		clean bool
	}{
		{"/ends", true},
		{"/cut", false},
		{"/stalls", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			tail := &streamTail{clock: clock.RealClock{}}
			before := time.Now()
			ctx := withStreamTail(withStreamBound(context.Background(), time.Second), tail)
			body, err := c.cs.rest.Get().AbsPath(tc.path).Stream(ctx)
			require.NoError(t, err)
			_, _ = io.ReadAll(body)
			require.NoError(t, body.Close())
			sent, _, clean := tail.endedCleanly()
			assert.Equal(t, tc.clean, clean)
			assert.False(t, sent.Before(before), "sent when the request was")
		})
	}
}
