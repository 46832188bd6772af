package ghsim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GitHub's bounds on an App JWT: it may be valid for at most ten minutes,
// and clocks may drift by about a minute.
const (
	jwtMaxLifetime = 10 * time.Minute
	jwtLeeway      = time.Minute
	tokenLifetime  = time.Hour
)

// tokenExchange serves POST /app/installations/{id}/access_tokens: a JWT
// signed by the App's key buys an installation token good for an hour. It
// spends none of the core budget (GitHub counts JWT requests apart).
func (s *Sim) tokenExchange(r *http.Request, rt route) reply {
	if !s.appConfigured() {
		return s.errorReply(http.StatusNotFound, "Not Found", docsREST, false)
	}
	scheme, jwt, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "bearer") || jwt == "" {
		return s.errorReply(http.StatusUnauthorized, "A JSON web token could not be decoded", docsAppToken, false)
	}
	s.mu.Lock()
	s.jwts = append(s.jwts, strings.TrimSpace(jwt))
	s.mu.Unlock()
	if err := s.verifyJWT(strings.TrimSpace(jwt)); err != nil {
		return s.errorReply(http.StatusUnauthorized, err.Error(), docsAppToken, false)
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return s.errorReply(http.StatusInternalServerError, "Server Error", docsREST, false)
	}
	token := "ghs_" + hex.EncodeToString(raw)
	now := s.now()
	expires := now.Add(tokenLifetime).UTC().Truncate(time.Second)

	s.mu.Lock()
	defer s.mu.Unlock()
	for t, exp := range s.tokens { // forget expired tokens so the map stays small
		if !now.Before(exp) {
			delete(s.tokens, t)
		}
	}
	s.tokens[token] = expires
	s.issued = append(s.issued, token)
	body, _ := json.Marshal(map[string]any{
		"token":                token,
		"expires_at":           expires.Format(time.RFC3339),
		"permissions":          map[string]string{"organization_self_hosted_runners": "write", "administration": "write"},
		"repository_selection": "all",
	})
	rep := reply{status: http.StatusCreated, body: body, header: http.Header{}}
	s.rateHeadersLocked(rep.header)
	return rep
}

// verifyJWT checks an RS256 JWT as GitHub does for an App: signature by the
// App's key, iss naming the App (a string, as ghinstallation sends it, or a
// number), exp in the future but at most ten minutes away, iat not in the
// future. Messages are GitHub's where it has one.
func (s *Sim) verifyJWT(tok string) error {
	undecodable := errors.New("A JSON web token could not be decoded") //nolint:staticcheck // GitHub's own message, as it words it
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return undecodable
	}
	var head struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &head); err != nil || head.Alg != "RS256" {
		return undecodable
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return undecodable
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(s.opts.AppKey, crypto.SHA256, sum[:], sig) != nil {
		return undecodable
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat *float64        `json:"iat"`
		Exp *float64        `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return undecodable
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(s.opts.AppID, 10) {
		return errors.New("Integration not found") //nolint:staticcheck // GitHub's own message, as it words it
	}
	now := s.now()
	if claims.Exp == nil || !time.Unix(int64(*claims.Exp), 0).After(now) {
		return errors.New("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	}
	if time.Unix(int64(*claims.Exp), 0).After(now.Add(jwtMaxLifetime + jwtLeeway)) {
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	}
	if claims.Iat == nil || time.Unix(int64(*claims.Iat), 0).After(now.Add(jwtLeeway)) {
		return errors.New("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
