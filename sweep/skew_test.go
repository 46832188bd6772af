package sweep_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	restclient "k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/refclock"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Every age is measured on the API
// server's clock.

// skewedSweeper is the sweeper of a reaper whose own clock reads local():
// wired as the CLI wires it, with the reference clock read from the API
// server's Date when reference is true, or taking its own clock for the
// truth when it is false (what the reaper did before).
func (r *rig) skewedSweeper(local func() time.Time, reference bool) *sweep.Sweeper {
	r.t.Helper()
	clk := &refclock.Clock{Local: local}
	cfg := restclient.CopyConfig(r.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return refclock.Transport{Base: rt, Clock: clk} })
	s, _, err := app.Build(r.cfg, cfg, slog.New(slog.NewJSONHandler(r.logWriter(), nil)))
	require.NoError(r.t, err)
	s.Now, s.Local, s.Skew = clk.Now, local, clk.Skew
	if !reference {
		s.Now, s.Skew = local, nil
	}
	return s
}

func (r *rig) sweepWith(s *sweep.Sweeper, mode sweep.Mode) sweep.Result {
	r.t.Helper()
	return reported(context.Background(), s, mode, s.Log)
}

// The dangerous direction: a reaper whose clock runs an hour ahead takes a
// mark written a moment ago by a healthy one for an hour-old mark. Measured
// on the API server's clock, the mark is a moment old and nothing acts;
// taking its own clock for the truth (the control run) it deletes at once.
func TestReaperClockAheadConfirmsNothingEarly(t *testing.T) {
	for _, reference := range []bool{true, false} {
		name := "reference clock"
		if !reference {
			name = "control: the reaper's own clock"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			reg := r.runner("acme-zombie", "offline", false)
			r.pod("acme-zombie", testenv.Running())
			healthy := r.skewedSweeper(time.Now, true)
			first := r.sweepWith(healthy, sweep.Act)
			require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
			require.Len(t, first.Pending, 1, "marked, not acted on")

			ahead := func() time.Time { return time.Now().Add(time.Hour) }
			res := r.sweepWith(r.skewedSweeper(ahead, reference), sweep.Act)
			require.Equal(t, sweep.StatusComplete, res.Status, "%v", res.Err)
			if !reference {
				// What this test guards against.
				require.Len(t, res.Outcomes, 1)
				assert.Equal(t, fleet.Deleted, res.Outcomes[0].Result, "the control confirms the fresh mark at once")
				return
			}
			assert.Empty(t, res.Outcomes, "a mark a moment old does not act")
			require.Len(t, res.Pending, 1)
			assert.True(t, r.podExists("acme-zombie"))
			assert.True(t, r.runnerExists(reg.ID))
			assert.WithinDuration(t, time.Now(), res.Started, 5*time.Second, "the sweep's time is the API server's")
			m := res.Confirmation.Marks[res.Pending[0].Key]
			assert.WithinDuration(t, time.Now(), m.LastSeen, 5*time.Second, "no mark is written on the skewed clock")
			skew := r.lines("clock skew")
			require.Len(t, skew, 1, "the skew is reported")
			assert.InDelta(t, -3600, skew[0]["api_server_ahead_seconds"], 3)
		})
	}
}

