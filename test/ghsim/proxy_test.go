package ghsim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noFollow sends one request and returns the answer as given, without
// following a redirect.
func noFollow(t *testing.T, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// The faults of what may stand between a client and GitHub: a redirect to
// another server, and an error page that echoes the request's headers.
func TestProxyFaults(t *testing.T) {
	const other = "http://127.0.0.1:1/"
	auth := map[string]string{"Authorization": "token " + testToken, "Accept": "application/vnd.github+json"}
	tests := []struct {
		name   string
		fault  Fault
		method string
		path   string
		check  func(t *testing.T, resp *http.Response, body []byte)
	}{
		{
			name: "redirect, 301 by default, keeps path and query", fault: Fault{Redirect: other},
			method: http.MethodGet, path: "/orgs/acme/actions/runners?per_page=100&page=1",
			check: func(t *testing.T, resp *http.Response, _ []byte) {
				assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
				assert.Equal(t, "http://127.0.0.1:1/orgs/acme/actions/runners?per_page=100&page=1", resp.Header.Get("Location"))
			},
		},
		{
			name: "redirect 307 on delete", fault: Fault{Redirect: "http://127.0.0.1:1", RedirectStatus: http.StatusTemporaryRedirect},
			method: http.MethodDelete, path: "/orgs/acme/actions/runners/1",
			check: func(t *testing.T, resp *http.Response, _ []byte) {
				assert.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
				assert.Equal(t, "http://127.0.0.1:1/orgs/acme/actions/runners/1", resp.Header.Get("Location"))
			},
		},
		{
			name: "echo, 502 by default, quotes every header", fault: Fault{Echo: true},
			method: http.MethodGet, path: "/orgs/acme/actions/runners",
			check: func(t *testing.T, resp *http.Response, body []byte) {
				assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
				msg, _ := decodeMap(t, body)["message"].(string)
				assert.Contains(t, msg, "Authorization: token "+testToken)
				assert.Contains(t, msg, "Accept: application/vnd.github+json")
			},
		},
		{
			name: "echo with a status", fault: Fault{Echo: true, Status: 400},
			method: http.MethodDelete, path: "/orgs/acme/actions/runners/1",
			check: func(t *testing.T, resp *http.Response, body []byte) {
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
				assert.True(t, strings.HasPrefix(decodeMap(t, body)["message"].(string), "upstream refused the request; request headers: "))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			addRunners(s, "org:acme", "r", 1)
			s.Fault(Any, Any, tt.fault)
			resp, body := noFollow(t, tt.method, strings.TrimSuffix(base, "/")+tt.path, auth)
			tt.check(t, resp, body)
			assert.Len(t, s.Runners("org:acme"), 1, "a faulted delete deletes nothing")
			assert.Equal(t, DefaultRateLimit, s.RateRemaining(), "a faulted answer spends nothing")
		})
	}
}

// The sim remembers the App credentials it saw and made, so that a test
// can check that none of them leaked.
func TestCredentials(t *testing.T) {
	key := rsaKey(t)
	s, base := startSim(t, Options{AppID: testAppID, AppKey: &key.PublicKey})
	addRunners(s, "org:acme", "r", 1)
	assert.Empty(t, s.Credentials())
	c := appClient(t, base, key)
	_, _, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	require.NoError(t, err)
	creds := s.Credentials()
	require.Len(t, creds, 2, "one JWT, one installation token")
	assert.Equal(t, 2, strings.Count(creds[0], "."), "a JWT first: %s", creds[0])
	assert.True(t, strings.HasPrefix(creds[1], "ghs_"), creds[1])
}
