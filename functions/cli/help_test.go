package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/config"
)

// garbage is an environment that sets name to a value no reader of it
// accepts, with what makes the reader look at it: the OTLP export reads
// its other settings only beside an endpoint.
func garbage(name string) map[string]string {
	env := map[string]string{name: "\x01"}
	if strings.HasPrefix(name, "OTEL_") && !strings.HasSuffix(name, "_ENDPOINT") {
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
	}
	return env
}

// names reports whether text names the variable, as a word of its own
// (REAPER_GITHUB_PRIVATE_KEY is not named by REAPER_GITHUB_PRIVATE_KEY_FILE).
func names(text, variable string) bool {
	return regexp.MustCompile(`(^|[^A-Z0-9_])` + regexp.QuoteMeta(variable) + `($|[^A-Z0-9_])`).MatchString(text)
}

// allNames are the names of every variable the configuration reads.
func allNames(t *testing.T) []string {
	t.Helper()
	vars, err := config.Variables()
	require.NoError(t, err)
	var all []string
	for _, v := range vars {
		all = append(all, v.Names...)
	}
	require.Contains(t, all, "REAPER_SCOPES")
	return all
}

// A value garbage gives is refused by name by the configuration's loader:
// a sweep, which loads all of it, exits 2 naming the variable. So a
// command that does not name a variable set so has not read it.
func TestGarbageIsRefusedByName(t *testing.T) {
	for _, name := range allNames(t) {
		t.Run(name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range garbage(name) {
				t.Setenv(k, v)
			}
			code, out, stderr := runCLI("sweep")
			assert.Equal(t, exitBadConfig, code)
			assert.Empty(t, out)
			assert.Regexp(t, `(?m)^\s*`+regexp.QuoteMeta(name)+`: `, stderr, "the loader names it")
		})
	}
}

// Every variable a command can read is in its help. Proved against the
// loader, not against a list: config.Variables is every variable Load can
// read (internal/config's tests hold it to the spec and to the OTLP
// export's reads), and a command whose help leaves a variable out is run
// with that variable set to a value the loader refuses by name, and must
// not name it in a complaint. A command that reads the configuration and lists none of
// it, or a variable added to the spec and not to a command's help, fails
// here; so would a new command of the table, which is run the same way.
func TestHelpListsEveryVariableItsCommandReads(t *testing.T) {
	all := allNames(t)
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			cleanEnv(t)
			code, help, stderr := runCLI("help", c.name)
			require.Equal(t, 0, code, stderr)
			var listed, unlisted []string
			for _, name := range all {
				if names(help, name) {
					listed = append(listed, name)
				} else {
					unlisted = append(unlisted, name)
				}
			}
			if c.reads != nil {
				assert.NotEmpty(t, listed, "its help lists what it reads")
				assert.Contains(t, help, "docs/configuration.md", "its help points to the whole reference")
			} else {
				assert.Contains(t, help, "Reads no configuration")
			}
			for _, name := range unlisted {
				cleanEnv(t)
				t.Setenv("KUBECONFIG", t.TempDir()+"/no-such-kubeconfig")
				t.Chdir(t.TempDir())
				for k, v := range garbage(name) {
					t.Setenv(k, v)
				}
				_, _, stderr := runCLI(c.name)
				assert.False(t, names(stderr, name), "%s reads %s, which its help does not list:\n%s", c.name, name, stderr)
			}
		})
	}
}