// The other direction, and the review's case: marks dated a year ahead, as
// one sweep on a node whose clock ran ahead leaves them. The sweep that
// finds them says so, counts each from now, and the leak is reaped
// confirm-after later, not a year later.
func TestMarksFromTheFutureAreCountedFromNow(t *testing.T) {
	r := newRig(t)
	reg := r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())
	yearAhead := func() time.Time { return time.Now().AddDate(1, 0, 0) }
	marked := r.sweepWith(r.skewedSweeper(yearAhead, false), sweep.Act)
	require.Equal(t, sweep.StatusComplete, marked.Status, "%v", marked.Err)
	require.Len(t, marked.Pending, 1)
	key := marked.Pending[0].Key
	require.True(t, marked.Confirmation.Marks[key].FirstSeen.After(time.Now().AddDate(0, 11, 0)), "the mark is from the future")

	found := r.run(sweep.Act)
	require.Equal(t, sweep.StatusComplete, found.Status, "%v", found.Err)
	assert.Empty(t, found.Outcomes, "a mark from the future never acts on the sweep that finds it")
	m := found.Confirmation.Marks[key]
	assert.Equal(t, found.Started, m.FirstSeen, "counted from now")
	assert.Equal(t, found.Started, m.LastSeen)
	require.Len(t, found.Confirmation.FromFuture, 1)
	warn := r.lines("marks from the future")
	require.Len(t, warn, 1)
	assert.Equal(t, float64(1), warn[0]["marks"])
	assert.Greater(t, warn[0]["max_ahead_seconds"], float64(300*24*3600))

	r.clock.Add(r.cfg.Hold.ConfirmAfter + time.Second)
	reaped := r.run(sweep.Act)
	require.Equal(t, sweep.StatusComplete, reaped.Status, "%v", reaped.Err)
	require.Len(t, reaped.Outcomes, 1, "the leak is not held for the length of the skew")
	assert.Equal(t, fleet.Zombie, reaped.Outcomes[0].Candidate.Verdict)
	assert.Equal(t, fleet.Deleted, reaped.Outcomes[0].Result)
	assert.False(t, r.podExists("acme-zombie"))
	assert.False(t, r.runnerExists(reg.ID))
}

// dateSwitch rewrites the Date of every answer from the API server to
// date(), when date is set: a proxy, or one API server replica, whose clock
// is wrong.
type dateSwitch struct {
	mu   sync.Mutex
	date func() time.Time
}

func (d *dateSwitch) set(f func() time.Time) { d.mu.Lock(); d.date = f; d.mu.Unlock() }

func (d *dateSwitch) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		d.mu.Lock()
		f := d.date
		d.mu.Unlock()
		if err == nil && f != nil {
			resp.Header.Set("Date", f().UTC().Format(http.TimeFormat))
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// The review's case: one Date decides nothing. Sweeps a moment apart, on a
// machine whose clock is right, with the API server's Date jumping: a mark
// seen a moment ago never acts, whichever way the Date jumps. The control
// run, with one clock as before, deletes.
func TestALyingDateHurriesNothing(t *testing.T) {
	honest := func() time.Time { return time.Now() }
	future := func() time.Time { return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }
	epoch := func() time.Time { return time.Unix(0, 0) }
	hourBehind := func() time.Time { return time.Now().Add(-time.Hour) }
	for _, tc := range []struct {
		name   string
		dates  []func() time.Time
		oneClk bool
	}{
		{"a Date from year 9999 on the second sweep", []func() time.Time{honest, future}, false},
		{"a Date from 1970 on the first sweep, honest after", []func() time.Time{epoch, honest}, false},
		{"one replica an hour behind between honest sweeps", []func() time.Time{honest, hourBehind, honest}, false},
		{"control: one clock, a Date from year 9999", []func() time.Time{honest, future}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			reg := r.runner("acme-zombie", "offline", false)
			r.pod("acme-zombie", testenv.Running())
			sw := &dateSwitch{}
			cfg := restclient.CopyConfig(r.env.Config)
			cfg.Wrap(sw.wrap)
			var last sweep.Result
			for _, d := range tc.dates {
				sw.set(d)
				s, _, err := app.Build(r.cfg, cfg, slog.New(slog.NewJSONHandler(r.logWriter(), nil)))
				require.NoError(t, err)
				if tc.oneClk {
					s.Local = nil
				}
				last = r.sweepWith(s, sweep.Act)
				require.NotEqual(t, sweep.StatusFailed, last.Status, "%v", last.Err)
			}
			if tc.oneClk {
				require.Len(t, last.Outcomes, 1, "the control acts on a mark a moment old")
				assert.Equal(t, fleet.Deleted, last.Outcomes[0].Result)
				return
			}
			assert.Empty(t, last.Outcomes, "a mark a moment old does not act")
			assert.True(t, r.podExists("acme-zombie"))
			assert.True(t, r.runnerExists(reg.ID))
		})
	}
}

