package ghclient

import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestContractRunnerPaginated decodes GitHub's own response example with
// the same code that decodes live answers.
func TestContractRunnerPaginated(t *testing.T) {
	body, err := os.ReadFile(testenv.Fixture(t, "github", "runner-paginated.json"))
	require.NoError(t, err)

	for _, sc := range scopeCases() {
		t.Run(sc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("GET "+sc.path, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.Header().Set("ETag", `W/"fixture"`)
				w.Header().Set("Cache-Control", "private, max-age=60")
				_, _ = w.Write(body)
			})
			got, cache, err := c.ListRunners(context.Background(), sc.scope, nil)
			require.NoError(t, err)
			assert.Equal(t, []fleet.Registration{
				// Of the labels, only the ownership label, matched
				// ignoring case as GitHub does.
				{ID: 23, Name: "linux_runner", Online: true, Busy: true, Labels: []string{"Linux"}},
				{ID: 24, Name: "mac_runner", Online: false, Busy: false},
			}, got)
			require.NotNil(t, cache)
			require.Len(t, cache.Pages, 1)
			assert.Equal(t, state.CachedPage{ETag: `W/"fixture"`, TotalCount: 2, Runners: got}, cache.Pages[0])
			assert.Equal(t, ownerLabel, cache.Label)
		})
	}
}
