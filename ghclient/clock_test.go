package ghclient

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GitHub's Date: a rate limit's reset is an instant on
// GitHub's clock and its retry-after may be a date on it. Each is read as
// the longer of the waits it stands for against the answer's own Date and
// against this machine's clock, so a machine whose clock runs ahead does
// not send into the limit, a Date that lies shortens nothing, and no server
// can make the reaper wait longer than an hour.
func TestRateLimitWaitIsNeverTooShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		// date is GitHub's Date, given this machine's now.
		date    func(now time.Time) time.Time
		headers func(githubNow, now time.Time) map[string]string
		wait    time.Duration
		second  bool
	}{
		{"this machine an hour ahead, reset 10 minutes ahead on GitHub's clock: 10 minutes",
			func(now time.Time) time.Time { return now.Add(-time.Hour) }, primaryReset(10 * time.Minute), 10 * time.Minute, false},
		{"this machine an hour behind: the reset by its own clock, at most an hour",
			func(now time.Time) time.Time { return now.Add(time.Hour) }, primaryReset(10 * time.Minute), time.Hour, false},
		{"reset already past on both clocks: no wait",
			func(now time.Time) time.Time { return now.Add(-time.Hour) }, primaryReset(-5 * time.Minute), 0, false},
		{"a Date from year 9999 shortens nothing: the honest reset 30 minutes away",
			func(time.Time) time.Time { return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) },
			func(_, now time.Time) map[string]string { return resetAt(now.Add(30 * time.Minute).Unix()) }, 30 * time.Minute, false},
		{"reset a year ahead: an hour at most",
			func(now time.Time) time.Time { return now }, primaryReset(365 * 24 * time.Hour), time.Hour, false},
		{"reset at the largest int64: an hour at most",
			func(now time.Time) time.Time { return now },
			func(time.Time, time.Time) map[string]string { return resetAt(math.MaxInt64) }, time.Hour, false},
		{"retry-after as a date, this machine a day ahead: 3 minutes",
			func(now time.Time) time.Time { return now.Add(-24 * time.Hour) },
			func(githubNow, _ time.Time) map[string]string {
				return map[string]string{"Retry-After": githubNow.Add(3 * time.Minute).Format(http.TimeFormat)}
			}, 3 * time.Minute, true},
		{"retry-after of a billion seconds: an hour at most",
			func(now time.Time) time.Time { return now },
			func(time.Time, time.Time) map[string]string { return map[string]string{"Retry-After": "1000000000"} }, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				now := time.Now()
				githubNow := tc.date(now)
				w.Header().Set("Date", githubNow.UTC().Format(http.TimeFormat))
				refuse(w, http.StatusTooManyRequests, tc.headers(githubNow, now))
			})
			_, _, err := c.ListRunners(context.Background(), orgScope, nil)
			requireLimit(t, err, time.Now().Add(tc.wait), tc.second)
		})
	}
}

func resetAt(unix int64) map[string]string {
	return map[string]string{"X-Ratelimit-Limit": "5000", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(unix, 10)}
}

func primaryReset(in time.Duration) func(time.Time, time.Time) map[string]string {
	return func(githubNow, _ time.Time) map[string]string { return resetAt(githubNow.Add(in).Unix()) }
}

// go-github remembers a primary limit's reset and refuses requests itself
// until then, on this machine's clock: after the rewrite, a warm process
// whose clock runs an hour ahead of GitHub's does not take a reset 10
// minutes away on GitHub's clock for one 50 minutes past, and send into the
// limit at once; it holds the 10 minutes, and no more. What go-github
// remembers is read from its own refusal, which carries the reset it holds
// until, rather than by waiting for the limit to lift.
func TestRememberedLimitHoldsOnAClockAhead(t *testing.T) {
	c, mux, _ := setup(t, 0)
	calls := 0
	mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		calls++
		githubNow := time.Now().Add(-time.Hour)
		w.Header().Set("Date", githubNow.UTC().Format(http.TimeFormat))
		refuse(w, http.StatusForbidden, primaryReset(10*time.Minute)(githubNow, time.Now()))
	})
	_, _, err := c.ListRunners(context.Background(), orgScope, nil)
	requireLimit(t, err, time.Now().Add(10*time.Minute), false)
	require.Equal(t, 1, calls)
	_, _, err = c.ListRunners(context.Background(), orgScope, nil)
	require.Equal(t, 1, calls, "the remembered limit held: nothing was sent into it")
	var held *github.RateLimitError
	require.ErrorAs(t, err, &held, "go-github refused it itself, from the limit it remembers")
	requireLimit(t, err, time.Now().Add(10*time.Minute), false)
	assert.WithinDuration(t, time.Now().Add(10*time.Minute), held.Rate.Reset.Time, 2*time.Second,
		"it holds until the reset as this machine's clock has it, and lifts then")
}
