// Package refclock reads the time on a server's clock from the Date header
// of its answers. The reaper's marks outlive the process and are compared
// with times other machines wrote (pod creation on the API server, a
// runner's start on a kubelet, the marks of a reaper that ran on another
// node), so every age it acts on must be measured on one clock. A reaper
// whose own clock runs ahead would otherwise take fresh marks for old ones
// and confirm them early; one that runs behind would hold real leaks.
//
// A Date has whole-second precision, so a reading is good to about half a
// second. Where the local clock agrees with the server's within Tolerance,
// the local clock's finer reading is used as it is; only a clock that is
// off by more is corrected. That keeps two sweeps on a healthy machine
// exactly as far apart as they were, and bounds the error on a skewed one.
package refclock

import (
	"net/http"
	"sync"
	"time"
)

// Tolerance is the largest difference between the local clock and the
// server's that is taken for the Date's own imprecision rather than skew.
const Tolerance = 2 * time.Second

// Clock is the time on one server's clock, as measured from its answers.
// The zero value is usable: before any answer it is the local clock. It is
// safe for concurrent use.
type Clock struct {
	// Local is the local clock; nil means time.Now. Set it before first
	// use, for a machine whose clock runs ahead.
	Local func() time.Time

	mu     sync.Mutex
	offset time.Duration
	seen   bool
}

func (c *Clock) localNow() time.Time {
	if c.Local != nil {
		return c.Local()
	}
	return time.Now()
}

// Observe takes the server's Date header of an answer received at
// received (the local clock). A missing or unreadable Date is ignored: the
// last good reading stands.
func (c *Clock) Observe(date string, received time.Time) {
	t, err := http.ParseTime(date)
	if err != nil {
		return
	}
	// The Date was truncated to the second when the answer was written:
	// the server's time was on average half a second later.
	off := t.Add(500 * time.Millisecond).Sub(received)
	c.mu.Lock()
	c.offset, c.seen = off, true
	c.mu.Unlock()
}

// Now is the current time on the server's clock: the local clock, moved by
// the measured offset when that is larger than Tolerance.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off, seen := c.offset, c.seen
	c.mu.Unlock()
	now := c.localNow()
	if seen && (off > Tolerance || off < -Tolerance) {
		// No monotonic reading: this is a wall-clock time on another
		// machine's clock, to be stored and compared as such.
		return now.Round(0).Add(off)
	}
	return now
}

// Skew is how far the server's clock is ahead of the local one (negative:
// behind), and whether any answer has said.
func (c *Clock) Skew() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.seen
}

// Transport observes the Date of every answer that passes through it.
type Transport struct {
	Base  http.RoundTripper
	Clock *Clock
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err == nil {
		t.Clock.Observe(resp.Header.Get("Date"), t.Clock.localNow())
	}
	return resp, err
}
