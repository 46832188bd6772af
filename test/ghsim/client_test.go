package ghsim

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listFunc lists one page of a scope through go-github's own method for it.
type listFunc func(c *github.Client, opts *github.ListOptions) (*github.Runners, *github.Response, error)

type scopeCase struct {
	scope  string
	list   listFunc
	get    func(c *github.Client, id int64) (*github.Runner, *github.Response, error) // nil: go-github v60 has none
	remove func(c *github.Client, id int64) (*github.Response, error)
}

func scopeCases() []scopeCase {
	ctx := context.Background()
	return []scopeCase{
		{
			scope: "org:acme",
			list: func(c *github.Client, o *github.ListOptions) (*github.Runners, *github.Response, error) {
				return c.Actions.ListOrganizationRunners(ctx, "acme", o)
			},
			get: func(c *github.Client, id int64) (*github.Runner, *github.Response, error) {
				return c.Actions.GetOrganizationRunner(ctx, "acme", id)
			},
			remove: func(c *github.Client, id int64) (*github.Response, error) {
				return c.Actions.RemoveOrganizationRunner(ctx, "acme", id)
			},
		},
		{
			scope: "repo:acme/web",
			list: func(c *github.Client, o *github.ListOptions) (*github.Runners, *github.Response, error) {
				return c.Actions.ListRunners(ctx, "acme", "web", o)
			},
			get: func(c *github.Client, id int64) (*github.Runner, *github.Response, error) {
				return c.Actions.GetRunner(ctx, "acme", "web", id)
			},
			remove: func(c *github.Client, id int64) (*github.Response, error) {
				return c.Actions.RemoveRunner(ctx, "acme", "web", id)
			},
		},
		{
			scope: "enterprise:big",
			list: func(c *github.Client, o *github.ListOptions) (*github.Runners, *github.Response, error) {
				return c.Enterprise.ListRunners(ctx, "big", o)
			},
			remove: func(c *github.Client, id int64) (*github.Response, error) {
				return c.Enterprise.RemoveRunner(ctx, "big", id)
			},
		},
	}
}

// TestGoGitHubClient drives the sim with the real go-github v60 client on
// each scope kind: three pages followed by resp.NextPage, a get, deletes
// answered 204, 404 and 422 as go-github maps them, and the rate-limit
// headers seen in resp.Rate.
func TestGoGitHubClient(t *testing.T) {
	for _, tc := range scopeCases() {
		t.Run(tc.scope, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			idle := addRunners(s, tc.scope, "idle", 4)
			busy := s.AddRunner(tc.scope, Runner{Name: "busy-1", Busy: true, Ephemeral: true})
			c := ghClient(t, base, testToken)

			var ids []int64
			pages := 0
			opts := &github.ListOptions{PerPage: 2}
			remaining := 5000
			for {
				list, resp, err := tc.list(c, opts)
				require.NoError(t, err)
				pages++
				assert.Equal(t, 5, list.TotalCount)
				if resp.NextPage != 0 {
					assert.Equal(t, 3, resp.LastPage)
				}
				remaining--
				assert.Equal(t, 5000, resp.Rate.Limit)
				assert.Equal(t, remaining, resp.Rate.Remaining)
				assert.True(t, resp.Rate.Reset.After(time.Now()), "reset in the future")
				for _, r := range list.Runners {
					ids = append(ids, r.GetID())
				}
				if resp.NextPage == 0 {
					break
				}
				opts.Page = resp.NextPage
			}
			assert.Equal(t, 3, pages)
			var want []int64
			for _, r := range s.Runners(tc.scope) {
				want = append(want, r.ID)
			}
			assert.Equal(t, want, ids)

			if tc.get != nil {
				r, resp, err := tc.get(c, idle[0].ID)
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, idle[0].Name, r.GetName())
				assert.Equal(t, "linux", r.GetOS())
				assert.Equal(t, "online", r.GetStatus())
				require.Len(t, r.Labels, 2)
				assert.Equal(t, "self-hosted", r.Labels[0].GetName())
				assert.Equal(t, "read-only", r.Labels[0].GetType())
				assert.Equal(t, "custom", r.Labels[1].GetType())

				_, resp, err = tc.get(c, 999999)
				assertStatusError(t, err, http.StatusNotFound)
				assert.Equal(t, http.StatusNotFound, resp.StatusCode)
			}

			resp, err := tc.remove(c, idle[1].ID)
			require.NoError(t, err)
			assert.Equal(t, http.StatusNoContent, resp.StatusCode)
			assert.Len(t, s.Runners(tc.scope), 4)

			_, err = tc.remove(c, idle[1].ID)
			assertStatusError(t, err, http.StatusNotFound)

			_, err = tc.remove(c, busy.ID)
			er := assertStatusError(t, err, http.StatusUnprocessableEntity)
			assert.Equal(t, `Runner "busy-1" is still running a job`, er.Message)
			assert.NotEmpty(t, er.DocumentationURL)
			assert.Len(t, s.Runners(tc.scope), 4, "a busy runner is not deleted")

			assert.Equal(t, s.RateRemaining(), 5000-len(s.Requests()), "every GET and DELETE spent one unit")
		})
	}
}

// assertStatusError checks err is go-github's *ErrorResponse with status.
func assertStatusError(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	require.True(t, errors.As(err, &er), "want *github.ErrorResponse, got %T: %v", err, err)
	assert.Equal(t, status, er.Response.StatusCode)
	return er
}

// TestRateBudget spends a small budget with GETs and DELETEs, gets GitHub's
// primary-limit answer once it is spent, and a fresh budget an hour later.
func TestRateBudget(t *testing.T) {
	clock := newFakeClock()
	s, base := startSim(t, Options{Token: testToken, RateLimit: 3, Now: clock.Now})
	rs := addRunners(s, "org:acme", "r", 2)

	resp, _ := do(t, http.MethodGet, base, "/orgs/acme/actions/runners", testToken, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = do(t, http.MethodDelete, base, "/orgs/acme/actions/runners/"+itoa(rs[0].ID), testToken, nil)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, 1, s.RateRemaining())
	resp, _ = do(t, http.MethodGet, base, "/orgs/acme/actions/runners/"+itoa(rs[1].ID), testToken, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "3", resp.Header.Get("X-RateLimit-Used"))

	resp, body := do(t, http.MethodGet, base, "/orgs/acme/actions/runners", testToken, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	assert.Contains(t, decodeMap(t, body)["message"], "API rate limit exceeded")
	assert.Equal(t, 0, s.RateRemaining())

	// go-github reads the refusal as a *RateLimitError (a fresh client: one
	// that saw remaining 0 would refuse to send at all until the reset).
	_, _, err := ghClient(t, base, testToken).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	var rle *github.RateLimitError
	require.True(t, errors.As(err, &rle), "got %T: %v", err, err)
	assert.Equal(t, 0, rle.Rate.Remaining)

	clock.Advance(time.Hour)
	assert.Equal(t, 3, s.RateRemaining())
	resp, _ = do(t, http.MethodGet, base, "/orgs/acme/actions/runners", testToken, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("X-RateLimit-Remaining"))
}
