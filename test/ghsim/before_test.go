package ghsim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Before fault changes the scope at the moment the matching request is
// served, once, and the answer shows the change; the log keeps the
// request's Accept and X-GitHub-Api-Version.
func TestFaultBeforeChangesScopeMidList(t *testing.T) {
	s, base := startSim(t, Options{})
	rs := addRunners(s, "org:acme", "r", 150)
	calls := 0
	s.Fault("org:acme", EndpointList, Fault{Page: 2, Times: 1, Before: func() {
		calls++
		s.RemoveRunner("org:acme", rs[0].ID)
	}})

	resp, body := do(t, http.MethodGet, base, "/orgs/acme/actions/runners?per_page=100&page=1", "",
		map[string]string{"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 150, decodeMap(t, body)["total_count"])
	assert.Equal(t, 0, calls, "not on page 1")

	resp, body = do(t, http.MethodGet, base, "/orgs/acme/actions/runners?per_page=100&page=2", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 149, decodeMap(t, body)["total_count"], "page 2 is served after the change")
	do(t, http.MethodGet, base, "/orgs/acme/actions/runners?per_page=100&page=2", "", nil)
	assert.Equal(t, 1, calls, "once")

	reqs := s.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "application/vnd.github+json", reqs[0].Accept)
	assert.Equal(t, "2022-11-28", reqs[0].APIVersion)
	assert.Empty(t, reqs[1].Accept)
}
