package redact

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

const (
	token = "ghp_0123456789abcdefABCDEF0123456789abcd"
	// jwt has the shape of an App JWT: three base64url parts.
	jwt          = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
	installation = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
)

func TestString(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		text    string
		want    string
	}{
		{name: "no secrets", text: "list runners: 500", want: "list runners: 500"},
		{name: "token", secrets: []string{token}, text: "GET /orgs/acme: 400 headers: Authorization: Bearer " + token + "; Accept: */*",
			want: "GET /orgs/acme: 400 headers: Authorization: Bearer [REDACTED]; Accept: */*"},
		{name: "every occurrence", secrets: []string{token}, text: token + " and " + token + token,
			want: "[REDACTED] and [REDACTED]"},
		{name: "jwt and installation token", secrets: []string{jwt, installation},
			text: "exchange: Bearer " + jwt + "; list: token " + installation,
			want: "exchange: Bearer [REDACTED]; list: token [REDACTED]"},
		{name: "overlapping secrets leave no piece of either", secrets: []string{"abcdefgh1234", "1234ijklmnop"},
			text: "x abcdefgh1234ijklmnop y", want: "x [REDACTED] y"},
		{name: "one secret inside another", secrets: []string{"inner-secret", "outer-inner-secret-tail"},
			text: "outer-inner-secret-tail and inner-secret", want: "[REDACTED] and [REDACTED]"},
		{name: "self-overlapping occurrences", secrets: []string{"aaaaaaaa"}, text: "aaaaaaaaaaa!", want: "[REDACTED]!"},
		{name: "adjacent secrets", secrets: []string{"first-secret", "second-secret"}, text: "first-secretsecond-secret",
			want: "[REDACTED]"},
		{name: "short strings are ignored", secrets: []string{"Aw==", "token", "", "  ", "1234567"},
			text: "token 1234567 Aw==", want: "token 1234567 Aw=="},
		{name: "surrounding space is trimmed", secrets: []string{"  " + token + "\n"}, text: "[" + token + "]", want: "[[REDACTED]]"},
		{name: "empty text", secrets: []string{token}, text: "", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.secrets...)
			assert.Equal(t, tc.want, s.String(tc.text))
		})
	}
}

func TestPEMLines(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	lines := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")
	require.Greater(t, len(lines), 3)

	for _, crlf := range []bool{false, true} {
		t.Run(fmt.Sprintf("crlf=%v", crlf), func(t *testing.T) {
			in := keyPEM
			if crlf {
				in = bytes.ReplaceAll(keyPEM, []byte("\n"), []byte("\r\n"))
			}
			s := New()
			s.AddPEM(in)
			// The whole key, and each line quoted alone.
			whole := s.String("parse key: " + string(in))
			for _, l := range lines {
				if len(l) < MinLen {
					continue // a short last body line is no secret alone
				}
				assert.NotContains(t, whole, l)
				assert.Equal(t, "line: [REDACTED] end", s.String("line: "+l+" end"), "line %q", l)
			}
			assert.NotContains(t, whole, "PRIVATE KEY")
			assert.True(t, strings.HasPrefix(whole, "parse key: [REDACTED]"), whole)
		})
	}
}

func TestAddAuthorization(t *testing.T) {
	tests := []struct{ header, secret string }{
		{"Bearer " + jwt, jwt},
		{"token " + installation, installation},
		{"Bearer " + token, token},
		{token, token},
	}
	for _, tc := range tests {
		s := New()
		s.AddAuthorization(tc.header)
		assert.Equal(t, "echo: [REDACTED]", s.String("echo: "+tc.secret), tc.header)
		// The scheme alone is not a secret.
		assert.Equal(t, "Bearer token", s.String("Bearer token"))
	}
}

func TestNilSetRedactsNothing(t *testing.T) {
	var s *Set
	s.Add(token)
	s.AddPEM([]byte("-----BEGIN RSA PRIVATE KEY-----"))
	assert.Equal(t, token, s.String(token))
	assert.Zero(t, s.Len())
	err := errors.New(token)
	assert.Same(t, err, s.Error(err))
}

