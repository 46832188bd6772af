package safetext

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type escapeCase struct {
	name string
	in   string
	want string
}

// c0Escape is how Go's quoted form writes a C0 control: its own letter
// where it has one, else \xNN.
func c0Escape(c byte) string {
	switch c {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	return fmt.Sprintf(`\x%02x`, c)
}

// unsafeCases are the runes that must never reach a person raw: the whole
// C0 range, DEL, the whole C1 range, every bidirectional control, the line
// and paragraph separators, and invalid UTF-8.
func unsafeCases() []escapeCase {
	var cases []escapeCase
	for c := 0; c <= 0x1f; c++ {
		cases = append(cases, escapeCase{fmt.Sprintf("C0 %#02x", c), "a" + string(rune(c)) + "b", "a" + c0Escape(byte(c)) + "b"})
	}
	cases = append(cases, escapeCase{"DEL", "a\x7fb", `a\x7fb`})
	for r := rune(0x80); r <= 0x9f; r++ {
		cases = append(cases, escapeCase{fmt.Sprintf("C1 U+%04X", r), "a" + string(r) + "b", fmt.Sprintf(`a\u%04xb`, r)})
	}
	bidi := []rune{0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069}
	for _, r := range bidi {
		cases = append(cases, escapeCase{fmt.Sprintf("bidi U+%04X", r), "a" + string(r) + "b", fmt.Sprintf(`a\u%04xb`, r)})
	}
	return append(cases,
		escapeCase{"line separator", "a\u2028b", `a\u2028b`},
		escapeCase{"paragraph separator", "a\u2029b", `a\u2029b`},
		escapeCase{"zero-width space", "a\u200bb", `a\u200bb`},
		escapeCase{"no-break space", "a\u00a0b", `a\u00a0b`},
		escapeCase{"byte order mark", "\ufeffa", `\ufeffa`},
		escapeCase{"invalid byte", "a\xffb", `a\xffb`},
		escapeCase{"lone C1 byte, not a rune", "a\x9b2Jb", `a\x9b2Jb`},
		escapeCase{"truncated sequence", "a\xe2\x80", `a\xe2\x80`},
		escapeCase{"encoded surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		escapeCase{"overlong slash", "\xc0\xaf", `\xc0\xaf`},
		escapeCase{"the issue's runner name", "acme-1\n\rterminal\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m",
			`acme-1\n\rterminal\tnothing to do\x1b[2J\x1b[31m\u202eevil\u009b31m`},
	)
}

func TestStringEscapesEverythingThatActs(t *testing.T) {
	for _, c := range unsafeCases() {
		t.Run(c.name, func(t *testing.T) {
			got := String(c.in)
			assert.Equal(t, c.want, got)
			assert.False(t, Safe(c.in))
			assert.True(t, Safe(got), "the output holds nothing to escape")
			assert.Equal(t, got, String(got), "idempotent")
			for _, b := range []byte(got) {
				assert.True(t, b >= 0x20 && b < 0x7f || b >= 0x80, "no raw control byte: %q", got)
			}
		})
	}
}

func TestStringLeavesPrintableTextAlone(t *testing.T) {
	for _, s := range []string{
		"",
		"acme-runner-7f9c2 (#42) org:acme",
		` !"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_` + "`abcdefghijklmnopqrstuvwxyz{|}~",
		"café déjà-vu Ärger Øresund ñandú",
		"ランナー 运行器 러너",
		"😀 🚀 👍🏽 ✅",
		"Ελληνικά русский עברית العربية",
		`already quoted: "a\nb" \x1b \u202e`,
		"\ufffd is a real replacement character",
	} {
		t.Run(s, func(t *testing.T) {
			assert.Equal(t, s, String(s))
			assert.True(t, Safe(s))
		})
	}
}

func TestValueKeepsShape(t *testing.T) {
	bad := "x\x1b[2J\u202e"
	esc := `x\x1b[2J\u202e`
	type named struct{ Name string }
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"string", bad, esc},
		{"error", errors.New(bad), esc},
		{"strings", []string{"ok", bad}, []string{"ok", esc}},
		{"anys", []any{1, bad, []string{bad}}, []any{1, esc, []string{esc}}},
		{"map", map[string]any{bad: map[string]any{"n": bad}, "i": 3}, map[string]any{esc: map[string]any{"n": esc}, "i": 3}},
		{"string map", map[string]string{"k": bad}, map[string]string{"k": esc}},
		{"number", int64(7), int64(7)},
		{"ids", []int64{5, 6}, []int64{5, 6}},
		{"safe struct", named{"ok"}, named{"ok"}},
		{"struct holding a raw rune", named{"\u202e"}, `{"Name":"\u202e"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Value(c.in))
		})
	}
}

// A log line through Handler holds no raw control byte, bidi control or
// C1 rune anywhere: message, attribute values and keys, groups, attributes
// given to With, and the strings inside Any values; decoded, it gives the
// visible escaped form.
func TestHandlerEscapesEveryString(t *testing.T) {
	bad := "r\n\r\x1b[2J\u202e\u009b"
	esc := `r\n\r\x1b[2J\u202e\u009b`
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil)))
	log = log.With(slog.String("with", bad)).WithGroup("g" + bad)
	log.LogAttrs(context.Background(), slog.LevelInfo, "msg "+bad,
		slog.String("s", bad),
		slog.Group("grp", slog.String("inner", bad)),
		slog.Any("list", []string{bad}),
		slog.Any("anys", []any{bad}),
		slog.Any("map", map[string]any{"k": bad}),
		slog.Any("err", errors.New(bad)),
		slog.Any("valuer", valuer(bad)),
		slog.Int("n", 3),
	)
	line := buf.Bytes()
	for _, raw := range []string{"\n\r", "\x1b", "\u202e", "\u009b", "\r"} {
		assert.NotContains(t, string(bytes.TrimSuffix(line, []byte("\n"))), raw)
	}
	assert.Equal(t, 1, bytes.Count(line, []byte("\n")), "one line")
	var m map[string]any
	require.NoError(t, json.Unmarshal(line, &m))
	assert.Equal(t, "msg "+esc, m["msg"])
	assert.Equal(t, esc, m["with"])
	assert.Equal(t, map[string]any{
		"s":      esc,
		"grp":    map[string]any{"inner": esc},
		"list":   []any{esc},
		"anys":   []any{esc},
		"map":    map[string]any{"k": esc},
		"err":    esc,
		"valuer": esc,
		"n":      3.0,
	}, m["g"+esc])
}

type valuer string

func (v valuer) LogValue() slog.Value { return slog.StringValue(string(v)) }
