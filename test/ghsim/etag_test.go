package ghsim

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConditionalRequests proves the observe step's premise: an unchanged
// list answered 304 costs nothing, and any change gives a 200 with a new
// ETag. Lists and single runners alike.
func TestConditionalRequests(t *testing.T) {
	tests := []struct {
		name string
		path func(id int64) string
	}{
		{"list", func(int64) string { return "/orgs/acme/actions/runners?per_page=2" }},
		{"get", func(id int64) string { return "/orgs/acme/actions/runners/" + itoa(id) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			rs := addRunners(s, "org:acme", "r", 3)
			path := tt.path(rs[0].ID)

			resp, _ := do(t, http.MethodGet, base, path, testToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			etag := resp.Header.Get("ETag")
			require.NotEmpty(t, etag)
			spent := s.RateRemaining()

			for _, inm := range []string{etag, strings.TrimPrefix(etag, "W/"), `"other", ` + etag} {
				resp, body := do(t, http.MethodGet, base, path, testToken, map[string]string{"If-None-Match": inm})
				assert.Equal(t, http.StatusNotModified, resp.StatusCode, "If-None-Match %s", inm)
				assert.Empty(t, body)
				assert.Equal(t, etag, resp.Header.Get("ETag"))
				assert.Equal(t, itoa(int64(spent)), resp.Header.Get("X-RateLimit-Remaining"))
			}
			assert.Equal(t, spent, s.RateRemaining(), "304s spend no rate limit")

			require.True(t, s.SetRunner("org:acme", rs[0].ID, func(r *Runner) { r.Status = "offline" }))
			resp, body := do(t, http.MethodGet, base, path, testToken, map[string]string{"If-None-Match": etag})
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Contains(t, string(body), `"offline"`)
			assert.NotEqual(t, etag, resp.Header.Get("ETag"))
			assert.Equal(t, spent-1, s.RateRemaining())

			reqs := s.Requests()
			require.Len(t, reqs, 5)
			assert.Equal(t, http.StatusNotModified, reqs[1].Status)
			assert.Equal(t, etag, reqs[1].IfNoneMatch)
			assert.Equal(t, tt.name, reqs[1].Endpoint)
		})
	}
}

// TestConditionalGoGitHub sends If-None-Match through go-github, as the
// reaper's client does, and sees the 304 as an *ErrorResponse with status
// 304 that leaves resp.Rate unchanged.
func TestConditionalGoGitHub(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	addRunners(s, "org:acme", "r", 3)
	c := ghClient(t, base, testToken)
	ctx := context.Background()

	_, resp, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil)
	require.NoError(t, err)
	etag := resp.Header.Get("ETag")

	req, err := c.NewRequest(http.MethodGet, "orgs/acme/actions/runners", nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	resp, err = c.Do(ctx, req, new(github.Runners))
	assertStatusError(t, err, http.StatusNotModified)
	assert.Equal(t, 4999, resp.Rate.Remaining)
}
