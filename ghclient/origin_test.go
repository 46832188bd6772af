package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/redact"
)

// elsewhere is a second loopback server, on another port, that would
// gladly take a credential and answer as GitHub does: a list with one idle
// runner and 204 to a delete. It records every request it gets.
type elsewhere struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []string // method and path
	auth []string
}

func newElsewhere(t *testing.T) *elsewhere {
	t.Helper()
	e := &elsewhere{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.got = append(e.got, r.Method+" "+r.URL.Path)
		e.auth = append(e.auth, r.Header.Get("Authorization"))
		e.mu.Unlock()
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 1,
			"runners": []any{runner(99, "rr-elsewhere", "offline", false)}})
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *elsewhere) requests() ([]string, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...), append([]string(nil), e.auth...)
}

// redirecting is the configured API: it redirects every runners request to
// target (keeping path and query) with status, and, for App auth, hands out
// an installation token for any JWT.
func redirecting(t *testing.T, status int, target func(r *http.Request) string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_installationTOKEN0123456789",
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	})
	mux.HandleFunc("/orgs/octo/actions/runners/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(r), status)
	})
	mux.HandleFunc("/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(r), status)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// authCase is one way to authenticate, with the secrets it must never let
// out of the configured origin.
type authCase struct {
	name string
	cfg  func(base string) Config
}

func authCases(t *testing.T) []authCase {
	_, keyPEM := newKey(t)
	return []authCase{
		{"token", func(base string) Config { return Config{BaseURL: base, Token: testToken, Timeout: 5 * time.Second} }},
		{"app", func(base string) Config {
			return Config{BaseURL: base, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM, Timeout: 5 * time.Second}
		}},
	}
}

// A runners request answered with a redirect to another origin is refused
// before the redirect is followed: the other server gets nothing, not even
// a request without a credential, and the call fails. A list so refused is
// no list (the caller skips the scope); a delete so refused has no result.
func TestRedirectOffOriginIsRefused(t *testing.T) {
	ops := []struct {
		name string
		call func(c *Client) error
	}{
		{"list", func(c *Client) error {
			regs, cache, err := c.ListRunners(context.Background(), orgScope, nil)
			assert.Nil(t, regs, "no registrations from a refused list")
			assert.Nil(t, cache)
			return err
		}},
		{"delete", func(c *Client) error {
			res, err := c.DeleteRunner(context.Background(), orgScope, 42)
			assert.Empty(t, res, "a refused delete has no result")
			return err
		}},
		{"find", func(c *Client) error {
			reg, err := c.FindRunner(context.Background(), orgScope, "rr-elsewhere")
			assert.Nil(t, reg)
			return err
		}},
	}
	for _, auth := range authCases(t) {
		for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusFound, http.StatusPermanentRedirect} {
			for _, op := range ops {
				t.Run(auth.name+"/"+http.StatusText(status)+"/"+op.name, func(t *testing.T) {
					other := newElsewhere(t)
					home := redirecting(t, status, func(r *http.Request) string { return other.srv.URL + r.URL.RequestURI() })
					c, err := New(auth.cfg(home.URL))
					require.NoError(t, err)

					err = op.call(c)
					require.Error(t, err)
					t.Logf("error: %v", err)
					got, authSeen := other.requests()
					assert.Empty(t, got, "the other origin received a request")
					assert.Empty(t, authSeen, "the other origin received a credential")
					assert.ErrorIs(t, err, ErrOffOrigin)
					assert.False(t, isRateLimited(err))
					msg := err.Error()
					assert.Contains(t, msg, strings.TrimPrefix(other.srv.URL, "http://"), "the error names the refused origin")
					assert.NotContains(t, msg, "per_page", "the error never quotes the refused URL's query")
					assert.NotContains(t, msg, testToken)
					assert.NotContains(t, msg, "ghs_installationTOKEN0123456789")
				})
			}
		}
	}
}

// A redirect within the configured origin (another path on the same
// scheme, host and port) is followed, with the credential.
func TestRedirectSameOriginIsFollowed(t *testing.T) {
	for _, auth := range authCases(t) {
		t.Run(auth.name, func(t *testing.T) {
			mux := http.NewServeMux()
			var moved []string
			mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_sameorigin0123456789",
					"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
			})
			mux.HandleFunc("GET /orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/moved"+r.URL.RequestURI(), http.StatusMovedPermanently)
			})
			mux.HandleFunc("GET /moved/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				moved = append(moved, r.Header.Get("Authorization"))
				_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 1, "runners": []any{runner(7, "rr-a", "online", false)}})
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c, err := New(auth.cfg(srv.URL))
			require.NoError(t, err)
			regs, _, err := c.ListRunners(context.Background(), orgScope, nil)
			require.NoError(t, err)
			require.Len(t, regs, 1)
			require.Len(t, moved, 1)
			assert.NotEmpty(t, moved[0], "the credential goes with a same-origin redirect")
		})
	}
}

