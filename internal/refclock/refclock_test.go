package refclock

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClock(t *testing.T) {
	local := time.Date(2026, 11, 25, 12, 0, 0, 250_000_000, time.UTC)
	date := func(d time.Duration) string { return local.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		name  string
		dates []string
		// want is Now's distance from the local clock.
		want     time.Duration
		wantSeen bool
	}{
		{"no answer yet: the local clock", nil, 0, false},
		{"agreeing within a Date's precision: the local clock, exactly", []string{date(0)}, 0, true},
		{"within the tolerance: still the local clock", []string{date(time.Second + 500*time.Millisecond)}, 0, true},
		{"server an hour behind: its clock", []string{date(-time.Hour)}, -time.Hour + 250*time.Millisecond, true},
		{"server a year ahead: its clock", []string{date(365 * 24 * time.Hour)}, 365*24*time.Hour + 250*time.Millisecond, true},
		{"an unreadable Date leaves the last good one", []string{date(-time.Hour), "yesterday", ""}, -time.Hour + 250*time.Millisecond, true},
		{"the latest reading counts", []string{date(-time.Hour), date(0)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Clock{Local: func() time.Time { return local }}
			for _, d := range tc.dates {
				c.Observe(d, local)
			}
			assert.Equal(t, local.Add(tc.want), c.Now())
			_, seen := c.Skew()
			assert.Equal(t, tc.wantSeen, seen)
		})
	}
}

func TestTransportObservesEveryAnswer(t *testing.T) {
	behind := time.Now().Add(-2 * time.Hour).UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", behind.Format(http.TimeFormat))
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	c := &Clock{}
	hc := &http.Client{Transport: Transport{Base: http.DefaultTransport, Clock: c}}
	resp, err := hc.Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	off, seen := c.Skew()
	require.True(t, seen, "an error status still carries the server's time")
	assert.InDelta(t, (-2 * time.Hour).Seconds(), off.Seconds(), 2)
	assert.InDelta(t, 0, c.Now().Sub(behind).Seconds(), 2)
}
