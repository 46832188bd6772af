package ghclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// contractSim serves the simulator behind a recorder that checks every
// request the client sends and every answer the simulator gives against
// GitHub's published API description.
func contractSim(t *testing.T, api *testenv.GitHubAPI, opts ghsim.Options) (*ghsim.Sim, *testenv.ContractRecorder, string) {
	t.Helper()
	sim := ghsim.New(opts)
	rec := api.Recorder(sim.Handler())
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return sim, rec, srv.URL + "/"
}

// requireConforming fails with every departure from the description.
func requireConforming(t *testing.T, rec *testenv.ContractRecorder) {
	t.Helper()
	var problems []string
	for _, e := range rec.Exchanges() {
		problems = append(problems, e.Problems...)
	}
	require.Empty(t, problems, "departures from GitHub's API description:\n%s", strings.Join(problems, "\n"))
}

// TestOpenAPIContractRunnerOperations drives every runner operation the
// reaper uses, in each scope kind, through the real client and the
// simulator, and checks both sides of each exchange against GitHub's own
// description: list (several pages, then again conditionally), find by
// name, delete answered 204, 404 and 422, and the rate-limit answers.
func TestOpenAPIContractRunnerOperations(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	cases := []struct {
		scope fleet.Scope
		ops   []string
	}{
		{repoScope, []string{"actions/delete-self-hosted-runner-from-repo", "actions/list-self-hosted-runners-for-repo"}},
		{orgScope, []string{"actions/delete-self-hosted-runner-from-org", "actions/list-self-hosted-runners-for-org"}},
		{entScope, []string{"enterprise-admin/delete-self-hosted-runner-from-enterprise", "enterprise-admin/list-self-hosted-runners-for-enterprise"}},
	}
	for _, tc := range cases {
		t.Run(tc.scope.String(), func(t *testing.T) {
			ctx := context.Background()
			const token = "ghp_contracttoken"
			sim, rec, base := contractSim(t, api, ghsim.Options{Token: token})
			sim.AddScope(tc.scope.String())
			var busy, idle ghsim.Runner
			for i := range 150 {
				r := sim.AddRunner(tc.scope.String(), ghsim.Runner{Name: fmt.Sprintf("runner-%03d", i), Status: "offline",
					Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: "gpu"}}})
				idle = r
			}
			busy = sim.AddRunner(tc.scope.String(), ghsim.Runner{Name: "busy-one", Status: "online", Busy: true})
			c, err := New(Config{BaseURL: base, Token: token})
			require.NoError(t, err)

			regs, cache, err := c.ListRunners(ctx, tc.scope, nil)
			require.NoError(t, err)
			require.Len(t, regs, 151)
			require.Len(t, cache.Pages, 2)
			_, _, err = c.ListRunners(ctx, tc.scope, cache)
			require.NoError(t, err, "the conditional list")

			found, err := c.FindRunner(ctx, tc.scope, "busy-one")
			require.NoError(t, err)
			require.NotNil(t, found)
			missing, err := c.FindRunner(ctx, tc.scope, "nobody")
			require.NoError(t, err)
			require.Nil(t, missing)

			res, err := c.DeleteRunner(ctx, tc.scope, idle.ID)
			require.NoError(t, err)
			assert.Equal(t, fleet.Deleted, res)
			res, err = c.DeleteRunner(ctx, tc.scope, idle.ID)
			require.NoError(t, err)
			assert.Equal(t, fleet.AlreadyGone, res)
			res, err = c.DeleteRunner(ctx, tc.scope, busy.ID)
			require.NoError(t, err)
			assert.Equal(t, fleet.Busy, res)

			// GitHub's refusals: a server error, both rate limits.
			for _, f := range []ghsim.Fault{{Status: 502, Times: 1}, {Secondary: 429, Times: 1}, {Secondary: 403, Times: 1}} {
				sim.Fault(tc.scope.String(), ghsim.EndpointList, f)
				_, _, err := c.ListRunners(ctx, tc.scope, nil)
				require.Error(t, err)
			}

			requireConforming(t, rec)
			for _, op := range tc.ops {
				assert.Contains(t, rec.Operations(), op, "the operation was exercised")
			}
		})
	}
}

// TestOpenAPIContractAppTokenExchange checks the App's installation token
// exchange, request and answer, against the description.
func TestOpenAPIContractAppTokenExchange(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	key, keyPEM := newKey(t)
	sim, rec, base := contractSim(t, api, ghsim.Options{AppID: testAppID, AppKey: &key.PublicKey})
	sim.AddScope(orgScope.String())
	sim.AddRunner(orgScope.String(), ghsim.Runner{Name: "r1", Status: "online"})
	c, err := New(Config{BaseURL: base, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM})
	require.NoError(t, err)
	regs, _, err := c.ListRunners(context.Background(), orgScope, nil)
	require.NoError(t, err)
	require.Len(t, regs, 1)

	requireConforming(t, rec)
	assert.Contains(t, rec.Operations(), "apps/create-installation-access-token")
	assert.Contains(t, rec.Operations(), "actions/list-self-hosted-runners-for-org")
}

// TestFixtureIsGitHubsExample keeps testdata's runner list equal to the
// response example in the pinned description, so that the tests that
// decode the fixture decode what GitHub documents today.
func TestFixtureIsGitHubsExample(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	ex, ok := api.Doc.Components.Examples["runner-paginated"]
	require.True(t, ok, "the description has the runner-paginated example")
	want, err := json.Marshal(ex.Value.Value)
	require.NoError(t, err)
	got, err := os.ReadFile(testenv.Fixture(t, "github", "runner-paginated.json"))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
}

// TestOpenAPIContractCatchesDepartures proves the check can fail: a runner
// without its required os, and a query parameter GitHub does not define,
// are both reported.
func TestOpenAPIContractCatchesDepartures(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	rec := api.Recorder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write([]byte(`{"total_count":1,"runners":[{"id":1,"name":"r","status":"online","busy":false,"labels":[]}]}`))
	}))
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL + "/", Token: "ghp_x"})
	require.NoError(t, err)
	_, _, err = c.ListRunners(context.Background(), orgScope, nil)
	require.NoError(t, err)
	resp, err := http.Get(srv.URL + "/orgs/octo/actions/runners?per_page=500")
	require.NoError(t, err)
	_ = resp.Body.Close()

	ex := rec.Exchanges()
	require.Len(t, ex, 2)
	assert.Contains(t, strings.Join(ex[0].Problems, "\n"), "os", "a runner lacking a required property is caught")
	assert.Contains(t, strings.Join(ex[1].Problems, "\n"), "per_page", "a page size above GitHub's maximum is caught")
}