// The guard beneath the credential layers sends nothing to another origin,
// whatever built the request: the last line of defence if a redirect
// policy is ever bypassed.
func TestGuardRefusesOtherOrigins(t *testing.T) {
	base, err := parseBaseURL("https://api.example.test/api/v3")
	require.NoError(t, err)
	sent := 0
	g := &guard{base: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader(""))}, nil
	}), origin: originOf(base)}
	tests := []struct {
		url    string
		refuse string // the origin named, or "" when sent
	}{
		{"https://api.example.test/api/v3/orgs/o/actions/runners", ""},
		{"https://API.Example.test:443/elsewhere?x=1", ""},
		{"http://api.example.test/api/v3/orgs/o/actions/runners", "http://api.example.test:80"},
		{"https://api.example.test:8443/api/v3/", "https://api.example.test:8443"},
		{"https://evil.test/api/v3/?token=x", "https://evil.test:443"},
		{"https://user:pass@api.example.test.evil.test/", "https://api.example.test.evil.test:443"},
	}
	for _, tc := range tests {
		req, err := http.NewRequest(http.MethodDelete, tc.url, strings.NewReader("body"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		before := sent
		resp, err := g.RoundTrip(req)
		if tc.refuse == "" {
			require.NoError(t, err, tc.url)
			_ = resp.Body.Close()
			assert.Equal(t, before+1, sent, tc.url)
			continue
		}
		require.Error(t, err, tc.url)
		assert.Equal(t, before, sent, "nothing sent to %s", tc.url)
		var refused *OffOriginError
		require.True(t, errors.As(err, &refused))
		assert.Equal(t, tc.refuse, refused.Origin)
		assert.NotContains(t, err.Error(), "pass")
		assert.NotContains(t, err.Error(), "token=")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every credential the client sends is learnt by the Set it was given: the
// token, an App's JWT and its installation token, so that an echo of any
// of them can be redacted.
func TestClientRecordsSentCredentials(t *testing.T) {
	_, keyPEM := newKey(t)
	const installation = "ghs_recordedINSTALLATION0123456789"
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"token": installation,
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	for _, auth := range []struct {
		name string
		cfg  Config
		want int // credentials sent
	}{
		{"token", Config{BaseURL: srv.URL, Token: testToken}, 1},
		{"app", Config{BaseURL: srv.URL, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM}, 2},
	} {
		t.Run(auth.name, func(t *testing.T) {
			mu.Lock()
			sent = nil
			mu.Unlock()
			secrets := redact.New()
			auth.cfg.Secrets = secrets
			c, err := New(auth.cfg)
			require.NoError(t, err)
			res, err := c.DeleteRunner(context.Background(), orgScope, 1)
			require.NoError(t, err)
			assert.Equal(t, fleet.Deleted, res)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, sent, auth.want)
			for _, h := range sent {
				_, cred, ok := strings.Cut(h, " ")
				require.True(t, ok, h)
				assert.Equal(t, "echo [REDACTED].", secrets.String("echo "+cred+"."), "credential of %q", h)
			}
			if auth.name == "app" {
				assert.Equal(t, "token [REDACTED]", secrets.String("token "+installation))
			}
		})
	}
}

// The web host an ARC githubConfigUrl names, for each kind of GitHub.
func TestWebHost(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com/":             "github.com",
		"https://API.GitHub.com":              "github.com",
		"https://api.github.com:443/":         "github.com",
		"https://api.acme.ghe.com:443":        "acme.ghe.com",
		"https://ghes.example.com:443/api/v3": "ghes.example.com",
		"http://ghes.example.com:80/api/v3":   "ghes.example.com",
		"https://api.acme.ghe.com/":           "acme.ghe.com",
		"https://ghes.example.com/api/v3/":    "ghes.example.com",
		"https://ghes.example.com:8443/api/":  "ghes.example.com:8443",
		"http://127.0.0.1:39999/":             "127.0.0.1:39999",
		"not a url":                           "",
	} {
		assert.Equal(t, want, WebHost(api), api)
	}
}
