package ghclient

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 16 §4, GitHub's Date: a rate limit's reset is an instant on
// GitHub's clock and its retry-after may be a date on it. Each is read as
// the wait it stands for against the answer's own Date, so a machine whose
// clock is off by an hour waits as long as GitHub asked, not an hour more
// or less; and no server can make the reaper wait longer than an hour.
func TestRateLimitWaitIsMeasuredOnGitHubsClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// skew is how far GitHub's clock is ahead of this machine's.
		skew    time.Duration
		headers func(githubNow time.Time) map[string]string
		wait    time.Duration
		second  bool
	}{
		{"reset 10 minutes ahead, GitHub's clock an hour ahead", time.Hour, primaryReset(10 * time.Minute), 10 * time.Minute, false},
		{"reset 10 minutes ahead, GitHub's clock an hour behind", -time.Hour, primaryReset(10 * time.Minute), 10 * time.Minute, false},
		{"reset already past on GitHub's clock: no wait", -time.Hour, primaryReset(-5 * time.Minute), 0, false},
		{"reset a year ahead: an hour at most", 0, primaryReset(365 * 24 * time.Hour), time.Hour, false},
		{"retry-after as a date, GitHub's clock a day ahead", 24 * time.Hour, func(now time.Time) map[string]string {
			return map[string]string{"Retry-After": now.Add(3 * time.Minute).Format(http.TimeFormat)}
		}, 3 * time.Minute, true},
		{"retry-after of a billion seconds: an hour at most", 0, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "1000000000"}
		}, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				githubNow := time.Now().Add(tc.skew)
				w.Header().Set("Date", githubNow.UTC().Format(http.TimeFormat))
				refuse(w, http.StatusTooManyRequests, tc.headers(githubNow))
			})
			_, _, err := c.ListRunners(context.Background(), orgScope, nil)
			requireLimit(t, err, time.Now().Add(tc.wait), tc.second)
		})
	}
}

func primaryReset(in time.Duration) func(time.Time) map[string]string {
	return func(githubNow time.Time) map[string]string {
		return map[string]string{"X-Ratelimit-Limit": "5000", "X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset": strconv.FormatInt(githubNow.Add(in).Unix(), 10)}
	}
}

// go-github remembers a primary limit's reset and refuses requests itself
// until then: on this machine's clock, after the rewrite, so a warm
// process whose clock runs behind GitHub's sends again once the limit has
// lifted, not an hour later.
func TestRememberedLimitLiftsOnTime(t *testing.T) {
	c, mux, _ := setup(t, 0)
	calls := 0
	mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		calls++
		githubNow := time.Now().Add(time.Hour)
		w.Header().Set("Date", githubNow.UTC().Format(http.TimeFormat))
		refuse(w, http.StatusForbidden, primaryReset(2*time.Second)(githubNow))
	})
	_, _, err := c.ListRunners(context.Background(), orgScope, nil)
	requireLimit(t, err, time.Now().Add(2*time.Second), false)
	require.Equal(t, 1, calls)
	time.Sleep(3500 * time.Millisecond)
	_, _, _ = c.ListRunners(context.Background(), orgScope, nil)
	require.Equal(t, 2, calls, "the remembered limit lifted on time and the list was sent again")
}