// An API server reached through a proxy that strips Date gives no clock
// of its own: the sweep says that its confirmations then rest on this
// machine's clock alone.
func TestNoDateIsWarned(t *testing.T) {
	r := newRig(t)
	r.pod("acme-zombie", testenv.Running())
	cfg := restclient.CopyConfig(r.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Header.Del("Date")
			}
			return resp, err
		})
	})
	s, _, err := app.Build(r.cfg, cfg, slog.New(slog.NewJSONHandler(r.logWriter(), nil)))
	require.NoError(t, err)
	res := r.sweepWith(s, sweep.Act)
	require.NotEqual(t, sweep.StatusFailed, res.Status, "%v", res.Err)
	require.Len(t, r.lines("no clock from the API server"), 1)
}

// dateShift rewrites the Date of every answer to now() plus shift, as a
// proxy whose clock is off, or a hostile one, would.
type dateShift struct {
	base  http.RoundTripper
	now   func() time.Time
	shift time.Duration
}

func (d dateShift) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err == nil {
		resp.Header.Set("Date", d.now().Add(d.shift).UTC().Format(http.TimeFormat))
	}
	return resp, err
}

// lyingDateSweeper is the sweeper of a reaper whose clock is the rig's and
// whose API server's Date lies by shift, for good.
func (r *rig) lyingDateSweeper(shift time.Duration) *sweep.Sweeper {
	r.t.Helper()
	clk := &refclock.Clock{Local: r.clock.Now}
	cfg := restclient.CopyConfig(r.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return refclock.Transport{Base: dateShift{base: rt, now: r.clock.Now, shift: shift}, Clock: clk}
	})
	s, _, err := app.Build(r.cfg, cfg, slog.New(slog.NewJSONHandler(r.logWriter(), nil)))
	require.NoError(r.t, err)
	s.Now, s.Local, s.Skew = clk.Now, r.clock.Now, clk.Skew
	return s
}

// On the real API server, a Date that lies by a year, for good: ahead, it
// makes a runner that has just started look a year old; behind, it makes
// every start lie in the future. Neither hurries a delete nor holds a leak
// for ever: the verdict must hold for the whole registration deadline in
// this reaper's own sight, then it acts.
func TestLyingDateHurriesNoDelete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shift time.Duration
		// before is how long the runner has run when the first sweep
		// sees it.
		before time.Duration
	}{
		{name: "a year ahead", shift: 365 * 24 * time.Hour},
		{name: "a year behind", shift: -365 * 24 * time.Hour, before: 11 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.pod("acme-new", testenv.Running())
			r.clock.Add(tc.before)
			first := r.sweepWith(r.lyingDateSweeper(tc.shift), sweep.Act)
			require.Equal(t, sweep.StatusComplete, first.Status, "%v", first.Err)
			require.Len(t, first.Pending, 1, "a verdict on either clock's word")
			assert.Equal(t, fleet.Unregistered, first.Pending[0].Verdict)
			assert.Contains(t, first.Pending[0].Evidence, "must hold for the whole 10m0s deadline from this reaper's first sighting")

			r.clock.Add(r.cfg.Hold.ConfirmAfter + time.Second)
			held := r.sweepWith(r.lyingDateSweeper(tc.shift), sweep.Act)
			require.Equal(t, sweep.StatusComplete, held.Status, "%v", held.Err)
			assert.Empty(t, held.Outcomes, "confirm-after is not enough where the clocks disagree")
			assert.True(t, r.podExists("acme-new"))

			r.clock.Add(r.cfg.Policy.RegistrationDeadline)
			acted := r.sweepWith(r.lyingDateSweeper(tc.shift), sweep.Act)
			require.Equal(t, sweep.StatusComplete, acted.Status, "%v", acted.Err)
			require.Len(t, acted.Outcomes, 1, "a lasting lie holds no leak for ever")
			assert.Equal(t, fleet.Deleted, acted.Outcomes[0].Result)
			assert.False(t, r.podExists("acme-new"))
		})
	}
}
