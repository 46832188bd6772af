package httpcount

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counts are the requests sent, the 304s among their answers, and the
// bytes of the bodies read: a body read in part counts the part, and one
// not read counts nothing.
func TestTransportCounts(t *testing.T) {
	body := strings.Repeat("x", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	tr := &Transport{}
	c := &http.Client{Transport: tr}
	get := func(path string, read int64) {
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, read))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	for _, tc := range []struct {
		name  string
		path  string
		read  int64
		after Counts
	}{
		{"a body read whole", "/", 1 << 20, Counts{Requests: 1, Bytes: 10_000}},
		{"a body read in part", "/", 1234, Counts{Requests: 2, Bytes: 11_234}},
		{"a body not read", "/", 0, Counts{Requests: 3, Bytes: 11_234}},
		{"a 304", "/same", 1 << 20, Counts{Requests: 4, NotModified: 1, Bytes: 11_234}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get(tc.path, tc.read)
			assert.Equal(t, tc.after, tr.Snapshot())
		})
	}
}

func TestCountsSub(t *testing.T) {
	later := Counts{Requests: 10, NotModified: 4, Bytes: 5000}
	earlier := Counts{Requests: 3, NotModified: 1, Bytes: 1200}
	assert.Equal(t, Counts{Requests: 7, NotModified: 3, Bytes: 3800}, later.Sub(earlier))
}
