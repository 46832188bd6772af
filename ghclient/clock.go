package ghclient

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWait is the longest GitHub can honestly ask a client to wait: its
// primary rate limit is counted per hour, and a secondary limit's
// retry-after is a matter of seconds to minutes. A longer wait is a lying
// or broken server; honoured, it would keep a warm Lambda's go-github from
// sending anything until the process died.
const maxWait = time.Hour

// localTimes rewrites the times GitHub's answers give on GitHub's clock
// into this machine's, before go-github or the rate-limit reading sees
// them. x-ratelimit-reset is an instant on GitHub's clock and a
// retry-after may be an HTTP date on it; both are compared with this
// machine's clock afterwards (go-github refuses requests until the reset it
// remembers). Each is turned into the wait it stands for, measured both
// against the answer's own Date and against this machine's clock, and the
// longer of the two is kept, bounded by maxWait: a machine whose clock runs
// ahead of GitHub's would otherwise send into the limit, and a Date that
// lies (a proxy in front of GitHub Enterprise Server) could otherwise
// shorten every wait to nothing. A clock behind GitHub's waits longer than
// it needs to, which is the safe way to be wrong. The wait is then set
// again from the moment the answer arrived: a reset as this machine's
// instant, a retry-after as whole seconds.
type localTimes struct {
	base http.RoundTripper
	// now is this machine's clock; nil means time.Now.
	now func() time.Time
}

func (t localTimes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	received := time.Now()
	if t.now != nil {
		received = t.now()
	}
	// Where GitHub sends no Date, its clock is taken to be this one.
	githubNow := received
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		githubNow = d
	}
	h := resp.Header
	if v := strings.TrimSpace(h.Get("X-Ratelimit-Reset")); v != "" {
		if reset, err := strconv.ParseInt(v, 10, 64); err == nil && reset > 0 {
			// Whole seconds, in int64: a reset near the largest
			// int64 must not wrap inside time.Unix.
			wait := boundedSeconds(max(reset-githubNow.Unix(), reset-received.Unix()))
			h.Set("X-Ratelimit-Reset", strconv.FormatInt(ceilUnix(received)+wait, 10))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			h.Set("Retry-After", strconv.FormatInt(boundedSeconds(s), 10))
		} else if at, err := http.ParseTime(v); err == nil {
			wait := boundedSeconds(max(at.Unix()-githubNow.Unix(), at.Unix()-received.Unix()))
			h.Set("Retry-After", strconv.FormatInt(wait, 10))
		}
	}
	return resp, nil
}

// boundedSeconds is a wait in seconds no shorter than nothing and no longer
// than maxWait.
func boundedSeconds(s int64) int64 { return min(max(s, 0), int64(maxWait/time.Second)) }

// ceilUnix is t in whole Unix seconds, rounded up: a client may wait a
// little long, never too short.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
