// Package httpcount counts the requests a client sends and the bytes it
// reads back, because requests and bytes per sweep are the reaper's first
// performance figures and must be exact.
package httpcount

import (
	"io"
	"net/http"
	"sync/atomic"
)

// Transport counts every request that reaches the wire, every 304 answer,
// and every byte of the answers' bodies that is read. It is safe for
// concurrent use.
type Transport struct {
	Base        http.RoundTripper
	requests    atomic.Int64
	notModified atomic.Int64
	bytes       atomic.Int64
}

// Counts is a snapshot of a Transport's counters.
type Counts struct {
	Requests    int64 `json:"requests"`
	NotModified int64 `json:"not_modified"`
	// Bytes are the bytes of the answers' bodies read so far, as the
	// client read them: a body the transport asked gzip'd for itself is
	// counted decoded, and headers are not counted. A body is counted as
	// it is read, so a watch kept open counts what it has delivered.
	Bytes int64 `json:"bytes"`
}

// Sub is the difference since an earlier snapshot, so that a process that
// runs many sweeps (a warm Lambda, the long-running mode) can report each
// one.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{Requests: c.Requests - earlier.Requests, NotModified: c.NotModified - earlier.NotModified,
		Bytes: c.Bytes - earlier.Bytes}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	t.requests.Add(1)
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusNotModified {
		t.notModified.Add(1)
	}
	// A protocol switch's body is the connection itself, which its
	// caller writes to as well: it is left as it is.
	if resp.Body != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = &countedBody{ReadCloser: resp.Body, n: &t.bytes}
	}
	return resp, nil
}

// Snapshot returns the counts so far.
func (t *Transport) Snapshot() Counts {
	return Counts{Requests: t.requests.Load(), NotModified: t.notModified.Load(), Bytes: t.bytes.Load()}
}

// countedBody adds what is read from a body to its Transport's count.
type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
