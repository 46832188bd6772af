package ghsim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// send is do with a body and a full Authorization header.
func send(t *testing.T, method, url, auth string, body any) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func basic(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("github:"+token))
}

// register runs ARC's two GitHub calls for scope's config URL, as ARC's
// client does for a GHES-style URL (under /api/v3), and returns the
// Actions service's URL and admin token.
func register(t *testing.T, base, scope string) (svc, admin string) {
	t.Helper()
	cfg, err := ConfigURL(base, scope)
	require.NoError(t, err)
	kind, rest, _ := strings.Cut(scope, ":")
	path := map[string]string{"org": "/orgs/", "repo": "/repos/", "enterprise": "/enterprises/"}[kind] + rest
	resp, body := send(t, http.MethodPost, strings.TrimSuffix(base, "/")+"/api/v3"+path+"/actions/runners/registration-token", basic(testToken), nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var rt struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	require.NoError(t, json.Unmarshal(body, &rt))
	resp, body = send(t, http.MethodPost, strings.TrimSuffix(base, "/")+"/api/v3/actions/runner-registration", "RemoteAuth "+rt.Token,
		map[string]string{"url": cfg, "runner_event": "register"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var conn struct{ URL, Token string }
	require.NoError(t, json.Unmarshal(body, &conn))
	return conn.URL, conn.Token
}

// TestRegistrationToken checks the registration token's paths, credentials
// and scopes.
func TestRegistrationToken(t *testing.T) {
	tests := []struct {
		name, path, auth string
		method           string
		want             int
	}{
		{"org, GHES path, Basic PAT", "/api/v3/orgs/acme/actions/runners/registration-token", basic(testToken), "", 201},
		{"org, root path, token scheme", "/orgs/acme/actions/runners/registration-token", "token " + testToken, "", 201},
		{"repo", "/api/v3/repos/acme/web/actions/runners/registration-token", basic(testToken), "", 201},
		{"enterprise", "/api/v3/enterprises/big/actions/runners/registration-token", basic(testToken), "", 201},
		{"wrong PAT", "/api/v3/orgs/acme/actions/runners/registration-token", basic("nope"), "", 401},
		{"no credentials", "/api/v3/orgs/acme/actions/runners/registration-token", "", "", 401},
		{"unknown org", "/api/v3/orgs/nobody/actions/runners/registration-token", basic(testToken), "", 404},
		{"GET is not served", "/api/v3/orgs/acme/actions/runners/registration-token", basic(testToken), http.MethodGet, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			s.AddScope("org:acme")
			s.AddScope("repo:acme/web")
			s.AddScope("enterprise:big")
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			resp, body := send(t, method, strings.TrimSuffix(base, "/")+tt.path, tt.auth, nil)
			require.Equal(t, tt.want, resp.StatusCode, string(body))
			if tt.want == 201 {
				m := decodeMap(t, body)
				assert.NotEmpty(t, m["token"])
				exp, err := time.Parse(time.RFC3339, m["expires_at"].(string))
				require.NoError(t, err)
				assert.WithinDuration(t, time.Now().Add(time.Hour), exp, time.Minute)
			}
			reqs := s.Requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, tt.want, reqs[0].Status)
			if tt.method == "" {
				assert.Equal(t, 1, s.RequestCount(EndpointRegistrationToken, tt.want))
			}
		})
	}
}

// TestRunnerRegistration checks the trade of a registration token for the
// Actions service's URL and a JWT-shaped admin token with an exp claim.
func TestRunnerRegistration(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	s.AddScope("org:acme")
	s.AddScope("org:other")
	svc, admin := register(t, base, "org:acme")
	assert.Equal(t, strings.TrimSuffix(base, "/")+"/_actions/org/acme/", svc)
	parts := strings.Split(admin, ".")
	require.Len(t, parts, 3)
	var claims struct{ Exp int64 }
	require.NoError(t, decodeSegment(parts[1], &claims))
	assert.WithinDuration(t, time.Now().Add(time.Hour), time.Unix(claims.Exp, 0), time.Minute)

	// A registration token is good for its own scope only, and only with
	// RemoteAuth.
	resp, body := send(t, http.MethodPost, strings.TrimSuffix(base, "/")+"/api/v3/orgs/acme/actions/runners/registration-token", basic(testToken), nil)
	require.Equal(t, 201, resp.StatusCode)
	tok := decodeMap(t, body)["token"].(string)
	other, _ := ConfigURL(base, "org:other")
	own, _ := ConfigURL(base, "org:acme")
	for _, tt := range []struct {
		name, auth, url string
		want            int
	}{
		{"another scope's URL", "RemoteAuth " + tok, other, 401},
		{"Bearer is not RemoteAuth", "Bearer " + tok, own, 401},
		{"unknown token", "RemoteAuth AAAA", own, 401},
		{"unparseable URL", "RemoteAuth " + tok, "http://x/a/b/c", 404},
		{"own scope", "RemoteAuth " + tok, own, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := send(t, http.MethodPost, strings.TrimSuffix(base, "/")+"/actions/runner-registration", tt.auth,
				map[string]string{"url": tt.url, "runner_event": "register"})
			assert.Equal(t, tt.want, resp.StatusCode, string(body))
		})
	}
}