func TestError(t *testing.T) {
	s := New(token)
	assert.NoError(t, s.Error(nil))

	plain := errors.New("no secret here")
	assert.Same(t, plain, s.Error(plain), "an error without a secret is returned as is")

	wrapped := fmt.Errorf("list runners for org:acme: %w: echoed %s", fs.ErrNotExist, token)
	got := s.Error(wrapped)
	assert.Equal(t, "list runners for org:acme: file does not exist: echoed [REDACTED]", got.Error())
	assert.ErrorIs(t, got, fs.ErrNotExist, "redaction keeps the chain")
}

func TestValue(t *testing.T) {
	s := New(token)
	type payload struct {
		Reason string `json:"reason"`
	}
	got := s.Value(map[string]any{
		"status":         3,
		"error":          "list failed: " + token,
		"scopes_skipped": []string{"org:acme", token},
		"results":        map[string]any{"deleted": 1, "note": token},
		"list":           []any{token, 2.5, true},
		"err":            errors.New("boom " + token),
		"struct":         payload{Reason: "echo " + token},
		"clean":          payload{Reason: "fine"},
	})
	assert.Equal(t, map[string]any{
		"status":         3,
		"error":          "list failed: [REDACTED]",
		"scopes_skipped": []string{"org:acme", "[REDACTED]"},
		"results":        map[string]any{"deleted": 1, "note": "[REDACTED]"},
		"list":           []any{"[REDACTED]", 2.5, true},
		"err":            "boom [REDACTED]",
		"struct":         `{"reason":"echo [REDACTED]"}`,
		"clean":          payload{Reason: "fine"},
	}, got)
}

func TestHandler(t *testing.T) {
	s := New(token, jwt)
	var buf bytes.Buffer
	log := slog.New(s.Handler(slog.NewJSONHandler(&buf, nil)))

	log = log.With(slog.String("preset", "with "+jwt))
	log.WithGroup("g").Warn("scope skipped: "+token,
		slog.String("reason", "400 Authorization: Bearer "+token),
		slog.Any("error", fmt.Errorf("wrapped: %s", jwt)),
		slog.Group("inner", slog.String("deep", token), slog.Int("n", 7)),
		slog.Any("list", []string{token}),
		slog.Any("valuer", valuer{token}),
		slog.Bool("dry_run", true),
	)
	out := buf.String()
	assert.NotContains(t, out, token)
	assert.NotContains(t, out, jwt)

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), out)
	assert.Equal(t, "scope skipped: [REDACTED]", line["msg"])
	assert.Equal(t, "with [REDACTED]", line["preset"])
	g := line["g"].(map[string]any)
	assert.Equal(t, "400 Authorization: Bearer [REDACTED]", g["reason"])
	assert.Equal(t, "wrapped: [REDACTED]", g["error"])
	assert.Equal(t, map[string]any{"deep": "[REDACTED]", "n": 7.0}, g["inner"])
	assert.Equal(t, []any{"[REDACTED]"}, g["list"])
	assert.Equal(t, "valued [REDACTED]", g["valuer"])
	assert.Equal(t, true, g["dry_run"])

	// Level filtering is the wrapped handler's.
	buf.Reset()
	log.Debug("quiet " + token)
	assert.Empty(t, buf.String())
}

// valuer is a LogValuer, resolved before redaction.
type valuer struct{ secret string }

func (v valuer) LogValue() slog.Value { return slog.StringValue("valued " + v.secret) }

// Secrets learnt while lines are written (the GitHub client records each
// credential it sends) are safe to add concurrently.
func TestConcurrentUse(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.Add(fmt.Sprintf("secret-number-%02d", i))
		}()
		go func() {
			defer wg.Done()
			_ = s.String("secret-number-00 secret-number-07")
		}()
	}
	wg.Wait()
	assert.Equal(t, 8, s.Len())
	assert.Equal(t, "[REDACTED] [REDACTED]", s.String("secret-number-00 secret-number-07"))
}

// A secret is redacted in the form it takes once escaped too: the audit
// escapes each field before the whole table is redacted, and a secret
// pasted with a byte-order mark or a stray control character must not
// survive that order.
func TestEscapedSecretIsRedacted(t *testing.T) {
	secret := "\ufeffghp_0123456789abcdefghijABCDEFGHIJklmnop"
	s := New(secret)
	escaped := safetext.String("401, you sent: token " + secret)
	assert.Equal(t, `401, you sent: token `+Marker, s.String(escaped))
	assert.Equal(t, `401, you sent: token `+Marker, s.String("401, you sent: token "+secret))
}
