package ghclient

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
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/httpcount"
)

const (
	testAppID          = 12345
	testInstallationID = 678
)

// newKey makes an RSA key and its PEM form, as GitHub hands it out.
func newKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// verifyAppJWT checks an App JWT the way GitHub does: RS256 signed by the
// App's key, issued by the App, not expired. It is written against the JWT
// format itself rather than the library that signs, so that the test does
// not grade the library with its own answers.
func verifyAppJWT(token string, pub *rsa.PublicKey, appID int64) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
		Iat int64  `json:"iat"`
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	if claims.Iss != strconv.FormatInt(appID, 10) {
		return fmt.Errorf("iss %q", claims.Iss)
	}
	if now := time.Now().Unix(); claims.Exp < now || claims.Iat > now+60 {
		return fmt.Errorf("iat %d exp %d outside now %d", claims.Iat, claims.Exp, now)
	}
	return nil
}

// fakeApp is GitHub's installation token exchange and a runner list that
// accepts only the token the exchange handed out.
type fakeApp struct {
	pub       *rsa.PublicKey
	mu        sync.Mutex
	exchanges int
	listAuth  []string
}

func (f *fakeApp) register(mux *http.ServeMux, prefix string) {
	mux.HandleFunc(fmt.Sprintf("POST %s/app/installations/%d/access_tokens", prefix, testInstallationID), func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.exchanges++
		f.mu.Unlock()
		jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
			return
		}
		if err := verifyAppJWT(jwt, f.pub, testAppID); err != nil {
			http.Error(w, `{"message":"'Issuer' claim ('iss') must be an Integer"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token":      "ghs_x",
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	})
	mux.HandleFunc("GET "+prefix+"/orgs/octo/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		f.mu.Lock()
		f.listAuth = append(f.listAuth, auth)
		f.mu.Unlock()
		if auth != "token ghs_x" && auth != "Bearer ghs_x" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"total_count":1,"runners":[{"id":7,"name":"rr-app","os":"linux","status":"online","busy":false,"labels":[]}]}`))
	})
}

func TestAppAuth(t *testing.T) {
	key, keyPEM := newKey(t)
	_, otherPEM := newKey(t)
	tests := []struct {
		name string
		// prefix is where the API lives on the server: the root for a
		// simulator, /api/v3 for GHES.
		prefix string
		pem    []byte
		wantOK bool
	}{
		{name: "at the root", prefix: "", pem: keyPEM, wantOK: true},
		{name: "GHES path", prefix: "/api/v3", pem: keyPEM, wantOK: true},
		{name: "wrong key", prefix: "", pem: otherPEM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := &fakeApp{pub: &key.PublicKey}
			mux := http.NewServeMux()
			app.register(mux, tc.prefix)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c, err := New(Config{
				BaseURL:        srv.URL + tc.prefix + "/",
				AppID:          testAppID,
				InstallationID: testInstallationID,
				PrivateKey:     tc.pem,
				Timeout:        5 * time.Second,
			})
			require.NoError(t, err)
			ctx := context.Background()

			got, cache, err := c.ListRunners(ctx, orgScope, nil)
			if !tc.wantOK {
				require.Error(t, err)
				t.Logf("error: %v", err)
				assert.Nil(t, cache)
				assert.False(t, isRateLimited(err))
				assert.Empty(t, app.listAuth, "no list request without a token")
				assert.Equal(t, httpcount.Counts{Requests: 1}, requestCounts(c), "the refused exchange is counted")
				for _, secret := range []string{string(tc.pem), "PRIVATE KEY"} {
					assert.NotContains(t, err.Error(), secret)
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, "rr-app", got[0].Name)
			assert.Equal(t, []string{"token ghs_x"}, app.listAuth)

			// The installation token is reused until it nears expiry.
			_, _, err = c.ListRunners(ctx, orgScope, nil)
			require.NoError(t, err)
			assert.Equal(t, 1, app.exchanges)
			assert.Equal(t, httpcount.Counts{Requests: 3}, requestCounts(c), "one exchange and two lists")
		})
	}
}

func TestAppTokenExchangeRateLimited(t *testing.T) {
	_, keyPEM := newKey(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, `{"message":"secondary rate limit"}`, http.StatusTooManyRequests)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM})
	require.NoError(t, err)
	_, _, err = c.ListRunners(context.Background(), orgScope, nil)
	require.Error(t, err)
	assert.True(t, isRateLimited(err), "a rate-limited exchange is a rate limit: %v", err)
}

func TestAppTokenExchangeTimeout(t *testing.T) {
	_, keyPEM := newKey(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		// ghinstallation sends a body ("null"); the server notices the
		// client hanging up only once the body has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, AppID: testAppID, InstallationID: testInstallationID, PrivateKey: keyPEM, Timeout: 150 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	_, _, err = c.ListRunners(context.Background(), orgScope, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second, "the exchange runs under the request's timeout")
}
