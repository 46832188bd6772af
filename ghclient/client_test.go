package ghclient

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadConfig(t *testing.T) {
	_, keyPEM := newKey(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "no credentials", cfg: Config{}, want: "neither a token nor GitHub App settings"},
		{name: "both", cfg: Config{Token: testToken, AppID: 1, InstallationID: 2, PrivateKey: keyPEM}, want: "not both"},
		{name: "app without installation", cfg: Config{AppID: 1, PrivateKey: keyPEM}, want: "installation ID"},
		{name: "app without key", cfg: Config{AppID: 1, InstallationID: 2}, want: "private key"},
		{name: "key that is not PEM", cfg: Config{AppID: 1, InstallationID: 2, PrivateKey: []byte("MIIsecretKEYmaterial")}, want: "GitHub App 1"},
		{name: "relative base URL", cfg: Config{Token: testToken, BaseURL: "api.github.com"}, want: "absolute"},
		{name: "base URL with credentials", cfg: Config{Token: testToken, BaseURL: "https://user:hunter2@ghes.example/api/v3/"}, want: "must not carry credentials"},
		{name: "unparsable base URL", cfg: Config{Token: testToken, BaseURL: "https://ghes.example/%zz?token=hunter2"}, want: "parse GitHub base URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
			for _, secret := range []string{testToken, "hunter2", "secretKEY", "PRIVATE KEY"} {
				assert.NotContains(t, err.Error(), secret)
			}
		})
	}
}

func TestNewBaseURL(t *testing.T) {
	tests := []struct {
		base, want string
	}{
		{"", "https://api.github.com/"},
		{"https://ghes.example/api/v3", "https://ghes.example/api/v3/"},
		{"http://127.0.0.1:1234", "http://127.0.0.1:1234/"},
		{"http://127.0.0.1:1234/", "http://127.0.0.1:1234/"},
	}
	for _, tc := range tests {
		c, err := New(Config{BaseURL: tc.base, Token: testToken})
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.gh.BaseURL.String(), "base %q", tc.base)
	}
}

// TestNoTokenInErrors makes calls fail in the ways that quote the most
// (a refused connection quotes the URL, an API error the request) and
// checks that the token never appears.
func TestNoTokenInErrors(t *testing.T) {
	c, mux, srv := setup(t, 0)
	mux.HandleFunc("GET /orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
	})
	_, _, err := c.ListRunners(context.Background(), orgScope, nil)
	require.Error(t, err)
	var apiErr *github.ErrorResponse
	require.True(t, errors.As(err, &apiErr), "the go-github error stays reachable: %v", err)
	assert.NotContains(t, err.Error(), testToken)

	srv.Close()
	_, _, err = c.ListRunners(context.Background(), orgScope, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testToken)
	_, err = c.DeleteRunner(context.Background(), repoScope, 42)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testToken)
	assert.False(t, isRateLimited(err))
}

func TestIsRateLimitedNil(t *testing.T) {
	assert.False(t, isRateLimited(nil))
	assert.False(t, isRateLimited(errors.New("x-ratelimit-remaining: 0")))
}
