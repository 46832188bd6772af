// Package redact keeps credentials out of everything the process says. A
// hostile or merely chatty server can echo a request's headers into an error
// body, and that body travels on into error texts; rather than trusting every
// path an error can take, the few places where text leaves the process (log
// lines, Kubernetes Events, the Lambda's answer, start-up errors) pass it
// through one Set that knows every secret the process holds or has sent.
package redact

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// Marker replaces every occurrence of a secret.
const Marker = "[REDACTED]"

// MinLen is the shortest secret a Set accepts. Shorter strings are ignored:
// a real credential is never that short, and replacing every "Aw==" or
// "token" in a text would shred it without protecting anything.
const MinLen = 8

// Set is the process's set of secrets. The zero value and a nil *Set are
// usable: a nil Set redacts nothing, so that a part built without one (a
// narrow test) still works. It is safe for concurrent use: the GitHub
// client adds the credentials it sends while log lines are being written.
type Set struct {
	mu      sync.RWMutex
	secrets map[string]struct{}
}

// New returns a Set holding secrets.
func New(secrets ...string) *Set {
	s := &Set{}
	s.Add(secrets...)
	return s
}

// Add remembers secrets, ignoring those shorter than MinLen once
// surrounding white space is trimmed.
func (s *Set) Add(secrets ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range secrets {
		v = strings.TrimSpace(v)
		if len(v) < MinLen {
			continue
		}
		if s.secrets == nil {
			s.secrets = map[string]struct{}{}
		}
		s.secrets[v] = struct{}{}
		// And as it reads once shown escaped (safetext): a text that
		// was escaped before it was redacted (the audit table's fields)
		// must still lose it.
		if e := safetext.String(v); e != v {
			s.secrets[e] = struct{}{}
		}
	}
}

// AddPEM remembers every line of a PEM private key: its BEGIN and END
// lines and each base64 line of the body, so that no fragment of the key
// survives in a text that quotes it whole or in part.
func (s *Set) AddPEM(pemBytes []byte) {
	s.Add(strings.Split(strings.ReplaceAll(string(pemBytes), "\r\n", "\n"), "\n")...)
}

// AddAuthorization remembers the credential of an Authorization header
// value ("Bearer X", "token X" or a bare X): the part that is secret.
func (s *Set) AddAuthorization(value string) {
	value = strings.TrimSpace(value)
	if _, cred, ok := strings.Cut(value, " "); ok {
		value = cred
	}
	s.Add(value)
}

// Len is how many secrets the Set holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.secrets)
}

// String returns text with every occurrence of every secret replaced by
// Marker. Where secrets overlap in the text, the whole stretch they cover
// becomes one Marker, so that no piece of either survives.
func (s *Set) String(text string) string {
	if s == nil || text == "" {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.secrets) == 0 {
		return text
	}
	var covered []bool
	for secret := range s.secrets {
		for from := 0; from+len(secret) <= len(text); {
			i := strings.Index(text[from:], secret)
			if i < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(text))
			}
			start := from + i
			for j := start; j < start+len(secret); j++ {
				covered[j] = true
			}
			from = start + 1
		}
	}
	if covered == nil {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); i++ {
		if !covered[i] {
			b.WriteByte(text[i])
			continue
		}
		b.WriteString(Marker)
		for i+1 < len(text) && covered[i+1] {
			i++
		}
	}
	return b.String()
}

// Error returns err with its text redacted, still unwrapping to err so that
// errors.Is and errors.As see what they saw before. A nil err stays nil.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.String(msg)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// redactedError is an error whose text was redacted.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Value redacts a value bound for an encoder (a log attribute, the Lambda's
// JSON answer): strings, errors and the containers of them are redacted
// element by element and keep their shape; anything else is returned as
// is unless its JSON form holds a secret, in which case that redacted JSON
// text is returned in its place.
func (s *Set) Value(v any) any {
	if s.Len() == 0 {
		return v
	}
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return s.String(x)
	case error:
		return s.String(x.Error())
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = s.String(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.Value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = s.Value(e)
		}
		return out
	case bool, int, int64, uint64, float64:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		// An encoder fails on it the same way and prints its own error,
		// never the value.
		return v
	}
	if clean := s.String(string(b)); clean != string(b) {
		return clean
	}
	return v
}
