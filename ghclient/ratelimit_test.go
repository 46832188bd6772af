package ghclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
)

// requireLimit asserts that err is typed as a rate limit lasting until
// about want (Retry-After is read against the clock, so within a couple of
// seconds).
func requireLimit(t *testing.T, err error, want time.Time, secondary bool) *fleet.RateLimitError {
	t.Helper()
	require.Error(t, err)
	var rl *fleet.RateLimitError
	require.True(t, errors.As(err, &rl), "typed as a rate limit: %v", err)
	assert.WithinDuration(t, want, rl.Until, 2*time.Second, "until")
	assert.Equal(t, secondary, rl.Secondary, "secondary")
	assert.Contains(t, err.Error(), "rate limit until "+rl.Until.UTC().Format(time.RFC3339))
	return rl
}

// TestRateLimitIsTyped: every form GitHub documents for a rate limit, on
// each kind of request, comes back as a *fleet.RateLimitError that says
// until when, still wrapping go-github's own error.
func TestRateLimitIsTyped(t *testing.T) {
	reset := time.Now().Add(37 * time.Minute).Truncate(time.Second)
	primary := map[string]string{"X-Ratelimit-Limit": "5000", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}
	forms := []struct {
		name      string
		status    int
		headers   map[string]string
		until     time.Time
		secondary bool
	}{
		{"403 with x-ratelimit-remaining 0", 403, primary, reset, false},
		{"429 with x-ratelimit-remaining 0", 429, primary, reset, false},
		{"403 with retry-after", 403, map[string]string{"Retry-After": "90"}, time.Now().Add(90 * time.Second), true},
		{"429 with retry-after", 429, map[string]string{"Retry-After": "120"}, time.Now().Add(120 * time.Second), true},
		{"429 with neither: a minute", 429, nil, time.Now().Add(time.Minute), true},
	}
	calls := []struct {
		name string
		call func(*Client) error
	}{
		{"list", func(c *Client) error { _, _, err := c.ListRunners(context.Background(), orgScope, nil); return err }},
		{"find", func(c *Client) error { _, err := c.FindRunner(context.Background(), orgScope, "rr-a"); return err }},
		{"delete", func(c *Client) error { _, err := c.DeleteRunner(context.Background(), orgScope, 7); return err }},
	}
	for _, f := range forms {
		for _, call := range calls {
			t.Run(f.name+"/"+call.name, func(t *testing.T) {
				c, mux, _ := setup(t, 0)
				mux.HandleFunc("/orgs/octo/actions/runners/", func(w http.ResponseWriter, r *http.Request) { refuse(w, f.status, f.headers) })
				mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) { refuse(w, f.status, f.headers) })
				err := call.call(c)
				requireLimit(t, err, f.until, f.secondary)
				var apiErr *github.ErrorResponse
				var limitErr *github.RateLimitError
				assert.True(t, errors.As(err, &apiErr) || errors.As(err, &limitErr), "go-github's error is still in the chain: %v", err)
				assert.NotContains(t, err.Error(), testToken)
			})
		}
	}
}

func refuse(w http.ResponseWriter, status int, headers map[string]string) {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`))
}

// TestRemembered: go-github v60 remembers a primary limit (from a 403 or a
// 429) and a 403 secondary limit, and refuses later requests itself, until
// the reset, without sending them. Those refusals are typed too, with the
// same until, so a sweep can tell them from a failure.
func TestRemembered(t *testing.T) {
	reset := time.Now().Add(20 * time.Minute).Truncate(time.Second)
	tests := []struct {
		name      string
		status    int
		headers   map[string]string
		body      string
		until     time.Time
		secondary bool
	}{
		{"primary, 403", 403, map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}, "", reset, false},
		{"primary, 429", 429, map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}, "", reset, false},
		{"secondary, 403", 403, map[string]string{"Retry-After": "300"},
			`{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`,
			time.Now().Add(5 * time.Minute), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, _, err := c.ListRunners(context.Background(), orgScope, nil)
			requireLimit(t, err, tc.until, tc.secondary)

			_, err = c.DeleteRunner(context.Background(), orgScope, 42)
			requireLimit(t, err, tc.until, tc.secondary)
			_, err = c.FindRunner(context.Background(), orgScope, "rr-a")
			requireLimit(t, err, tc.until, tc.secondary)
			assert.Equal(t, httpcount.Counts{Requests: 1}, requestCounts(c), "the remembered limit sent nothing more")
		})
	}
}

// TestAppTokenExchangeRefusedIsTyped: the App's token exchange answered 429
// is a rate limit with its until, though ghinstallation, not go-github,
// read the answer.
func TestAppTokenExchangeRefusedIsTyped(t *testing.T) {
	_, keyPEM := newKey(t)
	for _, tc := range []struct {
		name      string
		headers   map[string]string
		until     time.Time
		secondary bool
	}{
		{"429 with retry-after", map[string]string{"Retry-After": "45"}, time.Now().Add(45 * time.Second), true},
		{"429 with x-ratelimit-remaining 0", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}, time.Now().Add(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
				refuse(w, http.StatusTooManyRequests, tc.headers)
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c, err := New(Config{BaseURL: srv.URL, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM})
			require.NoError(t, err)
			_, _, err = c.ListRunners(context.Background(), orgScope, nil)
			requireLimit(t, err, tc.until, tc.secondary)
		})
	}
}
