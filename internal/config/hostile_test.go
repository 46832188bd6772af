package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/configtest"
)

// appAuth is a minimal environment with GitHub App auth instead of a token.
func appAuth(t *testing.T) map[string]string {
	return with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "1",
		"REAPER_GITHUB_INSTALLATION_ID", "2", "REAPER_GITHUB_PRIVATE_KEY", testKey(t))
}

func TestEveryVariableRefusesHostileValues(t *testing.T) {
	check := func(t *testing.T, env map[string]string, name string) {
		setenv(t, env)
		_, err := Load(false, "")
		require.Error(t, err, "%s=%q was accepted", name, env[name])
		var ce *Error
		require.True(t, errors.As(err, &ce), "a configuration error, not %T: %v", err, err)
		var named []Problem
		for _, p := range ce.Problems {
			if p.Var == name || strings.Contains(p.What, name) {
				named = append(named, p)
			}
		}
		require.NotEmpty(t, named, "no problem names %s: %v", name, err)
		for _, p := range named {
			assert.NotEmpty(t, p.Example, "the problem with %s gives an example", p.Var)
		}
		for _, secret := range configtest.Secrets() {
			assert.NotContains(t, err.Error(), secret, "a secret reached the message")
		}
	}
	for name, values := range configtest.Hostile() {
		for _, v := range values {
			t.Run(name+"="+v, func(t *testing.T) { check(t, with(minimal(), name, v), name) })
		}
	}
	for name, values := range configtest.AppHostile() {
		for _, v := range values {
			env := with(appAuth(t), name, v)
			if name == "REAPER_GITHUB_PRIVATE_KEY_FILE" {
				env = with(env, "REAPER_GITHUB_PRIVATE_KEY", "<unset>")
			}
			t.Run(name+"="+v, func(t *testing.T) { check(t, env, name) })
		}
	}
}

// Every variable the spec reads has hostile values in configtest's table,
// and the table names no variable the spec does not read, so a new
// variable cannot be added without them (nor one removed and its rows
// left to check nothing).
func TestHostileTableCoversEveryVariable(t *testing.T) {
	covered := configtest.Hostile()
	for k, v := range configtest.AppHostile() {
		covered[k] = v
	}
	st := reflect.TypeOf(spec{})
	read := map[string]bool{}
	for i := range st.NumField() {
		name := key(st.Field(i).Name)
		read[name] = true
		assert.NotEmpty(t, covered[name], "%s has no hostile values in the table", name)
	}
	for name := range covered {
		assert.True(t, read[name], "the table has rows for %s, which runner-reaper does not read", name)
	}
}

// The same bad environment gives the same message, every time.
func TestProblemsComeInAStableOrder(t *testing.T) {
	env := with(minimal(), "REAPER_CONFIRM_AFTER", "-1m", "REAPER_REGISTRATION_DEADLINE", "0s", "REAPER_STAMP_MAX_AGE", "-2m",
		"REAPER_ARC_FAILED_AFTER", "-3m", "REAPER_GITHUB_TIMEOUT", "-1s", "REAPER_SCOPE_LABEL", "bad key!",
		"REAPER_OWNER_STAMP_LABEL", "bad key!", "REAPER_MAX_FRACTION", "NaN", "REAPER_MASS_SUSPICION_FRACTION", "Inf",
		"REAPER_GHOST_NAME_PREFIX", "x\n", "REAPER_GHOST_LABEL", "y\n")
	setenv(t, env)
	_, first := Load(false, "")
	require.Error(t, first)
	for range 50 {
		_, err := Load(false, "")
		require.Error(t, err)
		require.Equal(t, first.Error(), err.Error())
	}
}

// Loopback may be plain http (a simulator or a local proxy); nothing else.
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/", "http://localhost:3000/api/v3/", "http://[::1]:9/", "http://127.8.9.10/"} {
		setenv(t, with(minimal(), "REAPER_GITHUB_API_URL", u))
		c, err := Load(false, "")
		require.NoError(t, err, u)
		assert.True(t, strings.HasSuffix(c.GitHub.APIURL, "/"))
	}
}
