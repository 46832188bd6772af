package ghsim

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testAppID = 4242

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

func keyPEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// appClient is go-github over ghinstallation, as the reaper builds it for
// App auth: the installation token exchange goes to the sim too.
func appClient(t *testing.T, base string, key *rsa.PrivateKey) *github.Client {
	t.Helper()
	itr, err := ghinstallation.New(http.DefaultTransport, testAppID, 77, keyPEM(key))
	require.NoError(t, err)
	itr.BaseURL = strings.TrimSuffix(base, "/")
	c := github.NewClient(&http.Client{Transport: itr, Timeout: 10 * time.Second})
	u, err := url.Parse(base)
	require.NoError(t, err)
	c.BaseURL = u
	return c
}

// TestAppTokenExchangeGhinstallation runs the real App flow: with the
// App's key the installation token is minted and accepted; with another
// key the exchange is refused and no runner request is made.
func TestAppTokenExchangeGhinstallation(t *testing.T) {
	key := rsaKey(t)
	other := rsaKey(t)
	tests := []struct {
		name    string
		signer  *rsa.PrivateKey
		wantErr bool
		want    []Request // method, path, status
	}{
		{"the App's key", key, false, []Request{
			{Method: "POST", Path: "/app/installations/77/access_tokens", Status: 201, Endpoint: EndpointToken},
			{Method: "GET", Path: "/orgs/acme/actions/runners", Status: 200, Endpoint: EndpointList, Scope: "org:acme"},
			{Method: "GET", Path: "/orgs/acme/actions/runners", Status: 200, Endpoint: EndpointList, Scope: "org:acme"},
		}},
		{"another key", other, true, []Request{
			{Method: "POST", Path: "/app/installations/77/access_tokens", Status: 401, Endpoint: EndpointToken},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{AppID: testAppID, AppKey: &key.PublicKey})
			addRunners(s, "org:acme", "r", 2)
			c := appClient(t, base, tt.signer)
			for i := 0; i < 2; i++ { // the second list reuses the token
				list, _, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", nil)
				if tt.wantErr {
					require.Error(t, err)
					break
				}
				require.NoError(t, err)
				assert.Equal(t, 2, list.TotalCount)
			}
			var got []Request
			for _, r := range s.Requests() {
				got = append(got, Request{Method: r.Method, Path: r.Path, Status: r.Status, Endpoint: r.Endpoint, Scope: r.Scope})
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// signJWT builds an RS256 JWT by hand, so that each claim GitHub checks can
// be got wrong on purpose.
func signJWT(t *testing.T, k *rsa.PrivateKey, alg string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	require.NoError(t, err)
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestAppJWTChecks exchanges hand-made JWTs: each of GitHub's checks
// refuses with 401, a good one gives a 201 with a ghs_ token that expires
// in an hour, works on org and repo scopes, is refused on an enterprise
// scope, and stops working when it expires.
func TestAppJWTChecks(t *testing.T) {
	key := rsaKey(t)
	other := rsaKey(t)
	clock := newFakeClock()
	now := clock.Now().Unix()
	good := map[string]any{"iss": "4242", "iat": now - 30, "exp": now + 90}

	tests := []struct {
		name   string
		jwt    string
		status int
		msg    string
	}{
		{"good, iss a string", signJWT(t, key, "RS256", good), 201, ""},
		{"good, iss a number", signJWT(t, key, "RS256", map[string]any{"iss": 4242, "iat": now, "exp": now + 600}), 201, ""},
		{"another key", signJWT(t, other, "RS256", good), 401, "A JSON web token could not be decoded"},
		{"another app", signJWT(t, key, "RS256", map[string]any{"iss": "1", "iat": now, "exp": now + 60}), 401, "Integration not found"},
		{"expired", signJWT(t, key, "RS256", map[string]any{"iss": "4242", "iat": now - 700, "exp": now - 100}), 401, "'Expiration time'"},
		{"exp too far", signJWT(t, key, "RS256", map[string]any{"iss": "4242", "iat": now, "exp": now + 3600}), 401, "too far in the future"},
		{"iat in the future", signJWT(t, key, "RS256", map[string]any{"iss": "4242", "iat": now + 300, "exp": now + 400}), 401, "'Issued at'"},
		{"alg none", signJWT(t, key, "none", good), 401, "could not be decoded"},
		{"garbage", "not.a.jwt", 401, "could not be decoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{AppID: testAppID, AppKey: &key.PublicKey, Now: clock.Now})
			resp, body := do(t, http.MethodPost, base, "/app/installations/9/access_tokens", "", map[string]string{"Authorization": "Bearer " + tt.jwt})
			assert.Equal(t, tt.status, resp.StatusCode, "%s", body)
			m := decodeMap(t, body)
			if tt.status != 201 {
				assert.Contains(t, m["message"], tt.msg)
				return
			}
			tok, _ := m["token"].(string)
			assert.True(t, strings.HasPrefix(tok, "ghs_"), tok)
			exp, err := time.Parse(time.RFC3339, m["expires_at"].(string))
			require.NoError(t, err)
			assert.Equal(t, clock.Now().Add(time.Hour).Unix(), exp.Unix())
			assert.Equal(t, 5000, s.RateRemaining(), "the exchange spends no core budget")
		})
	}

	t.Run("the minted token's reach and expiry", func(t *testing.T) {
		clock := newFakeClock()
		now := clock.Now().Unix()
		s, base := startSim(t, Options{Token: testToken, AppID: testAppID, AppKey: &key.PublicKey, Now: clock.Now})
		for _, sc := range []string{"org:acme", "repo:acme/web", "enterprise:big"} {
			addRunners(s, sc, "r", 1)
		}
		jwt := signJWT(t, key, "RS256", map[string]any{"iss": "4242", "iat": now, "exp": now + 60})
		resp, body := do(t, http.MethodPost, base, "/app/installations/9/access_tokens", "", map[string]string{"Authorization": "Bearer " + jwt})
		require.Equal(t, 201, resp.StatusCode)
		tok := decodeMap(t, body)["token"].(string)

		for path, want := range map[string]int{
			"/orgs/acme/actions/runners":       200,
			"/repos/acme/web/actions/runners":  200,
			"/enterprises/big/actions/runners": 403,
		} {
			resp, body := do(t, http.MethodGet, base, path, tok, nil)
			assert.Equal(t, want, resp.StatusCode, "%s: %s", path, body)
		}
		resp, _ = do(t, http.MethodGet, base, "/enterprises/big/actions/runners", testToken, nil)
		assert.Equal(t, 200, resp.StatusCode, "the PAT still reaches the enterprise")

		resp, _ = do(t, http.MethodGet, base, "/orgs/acme/actions/runners", "", map[string]string{"Authorization": "Bearer " + jwt})
		assert.Equal(t, 401, resp.StatusCode, "a JWT is not an API credential")

		clock.Advance(time.Hour)
		resp, body = do(t, http.MethodGet, base, "/orgs/acme/actions/runners", tok, nil)
		assert.Equal(t, 401, resp.StatusCode, "the token expired")
		assert.Equal(t, "Bad credentials", decodeMap(t, body)["message"])
	})

	t.Run("no App configured", func(t *testing.T) {
		_, base := startSim(t, Options{})
		resp, _ := do(t, http.MethodPost, base, "/app/installations/9/access_tokens", "", map[string]string{"Authorization": "Bearer " + signJWT(t, key, "RS256", good)})
		assert.Equal(t, 404, resp.StatusCode)
	})
}

// TestAppErrorSurface checks ghinstallation reports the refused exchange as
// its *HTTPError carrying the 401, which is how the reaper tells a broken
// key from a GitHub outage.
func TestAppErrorSurface(t *testing.T) {
	key := rsaKey(t)
	_, base := startSim(t, Options{AppID: testAppID, AppKey: &key.PublicKey})
	_, _, err := appClient(t, base, rsaKey(t)).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	var he *ghinstallation.HTTPError
	require.True(t, errors.As(err, &he), "got %T: %v", err, err)
	require.NotNil(t, he.Response)
	assert.Equal(t, http.StatusUnauthorized, he.Response.StatusCode)
}
