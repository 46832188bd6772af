package ghclient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// TestRequestsCarryRecommendedHeaders checks on the wire that every request
// the client sends (list pages and their revalidation, a find, a delete,
// and the App's token exchange) asks for GitHub's recommended media type
// and the pinned API version; go-github v60 and ghinstallation ask for the
// older application/vnd.github.v3+json.
func TestRequestsCarryRecommendedHeaders(t *testing.T) {
	key, keyPEM := newKey(t)
	sim := ghsim.New(ghsim.Options{AppID: testAppID, AppKey: &key.PublicKey})
	base, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	var last ghsim.Runner
	for range 150 {
		last = sim.AddRunner(orgScope.String(), ghsim.Runner{Status: "offline"})
	}
	c, err := New(Config{BaseURL: base, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM})
	require.NoError(t, err)
	ctx := context.Background()

	_, _, err = c.ListRunners(ctx, orgScope, nil)
	require.NoError(t, err)
	_, err = c.FindRunner(ctx, orgScope, last.Name)
	require.NoError(t, err)
	_, err = c.DeleteRunner(ctx, orgScope, last.ID)
	require.NoError(t, err)

	reqs := sim.Requests()
	endpoints := map[string]int{}
	for _, r := range reqs {
		endpoints[r.Endpoint]++
		assert.Equal(t, "application/vnd.github+json", r.Accept, "%s %s?%s", r.Method, r.Path, r.Query)
		assert.Equal(t, "2022-11-28", r.APIVersion, "%s %s?%s", r.Method, r.Path, r.Query)
	}
	assert.Equal(t, map[string]int{ghsim.EndpointToken: 1, ghsim.EndpointList: 2 + 1 + 1, ghsim.EndpointDelete: 1}, endpoints,
		"the exchange, two pages, page 1's revalidation, the find, the delete")
}