// TestActionsAgents checks the Actions service's agents against the REST
// API's runners: one store, one id, and the exceptions ARC reads.
func TestActionsAgents(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	s.AddScope("org:acme")
	svc, admin := register(t, base, "org:acme")
	bearer := "Bearer " + admin
	agents := svc + "_apis/distributedtask/pools/0/agents"
	jit := svc + "_apis/runtime/runnerscalesets/7/generatejitconfig?api-version=6.0-preview"

	resp, body := send(t, http.MethodPost, jit, bearer, map[string]string{"name": "arc-r1", "workFolder": "_work"})
	require.Equal(t, 200, resp.StatusCode, string(body))
	var cfg struct {
		Runner struct {
			ID               int64  `json:"id"`
			Name             string `json:"name"`
			RunnerScaleSetID int64  `json:"runnerScaleSetId"`
		} `json:"runner"`
		EncodedJITConfig string `json:"encodedJITConfig"`
	}
	require.NoError(t, json.Unmarshal(body, &cfg))
	id := cfg.Runner.ID
	assert.Equal(t, "arc-r1", cfg.Runner.Name)
	assert.EqualValues(t, 7, cfg.Runner.RunnerScaleSetID)
	assert.NotEmpty(t, cfg.EncodedJITConfig)
	// The REST API lists the same runner under the same id: registered,
	// not yet connected.
	rest := s.Runners("org:acme")
	require.Len(t, rest, 1)
	assert.Equal(t, Runner{ID: id, Name: "arc-r1", OS: "linux", Status: "offline", Ephemeral: true, Version: DefaultRunnerVersion}, rest[0])
	ss, ok := s.ScaleSetOf(id)
	assert.True(t, ok)
	assert.EqualValues(t, 7, ss)
	busy := s.AddRunner("org:acme", Runner{Name: "busy-one", Busy: true})

	idURL := func(id int64) string { return agents + "/" + itoa(id) + "?api-version=6.0-preview" }
	tests := []struct {
		name, method, url, auth string
		body                    any
		want                    int
		typeName                string // the exception, when one is answered
		check                   func(t *testing.T, body []byte)
	}{
		{"name taken", http.MethodPost, jit, bearer, map[string]string{"name": "arc-r1"}, 409, ExceptionAgentExists, nil},
		{"get by id", http.MethodGet, idURL(id), bearer, nil, 200, "", func(t *testing.T, b []byte) {
			m := decodeMap(t, b)
			assert.EqualValues(t, id, m["id"])
			assert.Equal(t, "arc-r1", m["name"])
			assert.EqualValues(t, 7, m["runnerScaleSetId"])
		}},
		{"get by name", http.MethodGet, agents + "?agentName=arc-r1&api-version=6.0-preview", bearer, nil, 200, "", func(t *testing.T, b []byte) {
			m := decodeMap(t, b)
			assert.EqualValues(t, 1, m["count"])
			assert.EqualValues(t, id, m["value"].([]any)[0].(map[string]any)["id"])
		}},
		{"get by unknown name", http.MethodGet, agents + "?agentName=nope", bearer, nil, 200, "", func(t *testing.T, b []byte) {
			assert.Equal(t, map[string]any{"count": float64(0), "value": []any{}}, decodeMap(t, b))
		}},
		{"get missing", http.MethodGet, idURL(9999), bearer, nil, 404, ExceptionAgentNotFound, nil},
		{"no admin token", http.MethodGet, idURL(id), "", nil, 401, exceptionUnauthorized, nil},
		{"a PAT is no admin token", http.MethodGet, idURL(id), "Bearer " + testToken, nil, 401, exceptionUnauthorized, nil},
		{"another scope's path", http.MethodGet, strings.Replace(idURL(id), "/org/acme/", "/org/other/", 1), bearer, nil, 401, exceptionUnauthorized, nil},
		{"unknown service path", http.MethodGet, svc + "_apis/nothing", bearer, nil, 404, "", nil},
		{"delete busy", http.MethodDelete, idURL(busy.ID), bearer, nil, 400, ExceptionJobStillRunning, nil},
		{"delete missing", http.MethodDelete, idURL(9999), bearer, nil, 404, ExceptionAgentNotFound, nil},
		{"delete", http.MethodDelete, idURL(id), bearer, nil, 204, "", func(t *testing.T, _ []byte) {
			_, ok := s.RunnerByName("org:acme", "arc-r1")
			assert.False(t, ok, "removed from the REST API's list too")
		}},
		{"delete again", http.MethodDelete, idURL(id), bearer, nil, 404, ExceptionAgentNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := send(t, tt.method, tt.url, tt.auth, tt.body)
			require.Equal(t, tt.want, resp.StatusCode, string(body))
			if tt.typeName != "" {
				m := decodeMap(t, body)
				assert.Equal(t, tt.typeName, m["typeName"])
				assert.NotEmpty(t, m["message"])
				assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
			}
			if tt.want == 204 {
				assert.Empty(t, body)
			}
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
	assert.Equal(t, 2, s.RequestCount(EndpointAgentDelete, 404))
	assert.Equal(t, 1, s.RequestCount(EndpointAgentDelete, 204))
	assert.Equal(t, 2, s.RequestCount(EndpointGenerateJIT, 0))

	// A runner GitHub removed by itself (or a REST DELETE) is gone from
	// the service; with the switch on, its DELETE answers 204.
	r2 := s.AddRunner("org:acme", Runner{Name: "gone"})
	require.True(t, s.RemoveRunner("org:acme", r2.ID))
	resp, _ = send(t, http.MethodGet, idURL(r2.ID), bearer, nil)
	assert.Equal(t, 404, resp.StatusCode)
	s.SetRemoveMissingAgentAsDone(true)
	resp, body = send(t, http.MethodDelete, idURL(r2.ID), bearer, nil)
	assert.Equal(t, 204, resp.StatusCode, string(body))
	resp, _ = send(t, http.MethodDelete, idURL(busy.ID), bearer, nil)
	assert.Equal(t, 400, resp.StatusCode, "a busy runner still refuses")
	s.SetRemoveMissingAgentAsDone(false)
	resp, _ = send(t, http.MethodDelete, idURL(r2.ID), bearer, nil)
	assert.Equal(t, 404, resp.StatusCode)
}

// TestActionsFaultAndOption checks that faults arm on the scale-set
// endpoints and that Options.RemoveMissingAgentAsDone sets the switch.
func TestActionsFaultAndOption(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken, RemoveMissingAgentAsDone: true})
	s.AddScope("org:acme")
	svc, admin := register(t, base, "org:acme")
	url := svc + "_apis/distributedtask/pools/0/agents/42"
	resp, _ := send(t, http.MethodDelete, url, "Bearer "+admin, nil)
	assert.Equal(t, 204, resp.StatusCode)
	s.Fault("org:acme", EndpointAgentDelete, Fault{Status: 503, Times: 1})
	resp, _ = send(t, http.MethodDelete, url, "Bearer "+admin, nil)
	assert.Equal(t, 503, resp.StatusCode)
	resp, _ = send(t, http.MethodDelete, url, "Bearer "+admin, nil)
	assert.Equal(t, 204, resp.StatusCode)
}

// TestConfigURL checks the githubConfigUrl for each kind of scope.
func TestConfigURL(t *testing.T) {
	for scope, want := range map[string]string{
		"org:Acme":       "http://h:1/acme",
		"repo:acme/web":  "http://h:1/acme/web",
		"enterprise:big": "http://h:1/enterprises/big",
	} {
		got, err := ConfigURL("http://h:1/", scope)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		back, ok := scopeOfConfigURL(got)
		assert.True(t, ok)
		key, _ := normScope(scope)
		assert.Equal(t, key, back)
	}
	_, err := ConfigURL("http://h:1/", "team:x")
	assert.Error(t, err)
}
