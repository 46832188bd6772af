package ghclient

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func TestDeleteRunner(t *testing.T) {
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	answers := []struct {
		name        string
		status      int
		headers     map[string]string
		body        string
		want        fleet.Result
		wantErr     bool
		rateLimited bool
	}{
		{name: "204", status: 204, want: fleet.Deleted},
		{name: "404", status: 404, body: `{"message":"Not Found"}`, want: fleet.AlreadyGone},
		{name: "422", status: 422, body: `{"message":"Runner \"rr-a\" is still running a job"}`, want: fleet.Busy},
		{name: "500", status: 500, body: `{"message":"boom"}`, wantErr: true},
		{name: "200 is not the contract", status: 200, body: `{}`, wantErr: true},
		{
			name: "403 rate limit", status: 403, wantErr: true, rateLimited: true,
			headers: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": reset},
			body:    `{"message":"API rate limit exceeded"}`,
		},
		{
			name: "429 retry-after", status: 429, wantErr: true, rateLimited: true,
			headers: map[string]string{"Retry-After": "1"},
		},
	}
	for _, sc := range scopeCases() {
		for _, tc := range answers {
			t.Run(sc.name+"/"+tc.name, func(t *testing.T) {
				c, mux, _ := setup(t, 0)
				calls := 0
				mux.HandleFunc("DELETE "+sc.path+"/42", func(w http.ResponseWriter, r *http.Request) {
					calls++
					assert.Equal(t, "Bearer "+testToken, r.Header.Get("Authorization"))
					for k, v := range tc.headers {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
				})

				got, err := c.DeleteRunner(context.Background(), sc.scope, 42)
				assert.Equal(t, 1, calls, "exactly one DELETE on %s/42", sc.path)
				if !tc.wantErr {
					require.NoError(t, err)
					assert.Equal(t, tc.want, got)
					return
				}
				require.Error(t, err)
				t.Logf("error: %v", err)
				assert.Empty(t, got, "an error is never a result")
				assert.Contains(t, err.Error(), "delete runner 42 in "+sc.scope.String())
				assert.Equal(t, tc.rateLimited, isRateLimited(err))
				assert.NotContains(t, err.Error(), testToken)
			})
		}
	}
}

func TestDeleteRunnerTimeout(t *testing.T) {
	c, mux, _ := setup(t, 150*time.Millisecond)
	mux.HandleFunc("DELETE /orgs/octo/actions/runners/42", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	got, err := c.DeleteRunner(context.Background(), orgScope, 42)
	require.Error(t, err)
	assert.Empty(t, got)
	assert.False(t, isRateLimited(err))
}

func TestDeleteRunnerRejectsBadInput(t *testing.T) {
	c, _, _ := setup(t, 0)
	_, err := c.DeleteRunner(context.Background(), orgScope, 0)
	assert.Error(t, err)
	_, err = c.DeleteRunner(context.Background(), fleet.Scope{Kind: fleet.OrgScope, Name: "a/b"}, 1)
	assert.Error(t, err)
	assert.Zero(t, c.Counts().Requests)
}
