// Package httpcount counts the requests a client sends, because requests per
// sweep is the reaper's first performance figure and must be exact.
package httpcount

import (
	"net/http"
	"sync/atomic"
)

// Transport counts every request that reaches the wire and every 304 answer.
// It is safe for concurrent use.
type Transport struct {
	Base        http.RoundTripper
	requests    atomic.Int64
	notModified atomic.Int64
}

// Counts is a snapshot of a Transport's counters.
type Counts struct {
	Requests    int64 `json:"requests"`
	NotModified int64 `json:"not_modified"`
}

// Sub is the difference since an earlier snapshot, so that a process that
// runs many sweeps (a warm Lambda) can report each one.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{Requests: c.Requests - earlier.Requests, NotModified: c.NotModified - earlier.NotModified}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	t.requests.Add(1)
	resp, err := base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusNotModified {
		t.notModified.Add(1)
	}
	return resp, err
}

// Snapshot returns the counts so far.
func (t *Transport) Snapshot() Counts {
	return Counts{Requests: t.requests.Load(), NotModified: t.notModified.Load()}
}
