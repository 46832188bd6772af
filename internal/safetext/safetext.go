// Package safetext makes text from outside the process safe to show a
// person. Pod names, label and annotation values, runner names, GitHub's
// messages and Kubernetes' error texts are written by whoever can annotate a
// pod or answer a request; printed raw, a newline forges a row of the audit
// table, an escape sequence clears or recolours the operator's terminal, and
// a bidirectional override makes `kubectl logs` show a name backwards. JSON
// encoders do not close this: log/slog's and encoding/json's escape C0 but
// write U+202E and the C1 escapes (U+009B is a CSI) raw, and terminals
// interpret them.
//
// String shows every such rune visibly, as strconv.Quote would write it
// (`\n`, `\x1b`, `\u202e`, `\u009b`), and an invalid UTF-8 byte as `\xNN`.
// The runes it escapes are the control characters (C0, DEL, C1), the
// bidirectional controls and every other rune that strconv.IsPrint rejects
// (the line and paragraph separators U+2028 and U+2029, the zero-width
// format characters, a no-break space) except the plain space. Everything
// printable passes unchanged: accents, CJK, emoji.
//
// Backslashes and quotes are left as they are, unlike strconv.Quote. That
// keeps String idempotent (its output holds nothing it would escape again)
// and leaves text the reaper already wrote with %q as it was; the price is
// that a literal `\n` from outside reads the same as an escaped newline,
// which misleads nobody into acting on a control character.
//
// The package is a leaf with no dependency beyond the standard library, so
// that every part that prints (the log handler, the audit, Events, the
// entry points) can use the one definition.
package safetext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s with every rune a terminal or a viewer could act on, and
// every invalid UTF-8 byte, replaced by its visible escape (see the package
// doc). It returns s itself when there is nothing to escape.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	appendEscaped(&b, s[i:])
	return b.String()
}

// Safe reports whether s would pass String unchanged.
func Safe(s string) bool { return firstUnsafe(s) < 0 }

// firstUnsafe is the byte offset of the first rune String escapes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		if !printable(r) {
			return i
		}
		i += size
	}
	return -1
}

// printable is the rune test: strconv.IsPrint already rejects the
// bidirectional controls (they are format characters, category Cf); they
// are named here as well so that no change of that rule can let one
// through.
func printable(r rune) bool {
	if r == ' ' {
		return true
	}
	if bidi(r) {
		return false
	}
	return strconv.IsPrint(r)
}

// bidi reports the Unicode bidirectional controls: ALM, LRM, RLM, the
// embeddings and overrides LRE to RLO (U+202A–U+202E), and the isolates
// LRI to PDI (U+2066–U+2069).
func bidi(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendEscaped writes s to b, escaping as String does.
func appendEscaped(b *strings.Builder, s string) {
	var buf [16]byte
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case printable(r):
			b.WriteString(s[i : i+size])
		case bidi(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[r>>shift&0xf])
			}
		default:
			// strconv writes the rune quoted ('\x1b'); the quotes go.
			q := strconv.AppendQuoteRune(buf[:0], r)
			b.Write(q[1 : len(q)-1])
		}
		i += size
	}
}
