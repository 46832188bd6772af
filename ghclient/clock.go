package ghclient

import (
	"math"
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
// remembers). A machine whose clock runs behind GitHub's would wait out the
// skew on top of the limit, and one that runs ahead would send into the
// limit. Each is turned into the wait it stands for, measured against the
// answer's own Date, bounded by maxWait, and set again from the moment the
// answer arrived: a reset as this machine's instant, a retry-after as
// whole seconds.
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
		// A Date is truncated to the second.
		githubNow = d.Add(500 * time.Millisecond)
	}
	h := resp.Header
	if v := strings.TrimSpace(h.Get("X-Ratelimit-Reset")); v != "" {
		if reset, err := strconv.ParseInt(v, 10, 64); err == nil && reset > 0 {
			wait := bounded(time.Unix(reset, 0).Sub(githubNow))
			h.Set("X-Ratelimit-Reset", strconv.FormatInt(ceilUnix(received.Add(wait)), 10))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			if time.Duration(s) > maxWait/time.Second {
				h.Set("Retry-After", strconv.FormatInt(int64(maxWait/time.Second), 10))
			}
		} else if at, err := http.ParseTime(v); err == nil {
			wait := bounded(at.Sub(githubNow))
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		}
	}
	return resp, nil
}

// bounded is a wait no shorter than nothing and no longer than maxWait.
func bounded(wait time.Duration) time.Duration { return min(max(wait, 0), maxWait) }

// ceilUnix is t in whole Unix seconds, rounded up: a client may wait a
// little long, never too short.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