// Each command's help is made from the table and the configuration's own
// descriptions: its synopsis, each of its flags, and for each variable it
// reads, its default and the first sentence of its description.
func TestHelpIsMadeFromTheTables(t *testing.T) {
	cleanEnv(t)
	fs, _ := newFlagSet()
	code, usageOut, _ := runCLI("help")
	require.Equal(t, 0, code)
	collapse := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			assert.Contains(t, usageOut, synopsis(c, fs), "the usage lists it")
			assert.Contains(t, collapse(usageOut), collapse(c.summary))
			code, help, stderr := runCLI("help", c.name)
			require.Equal(t, 0, code, stderr)
			assert.True(t, strings.HasPrefix(help, "usage: "+synopsis(c, fs)+"\n"), help)
			assert.Contains(t, collapse(help), collapse(c.about))
			assert.Contains(t, collapse(help), "Exit status: "+collapse(c.exits))
			for _, f := range c.flags {
				assert.Contains(t, help, "  --"+f, "its flag --%s", f)
			}
			if c.reads == nil {
				return
			}
			vars, err := c.reads()
			require.NoError(t, err)
			for _, v := range vars {
				head := strings.Join(v.Names, ", ")
				if v.Default != "" {
					head += " (default: " + config.Plain(v.Default) + ")"
				}
				assert.Contains(t, collapse(help), head+" "+v.Summary(), "%s with its default and summary", v.Names[0])
			}
		})
	}
}

// help, help COMMAND and COMMAND --help answer without reading the
// configuration: every REAPER_ variable the environment could hold wrong
// is wrong here, and they still exit 0. A bad word or flag exits 2 and
// says which.
func TestHelpExitStatuses(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stdout string // its start, when it exits 0
		stderr string // what the message says, when it exits 2
	}{
		{args: []string{"help"}, stdout: "usage:\n"},
		{args: []string{"--help"}, stdout: "usage:\n"},
		{args: []string{"-h"}, stdout: "usage:\n"},
		{args: []string{"help", "sweep"}, stdout: "usage: runner-reaper sweep [--dry-run]\n"},
		{args: []string{"sweep", "--help"}, stdout: "usage: runner-reaper sweep [--dry-run]\n"},
		{args: []string{"--help", "sweep"}, stdout: "usage: runner-reaper sweep [--dry-run]\n"},
		{args: []string{"sweep", "--dry-run", "-h"}, stdout: "usage: runner-reaper sweep [--dry-run]\n"},
		{args: []string{"audit", "--output", "json", "-help"}, stdout: "usage: runner-reaper audit [--output table|json]\n"},
		{args: []string{"help", "audit", "--help"}, stdout: "usage: runner-reaper audit [--output table|json]\n"},
		{args: []string{"metrics", "--help"}, stdout: "usage: runner-reaper metrics\n"},
		{args: []string{"version", "--help"}, stdout: "usage: runner-reaper version"},
		{args: []string{"help", "help"}, stdout: "usage: runner-reaper help [COMMAND]\n"},
		{args: []string{"help", "reap"}, code: 2, stderr: `unknown command "reap"`},
		{args: []string{"reap", "--help"}, code: 2, stderr: `unknown command "reap"`},
		{args: []string{"help", "sweep", "audit"}, code: 2, stderr: `unexpected argument "audit"`},
		{args: []string{"sweep", "--force"}, code: 2, stderr: "flag provided but not defined: -force"},
		{args: []string{"sweep", "--force", "--help"}, code: 2, stderr: "flag provided but not defined: -force"},
		{args: []string{"sweep", "--output", "json"}, code: 2, stderr: "--output is not a flag of sweep"},
		{args: []string{"metrics", "--dry-run"}, code: 2, stderr: "--dry-run is not a flag of metrics"},
		{args: []string{"version", "extra"}, code: 2, stderr: `unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("REAPER_SCOPES", "\x01")
			t.Setenv("REAPER_NOT_A_VARIABLE", "1")
			t.Setenv("KUBECONFIG", t.TempDir()+"/no-such-kubeconfig")
			code, out, stderr := runCLI(c.args...)
			assert.Equal(t, c.code, code, stderr)
			if c.code == 0 {
				assert.True(t, strings.HasPrefix(out, c.stdout), "begins %q:\n%s", c.stdout, out)
				assert.Empty(t, stderr)
				return
			}
			assert.Empty(t, out)
			assert.Contains(t, stderr, c.stderr)
			assert.Contains(t, stderr, "usage:")
		})
	}
}
