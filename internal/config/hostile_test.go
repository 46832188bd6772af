package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appAuth is a minimal environment with GitHub App auth instead of a token.
func appAuth(t *testing.T) map[string]string {
	return with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "1",
		"REAPER_GITHUB_INSTALLATION_ID", "2", "REAPER_GITHUB_PRIVATE_KEY", testKey(t))
}

// hostile lists, for every variable of the README's table, values a hostile
// or careless operator could set. Each must be refused at start-up with a
// problem that names the variable and gives an example, and no secret in
// the message.
func hostile(t *testing.T) map[string][]string {
	return map[string][]string{
		"REAPER_SCOPES": {"org:..", "repo:../..", "repo:acme/..", "org:acme/..", "org:%2e%2e", "org:ac me",
			"org:acme?page=2", "org:acme#x", "repo:acme/web/x", "enterprise:acme_corp", "org:\x01acme", "org:acme,,org:web",
			"org:" + strings.Repeat("x", 101), "orgs:acme"},
		"REAPER_NAMESPACES":               {"..", "Arc", "arc_runners", "*,arc-runners", "arc runners", strings.Repeat("a", 64), "-arc"},
		"REAPER_POD_SELECTOR":             {"app in (a", "a=b=c", "x\x01=y", " "},
		"REAPER_RUNNER_CONTAINER":         {"Runner", "run ner", "", strings.Repeat("r", 64), "../runner"},
		"REAPER_RUNNER_NAME_FROM":         {"env:X", "label:", "label:bad key!", "annotation:a/b/c", "podname"},
		"REAPER_SCOPE_LABEL":              {"bad key!", "a/b/c", "-x"},
		"REAPER_JOB_FROM":                 {"label:pool/job", "annotation:", "annotation:bad key!", "annotation:a/b/c", "env:JOB", "pool/job"},
		"REAPER_OWNER_STAMP_LABEL":        {"bad key!", "/x"},
		"REAPER_STAMP_MAX_AGE":            {"0", "-5m", "5", "NaN", "10 minutes", "99999999999h"},
		"REAPER_GHOST_NAME_PREFIX":        {"arc-\n", "arc-\x7f", "ärc-", "a", "ar"},
		"REAPER_GHOST_LABEL":              {"own\x01ed", "lab\tel", "self-hosted", "Linux", "X64", "arm64"},
		"REAPER_ARC_LEAKS":                {"yes", "2"},
		"REAPER_ARC_FAILED_AFTER":         {"0s", "-1m", "forever"},
		"REAPER_ARC_PODLESS_AFTER":        {"0", "Inf"},
		"REAPER_ARC_STUCK_DELETING_AFTER": {"-30m", "1d"},
		"REAPER_ARC_REMOVE_FINALIZERS":    {"on", "true"}, // true without REAPER_ARC_LEAKS
		"REAPER_REGISTRATION_DEADLINE":    {"0", "-10m", "NaN"},
		"REAPER_CONFIRM_AFTER":            {"0s", "-5m", "5 min"},
		"REAPER_MAX_ACTIONS":              {"0", "-1", "1e3", "99999999999999999999", "ten"},
		"REAPER_MAX_FRACTION":             {"NaN", "nan", "Inf", "+Inf", "-Inf", "0", "-0.1", "1.0001", "1e-400", "1e400"},
		"REAPER_MASS_SUSPICION_FRACTION":  {"NaN", "Inf", "-Inf", "0", "2"},
		"REAPER_MASS_SUSPICION_MIN":       {"0", "-5", "many"},
		"REAPER_DRY_RUN":                  {"yes please", "y"},
		"REAPER_LEDGER": {"redis:x", "configmap:", "configmap:ns", "configmap:NS/x", "configmap:ns/", "file:", "file:a\nb",
			"dynamodb:a", "dynamodb:bad table", "memory:x", "memory:"},
		"REAPER_DELETE_SERVICE_ACCOUNT": {"sure"},
		"REAPER_KUBE_CONCURRENCY":       {"0", "-1", "65", "1000000"},
		"REAPER_KUBE_TIMEOUT":           {"0", "-1s", "6m", "forever", "NaN"},
		"REAPER_SWEEP_TIMEOUT":          {"0", "-45s", "5s", "1s", "2h", "soon", "Inf"},
		"REAPER_MAX_SCOPES_PER_SWEEP":   {"-1", "ten", "1.5", "1e3", "10001", "99999999999999999999", " "},
		"REAPER_LOG_LEVEL":              {"verbose", "trace"},
		"REAPER_GITHUB_TOKEN":           {"ghp_abc\x01def", "ghp_abc def", "ghp_abc\n", "ghp_äbc", "ghp_abc\x7f"},
		"REAPER_GITHUB_API_URL": {"ftp://x", "http://api.github.com/", "http://10.0.0.1/", "https://user:hunter2@ghes.example.com/api/v3/",
			"https://ghes.example.com/api/v3/?x=1", "https://ghes.example.com/#f", "https://", "api.github.com", "https:api.github.com"},
		"REAPER_GITHUB_TIMEOUT":    {"0", "-1s", "1h", "soon"},
		"REAPER_GITHUB_SECRET_ARN": {"runner-reaper-github", "arn:", "arn:aws:s3:::bucket", "arn:aws:secretsmanager:eu-west-1:1:secret:x"},
		"REAPER_EKS_CLUSTER":       {"not a name!", "-fleet", strings.Repeat("c", 101), "fleet\n"},
		"REAPER_METRICS_NAMESPACE": {"Runner Reaper", "AWS/EC2", strings.Repeat("m", 256), "x\x01"},
	}
}

// appHostile are the App settings' hostile values, tried with App auth.
var appHostile = map[string][]string{
	"REAPER_GITHUB_APP_ID":           {"-1", "0", "abc", "99999999999999999999"},
	"REAPER_GITHUB_INSTALLATION_ID":  {"-2", "0", "1.5"},
	"REAPER_GITHUB_PRIVATE_KEY":      {"not a key", "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n"},
	"REAPER_GITHUB_PRIVATE_KEY_FILE": {"/nonexistent/key.pem", "/"},
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
		for _, secret := range []string{"hunter2", "c2VjcmV0", "abc\x01def"} {
			assert.NotContains(t, err.Error(), secret, "a secret reached the message")
		}
	}
	for name, values := range hostile(t) {
		for _, v := range values {
			t.Run(name+"="+v, func(t *testing.T) { check(t, with(minimal(), name, v), name) })
		}
	}
	for name, values := range appHostile {
		for _, v := range values {
			env := with(appAuth(t), name, v)
			if name == "REAPER_GITHUB_PRIVATE_KEY_FILE" {
				env = with(env, "REAPER_GITHUB_PRIVATE_KEY", "<unset>")
			}
			t.Run(name+"="+v, func(t *testing.T) { check(t, env, name) })
		}
	}
}

// Every variable the spec reads has hostile values in the table above, so
// a new variable cannot be added without them.
func TestHostileTableCoversEveryVariable(t *testing.T) {
	covered := hostile(t)
	for k, v := range appHostile {
		covered[k] = v
	}
	st := reflect.TypeOf(spec{})
	for i := range st.NumField() {
		name := key(st.Field(i).Name)
		assert.NotEmpty(t, covered[name], "%s has no hostile values in the table", name)
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
