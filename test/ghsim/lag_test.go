package ghsim

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// GitHub's busy flag lags a job's start: a list can still read idle while a
// delete already meets the job and is refused.
func TestListedIdleLagsBusy(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	r := s.AddRunner("org:acme", Runner{Name: "acme-1", Busy: true, ListedIdle: true})

	_, body := do(t, http.MethodGet, base, "/orgs/acme/actions/runners", testToken, nil)
	assert.Equal(t, false, decodeMap(t, body)["runners"].([]any)[0].(map[string]any)["busy"], "the list lags")

	resp, body := do(t, http.MethodDelete, base, fmt.Sprintf("/orgs/acme/actions/runners/%d", r.ID), testToken, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Contains(t, string(body), `Runner \"acme-1\" is still running a job`)
	assert.Len(t, s.Runners("org:acme"), 1)
}
