package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cleanEnv leaves the process environment with no REAPER_ variable and no
// cluster, for a test that stops at the command line or the configuration.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "REAPER_") {
			k, _, _ := strings.Cut(kv, "=")
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
}

// assertNoRawControl fails on any byte or rune in s a terminal would act
// on, the line feeds that end the CLI's own lines excepted.
func assertNoRawControl(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("raw %U in %q", r, s)
			return
		}
	}
}

// The CLI's plain-text lines quote what came from outside (an
// argument, a variable's name, a value the loader echoes) escaped: a
// configuration error keeps its one problem a line, and no line break,
// escape sequence or override from outside adds a line or acts on the
// terminal.
func TestPlainTextLinesAreEscaped(t *testing.T) {
	t.Run("an unknown flag", func(t *testing.T) {
		cleanEnv(t)
		code, out, stderr := runCLI("sweep", "--x\x1b[2J\u202e")
		assert.Equal(t, exitBadConfig, code)
		assert.Empty(t, out)
		assertNoRawControl(t, stderr)
		assert.True(t, strings.HasPrefix(stderr, `flag provided but not defined: -x\x1b[2J\u202e`+"\nusage:\n"), stderr)
	})
	t.Run("a configuration error", func(t *testing.T) {
		cleanEnv(t)
		for k, v := range map[string]string{
			"REAPER_SCOPES":       "org:acme",
			"REAPER_NAMESPACES":   "arc",
			"REAPER_GITHUB_TOKEN": "ghp_plain_text_test_token",
			"REAPER_X\n  REAPER_FORGED: fine\x1b[2J\u202e": "1",
			"REAPER_POD_SELECTOR":                          "app in (x\n\x1b[2J\u009b",
		} {
			t.Setenv(k, v)
		}
		code, out, stderr := runCLI("sweep")
		assert.Equal(t, exitBadConfig, code)
		assert.Empty(t, out)
		assertNoRawControl(t, stderr)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		require.Len(t, lines, 3, "the heading and one line per problem:\n%s", stderr)
		assert.Equal(t, "invalid configuration:", lines[0])
		assert.Contains(t, stderr, `  REAPER_X\n  REAPER_FORGED: fine\x1b[2J\u202e: is not a variable runner-reaper reads`)
		assert.Contains(t, stderr, `  REAPER_POD_SELECTOR: is not a label selector: `)
		assert.Contains(t, stderr, `\x1b[2J\u009b`)
	})
}
