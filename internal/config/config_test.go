package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// setenv clears every REAPER_ variable, then sets the given ones, so a test
// sees exactly the environment it names.
func setenv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := cut(kv); len(k) > 7 && k[:7] == "REAPER_" {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

func cut(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func minimal() map[string]string {
	return map[string]string{
		"REAPER_SCOPES":       "org:acme, repo:acme/web",
		"REAPER_NAMESPACES":   "arc-runners",
		"REAPER_GITHUB_TOKEN": "ghp_secretsecret",
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(out, kv[i])
			continue
		}
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestLoadDefaults(t *testing.T) {
	setenv(t, minimal())
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, []fleet.Scope{{Kind: fleet.OrgScope, Name: "acme"}, {Kind: fleet.RepoScope, Owner: "acme", Name: "web"}}, c.Scopes)
	assert.Equal(t, []string{"arc-runners"}, c.Namespaces)
	assert.Equal(t, "actions-ephemeral-runner=True", c.PodSelector)
	assert.Equal(t, "runner", c.RunnerContainer)
	assert.Equal(t, NameSource{From: NameFromPod}, c.RunnerName)
	assert.Equal(t, 10*time.Minute, c.Policy.RegistrationDeadline)
	assert.Equal(t, 15*time.Minute, c.Policy.StartDeadline)
	assert.False(t, c.Policy.DeleteUnschedulable, "a runner pod that waits for room is only reported unless asked")
	assert.Equal(t, 5*time.Minute, c.Hold.ConfirmAfter)
	assert.Equal(t, reconcile.Limits{MaxActions: 10, MaxFraction: 0.25}, c.Limits)
	assert.False(t, c.Policy.StampEnabled, "orphan-stamped is off without a stamp label")
	assert.False(t, c.Policy.GhostsEnabled(), "ghost is off without ownership")
	assert.False(t, c.Policy.ARC, "ARC's own leaks are watched only when asked, so a non-ARC Role needs no ARC rights")
	assert.Equal(t, 30*time.Minute, c.Policy.ARCStuckDeletingAfter)
	assert.Equal(t, 10*time.Minute, c.Hold.ARCFailedAfter)
	assert.False(t, c.DryRun)
	assert.Equal(t, Ledger{Kind: LedgerFile, Path: "runner-reaper-ledger.json"}, c.Ledger)
	assert.Equal(t, "https://api.github.com/", c.GitHub.APIURL)
	assert.Equal(t, 200, c.HistorySize, "the ledger keeps the last 200 actions")
	assert.Equal(t, loops.Policy{Threshold: 5, Window: 30 * time.Minute}, c.Loops, "a loop is five actions alike within 30 minutes")

	in, err := Load(true, "reaper")
	require.NoError(t, err)
	assert.Equal(t, Ledger{Kind: LedgerConfigMap, Namespace: "reaper", Name: "runner-reaper-ledger"}, in.Ledger, "in a cluster the ledger is a ConfigMap beside the reaper")
}

func TestLoadEverything(t *testing.T) {
	setenv(t, with(minimal(),
		"REAPER_NAMESPACES", "*",
		"REAPER_RUNNER_NAME_FROM", "annotation:runners.example.com/name",
		"REAPER_JOB_FROM", "annotation:pool.example.com/job",
		"REAPER_OWNER_STAMP_LABEL", "pool.example.com/claimed-by",
		"REAPER_STAMP_MAX_AGE", "90s",
		"REAPER_GHOST_NAME_PREFIX", "acme-",
		"REAPER_CONFIRM_AFTER", "2s",
		"REAPER_DRY_RUN", "true",
		"REAPER_LEDGER", "configmap:ops/reaper-ledger",
		"REAPER_GITHUB_API_URL", "http://127.0.0.1:9999",
	))
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Empty(t, c.Namespaces, "* means all namespaces")
	assert.Equal(t, NameSource{From: NameFromAnnotation, Key: "runners.example.com/name"}, c.RunnerName)
	assert.Equal(t, "pool.example.com/job", c.JobAnnotation)
	assert.True(t, c.Policy.StampEnabled)
	assert.Equal(t, 90*time.Second, c.Hold.StampMaxAge)
	assert.Equal(t, 2*time.Second, c.Hold.ConfirmAfter)
	assert.True(t, c.DryRun)
	assert.Equal(t, Ledger{Kind: LedgerConfigMap, Namespace: "ops", Name: "reaper-ledger"}, c.Ledger)
	assert.Equal(t, "http://127.0.0.1:9999/", c.GitHub.APIURL)
}

func TestLoadRejects(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		varName string
		what    string
	}{
		{"missing scopes", with(minimal(), "REAPER_SCOPES", "<unset>"), "REAPER_SCOPES", "is required"},
		{"bad scope kind", with(minimal(), "REAPER_SCOPES", "team:acme"), "REAPER_SCOPES", "unknown kind"},
		{"repo without owner", with(minimal(), "REAPER_SCOPES", "repo:web"), "REAPER_SCOPES", "repo:OWNER/NAME"},
		{"duplicate scope", with(minimal(), "REAPER_SCOPES", "org:acme,org:ACME"), "REAPER_SCOPES", "twice"},
		{"missing namespaces", with(minimal(), "REAPER_NAMESPACES", "<unset>"), "REAPER_NAMESPACES", "is required"},
		{"bad namespace", with(minimal(), "REAPER_NAMESPACES", "Arc_Runners"), "REAPER_NAMESPACES", "not a namespace name"},
		{"bad selector", with(minimal(), "REAPER_POD_SELECTOR", "app in (a"), "REAPER_POD_SELECTOR", "not a label selector"},
		{"empty selector", with(minimal(), "REAPER_POD_SELECTOR", " "), "REAPER_POD_SELECTOR", "must not be empty"},
		{"bad duration", with(minimal(), "REAPER_CONFIRM_AFTER", "5 minutes"), "REAPER_CONFIRM_AFTER", "a duration"},
		{"negative duration", with(minimal(), "REAPER_REGISTRATION_DEADLINE", "-1m"), "REAPER_REGISTRATION_DEADLINE", "positive"},
		{"zero start deadline", with(minimal(), "REAPER_START_DEADLINE", "0s"), "REAPER_START_DEADLINE", "positive"},
		{"start deadline without a unit", with(minimal(), "REAPER_START_DEADLINE", "15"), "REAPER_START_DEADLINE", "a duration"},
		{"unschedulable switch not a boolean", with(minimal(), "REAPER_DELETE_UNSCHEDULABLE", "sure"), "REAPER_DELETE_UNSCHEDULABLE", "true or false"},
		{"bad number", with(minimal(), "REAPER_MAX_ACTIONS", "ten"), "REAPER_MAX_ACTIONS", "whole number"},
		{"app id in octal", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "0123456", "REAPER_GITHUB_INSTALLATION_ID", "2"),
			"REAPER_GITHUB_APP_ID", "written in decimal"},
		{"installation id in hex", with(minimal(), "REAPER_GITHUB_INSTALLATION_ID", "0x1E240"), "REAPER_GITHUB_INSTALLATION_ID", "written in decimal"},
		{"max actions with an underscore", with(minimal(), "REAPER_MAX_ACTIONS", "1_0"), "REAPER_MAX_ACTIONS", "written in decimal"},
		{"app id with a newline", with(minimal(), "REAPER_GITHUB_APP_ID", "123456\n"), "REAPER_GITHUB_APP_ID", "written in decimal"},
		{"zero max actions", with(minimal(), "REAPER_MAX_ACTIONS", "0"), "REAPER_MAX_ACTIONS", "at least 1"},
		{"fraction above one", with(minimal(), "REAPER_MAX_FRACTION", "1.5"), "REAPER_MAX_FRACTION", "at most 1"},
		{"bad bool", with(minimal(), "REAPER_DRY_RUN", "yes please"), "REAPER_DRY_RUN", "true or false"},
		{"bad name source", with(minimal(), "REAPER_RUNNER_NAME_FROM", "env:X"), "REAPER_RUNNER_NAME_FROM", "want pod-name, label or annotation"},
		{"job from a label", with(minimal(), "REAPER_JOB_FROM", "label:pool/job"), "REAPER_JOB_FROM", "use an annotation"},
		{"bad stamp label", with(minimal(), "REAPER_OWNER_STAMP_LABEL", "not a key!"), "REAPER_OWNER_STAMP_LABEL", "not a label key"},
		{"bad ledger", with(minimal(), "REAPER_LEDGER", "redis:x"), "REAPER_LEDGER", "configmap:NAMESPACE/NAME"},
		{"typo'd variable", with(minimal(), "REAPER_CONFRIM_AFTER", "5m"), "REAPER_CONFRIM_AFTER", "did you mean REAPER_CONFIRM_AFTER? (example: REAPER_CONFIRM_AFTER=5m)"},
		{"missing underscore", with(minimal(), "REAPER_DRYRUN", "true"), "REAPER_DRYRUN", "did you mean REAPER_DRY_RUN?"},
		{"unknown variable", with(minimal(), "REAPER_COLOUR", "blue"), "REAPER_COLOUR", "not a variable runner-reaper reads"},
		{"no credentials", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>"), "REAPER_GITHUB_TOKEN", "no GitHub credentials"},
		{"token and app", with(minimal(), "REAPER_GITHUB_APP_ID", "1"), "REAPER_GITHUB_TOKEN", "choose one"},
		{"app without key", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "1", "REAPER_GITHUB_INSTALLATION_ID", "2"),
			"REAPER_GITHUB_PRIVATE_KEY", "is required"},
		{"app with a key that is not a key", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "1",
			"REAPER_GITHUB_INSTALLATION_ID", "2", "REAPER_GITHUB_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n"),
			"REAPER_GITHUB_PRIVATE_KEY", "not an RSA private key"},
		{"enterprise with app auth", with(minimal(), "REAPER_SCOPES", "enterprise:acme-corp", "REAPER_GITHUB_TOKEN", "<unset>",
			"REAPER_GITHUB_APP_ID", "1", "REAPER_GITHUB_INSTALLATION_ID", "2", "REAPER_GITHUB_PRIVATE_KEY", testKey(t)),
			"REAPER_SCOPES", "does not accept App installation tokens"},
		{"finalizers without ARC leaks", with(minimal(), "REAPER_ARC_REMOVE_FINALIZERS", "true"), "REAPER_ARC_REMOVE_FINALIZERS", "needs REAPER_ARC_LEAKS=true"},
		{"ARC leaks with a selector that misses scale-set pods", with(minimal(), "REAPER_ARC_LEAKS", "true",
			"REAPER_POD_SELECTOR", "actions-ephemeral-runner=True,actions.github.com/scale-set-name=gpu"), "REAPER_ARC_LEAKS", "select every scale-set pod"},
		{"bad ARC duration", with(minimal(), "REAPER_ARC_FAILED_AFTER", "0s"), "REAPER_ARC_FAILED_AFTER", "positive"},
		{"secret ARN that is not an ARN", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_SECRET_ARN", "runner-reaper-github"), "REAPER_GITHUB_SECRET_ARN", "not an ARN"},
		{"secret ARN and a token", with(minimal(), "REAPER_GITHUB_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"), "REAPER_GITHUB_SECRET_ARN", "choose one source"},
		{"secret ARN for an App without its ids", with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x",
			"REAPER_GITHUB_APP_ID", "5"), "REAPER_GITHUB_INSTALLATION_ID", "is required"},
		{"bad dynamodb ledger", with(minimal(), "REAPER_LEDGER", "dynamodb:a"), "REAPER_LEDGER", "dynamodb:TABLE"},
		{"bad eks cluster", with(minimal(), "REAPER_EKS_CLUSTER", "not a name!"), "REAPER_EKS_CLUSTER", "not an EKS cluster name"},
		{"bad api url", with(minimal(), "REAPER_GITHUB_API_URL", "ftp://x"), "REAPER_GITHUB_API_URL", "not an absolute http(s) URL"},
		{"negative history size", with(minimal(), "REAPER_HISTORY_SIZE", "-1"), "REAPER_HISTORY_SIZE", "between 0 (no record of actions) and 1000, got -1"},
		{"history size over the bound", with(minimal(), "REAPER_HISTORY_SIZE", "1001"), "REAPER_HISTORY_SIZE", "between 0 (no record of actions) and 1000, got 1001"},
		{"history size not a number", with(minimal(), "REAPER_HISTORY_SIZE", "all"), "REAPER_HISTORY_SIZE", "whole number"},
		{"loop threshold of one", with(minimal(), "REAPER_LOOP_THRESHOLD", "1"), "REAPER_LOOP_THRESHOLD", "must be between 2 and 50 actions, got 1"},
		{"loop threshold over the bound", with(minimal(), "REAPER_LOOP_THRESHOLD", "51"), "REAPER_LOOP_THRESHOLD", "must be between 2 and 50 actions, got 51"},
		{"loop threshold not a number", with(minimal(), "REAPER_LOOP_THRESHOLD", "many"), "REAPER_LOOP_THRESHOLD", "whole number"},
		{"loop window too short", with(minimal(), "REAPER_LOOP_WINDOW", "30s"), "REAPER_LOOP_WINDOW", "must be between 1m0s and 24h0m0s, got 30s"},
		{"loop window over a day", with(minimal(), "REAPER_LOOP_WINDOW", "25h"), "REAPER_LOOP_WINDOW", "must be between 1m0s and 24h0m0s, got 25h0m0s"},
		{"loop window not a duration", with(minimal(), "REAPER_LOOP_WINDOW", "half an hour"), "REAPER_LOOP_WINDOW", "duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, tc.env)
			_, err := Load(false, "")
			require.Error(t, err)
			var ce *Error
			require.True(t, errors.As(err, &ce), "a configuration error, not %T", err)
			found := false
			for _, p := range ce.Problems {
				if p.Var == tc.varName {
					found = true
					assert.Contains(t, p.What, tc.what)
				}
			}
			assert.True(t, found, "no problem names %s: %v", tc.varName, err)
			assert.NotContains(t, err.Error(), "secretsecret", "a secret reached a message")
			assert.NotContains(t, err.Error(), "c2VjcmV0", "a key reached a message")
		})
	}
}

func TestLoadExamplesAreRight(t *testing.T) {
	setenv(t, with(minimal(), "REAPER_CONFIRM_AFTER", "5 minutes"))
	_, err := Load(false, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "example: REAPER_CONFIRM_AFTER=5m")
}

func TestLoadAppKeyFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(path, []byte(testKey(t)), 0o600))
	setenv(t, with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_APP_ID", "12", "REAPER_GITHUB_INSTALLATION_ID", "34",
		"REAPER_GITHUB_PRIVATE_KEY_FILE", path))
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, int64(12), c.GitHub.AppID)
	assert.Equal(t, int64(34), c.GitHub.InstallationID)
	assert.NotEmpty(t, c.GitHub.PrivateKey)
}

// The bare, unprefixed names must never be read: a pod's stray DRY_RUN or
// NAMESPACES must not steer the reaper.
func TestLoadIgnoresUnprefixedNames(t *testing.T) {
	setenv(t, minimal())
	t.Setenv("DRY_RUN", "true")
	t.Setenv("MAX_ACTIONS", "1000")
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.False(t, c.DryRun)
	assert.Equal(t, 10, c.Limits.MaxActions)
}

func testKey(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func TestLoadLambdaSettings(t *testing.T) {
	arn := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:runner-reaper-github-AbCdEf"
	setenv(t, with(minimal(), "REAPER_GITHUB_TOKEN", "<unset>", "REAPER_GITHUB_SECRET_ARN", arn,
		"REAPER_LEDGER", "dynamodb:runner-reaper-ledger", "REAPER_EKS_CLUSTER", "build-fleet", "REAPER_METRICS_NAMESPACE", "RunnerReaper"))
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, Ledger{Kind: LedgerDynamoDB, Table: "runner-reaper-ledger"}, c.Ledger)
	assert.Equal(t, "build-fleet", c.EKSCluster)
	assert.Equal(t, "RunnerReaper", c.MetricsNamespace)
	assert.Equal(t, arn, c.GitHub.SecretARN)

	// A token from the secret.
	g := c.GitHub
	require.NoError(t, g.SetSecret("ghp_fromsecret\n"))
	assert.Equal(t, "ghp_fromsecret", g.Token)
	err = g.SetSecret("two words")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "two words", "the secret never reaches a message")

	// An App's key from the secret.
	app := GitHub{SecretARN: arn, AppID: 1, InstallationID: 2}
	require.NoError(t, app.SetSecret(testKey(t)))
	assert.NotEmpty(t, app.PrivateKey)
	err = app.SetSecret("-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "c2VjcmV0")
}

// A selector of exclusions only matches nearly every pod in the namespaces
// (an unrelated postgres-0 included), so it is refused at start-up; one
// positive requirement says what a runner pod is.
func TestLoadPodSelectorNeedsAPositiveRequirement(t *testing.T) {
	cases := []struct {
		selector string
		ok       bool
	}{
		{"!runners.example.com/ignore", false},
		{"app!=postgres", false},
		{"tier notin (db,cache)", false},
		{"!runners.example.com/ignore,app!=postgres,tier notin (db)", false},
		{" !a , b != c ", false},
		{"app", true},
		{"app=runner", true},
		{"app==runner", true},
		{"app in (runner,runner-gpu)", true},
		{"!runners.example.com/ignore,actions-ephemeral-runner=True", true},
		{"app!=postgres,tier in (ci)", true},
	}
	for _, tc := range cases {
		t.Run(tc.selector, func(t *testing.T) {
			setenv(t, with(minimal(), "REAPER_POD_SELECTOR", tc.selector))
			c, err := Load(false, "")
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, tc.selector, c.PodSelector)
				return
			}
			var ce *Error
			require.ErrorAs(t, err, &ce)
			require.Len(t, ce.Problems, 1)
			p := ce.Problems[0]
			assert.Equal(t, "REAPER_POD_SELECTOR", p.Var)
			assert.Contains(t, p.What, "no positive requirement")
			assert.Contains(t, err.Error(), "example: REAPER_POD_SELECTOR=app.kubernetes.io/component=runner")
		})
	}
}

// Every wait is bounded: each Kubernetes request by REAPER_KUBE_TIMEOUT, the
// whole sweep by REAPER_SWEEP_TIMEOUT, whose default ends before the
// CronJob's activeDeadlineSeconds (50 s) and the Lambda's timeout (50 s),
// and which must leave time to act after the spare.
func TestLoadTimeouts(t *testing.T) {
	setenv(t, minimal())
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, c.KubeTimeout)
	assert.Equal(t, 45*time.Second, c.SweepTimeout)
	assert.Less(t, c.SweepTimeout, 50*time.Second, "the sweep ends before the Job's deadline")

	setenv(t, with(minimal(), "REAPER_KUBE_TIMEOUT", "5m", "REAPER_SWEEP_TIMEOUT", "1h"))
	c, err = Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, c.KubeTimeout)
	assert.Equal(t, time.Hour, c.SweepTimeout)

	setenv(t, with(minimal(), "REAPER_SWEEP_TIMEOUT", "5s"))
	_, err = Load(false, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REAPER_SWEEP_TIMEOUT: must be above 5s, the time before the deadline in which no action starts")
	setenv(t, with(minimal(), "REAPER_SWEEP_TIMEOUT", "5001ms"))
	_, err = Load(false, "")
	require.NoError(t, err)
}

// The length limits of EKS's cluster names, CloudWatch's namespaces and
// the metrics instance are checked apart from their patterns: a name at
// the limit is taken, and one a character longer is refused, naming the
// variable.
func TestLoadLengthLimits(t *testing.T) {
	name := func(first string, n int) string { return first + strings.Repeat("a", n-1) }
	for _, tc := range []struct {
		varName string
		value   string
		ok      bool
	}{
		{"REAPER_EKS_CLUSTER", name("b", 100), true},
		{"REAPER_EKS_CLUSTER", name("b", 101), false},
		{"REAPER_EKS_CLUSTER", "-build", false},
		{"REAPER_METRICS_NAMESPACE", name("R", 255), true},
		{"REAPER_METRICS_NAMESPACE", name("R", 256), false},
		{"REAPER_METRICS_NAMESPACE", "Runner Reaper", false},
		{"REAPER_METRICS_INSTANCE", name("e", 63), true},
		{"REAPER_METRICS_INSTANCE", name("e", 64), false},
		{"REAPER_METRICS_INSTANCE", ".eu", false},
	} {
		t.Run(fmt.Sprintf("%s of %d", tc.varName, len(tc.value)), func(t *testing.T) {
			env := with(minimal(), tc.varName, tc.value)
			if tc.varName == "REAPER_METRICS_INSTANCE" {
				env = with(env, "REAPER_PUSHGATEWAY_URL", "http://pushgateway.monitoring:9091")
			}
			setenv(t, env)
			_, err := Load(false, "")
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.varName)
		})
	}
}

// REAPER_HISTORY_SIZE's bounds are kept: 0 turns the record off, 1000 is
// the most; the message of one refused names the variable and an example.
func TestLoadHistorySize(t *testing.T) {
	for _, n := range []int{0, 1, 1000} {
		setenv(t, with(minimal(), "REAPER_HISTORY_SIZE", fmt.Sprint(n)))
		c, err := Load(false, "")
		require.NoError(t, err)
		assert.Equal(t, n, c.HistorySize)
	}
	setenv(t, with(minimal(), "REAPER_HISTORY_SIZE", "5000"))
	_, err := Load(false, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REAPER_HISTORY_SIZE: must be between 0 (no record of actions) and 1000, got 5000 (example: REAPER_HISTORY_SIZE=200)")
}

// LoadLedgerAccess reads the ledger's own variables, resolved as Load
// resolves them, and needs nothing else: no scope, no credential. A bad
// value of what it reads, or a variable runner-reaper never reads, is
// refused with the variable's name and an example; a bad value of a
// variable it does not read is not its business.
func TestLoadLedgerAccess(t *testing.T) {
	setenv(t, map[string]string{})
	a, err := LoadLedgerAccess(false, "")
	require.NoError(t, err, "no scope, no credential")
	assert.Equal(t, LedgerAccess{Ledger: Ledger{Kind: LedgerFile, Path: "runner-reaper-ledger.json"}, KubeTimeout: 30 * time.Second, Timeout: 45 * time.Second}, a)
	a, err = LoadLedgerAccess(true, "reaper")
	require.NoError(t, err)
	assert.Equal(t, Ledger{Kind: LedgerConfigMap, Namespace: "reaper", Name: "runner-reaper-ledger"}, a.Ledger, "in a pod, the sweep's own default")

	setenv(t, map[string]string{"REAPER_LEDGER": "configmap:ops/reaper-ledger", "REAPER_KUBE_TIMEOUT": "5s",
		"REAPER_EKS_CLUSTER": "build-fleet", "REAPER_SWEEP_TIMEOUT": "2m", "REAPER_MAX_ACTIONS": "ten", "REAPER_SCOPES": "team:x"})
	a, err = LoadLedgerAccess(false, "")
	require.NoError(t, err, "the variables it does not read are left unread")
	assert.Equal(t, LedgerAccess{Ledger: Ledger{Kind: LedgerConfigMap, Namespace: "ops", Name: "reaper-ledger"},
		KubeTimeout: 5 * time.Second, EKSCluster: "build-fleet", Timeout: 2 * time.Minute}, a)

	for _, c := range []struct {
		name, k, v, varName, what string
	}{
		{"bad ledger", "REAPER_LEDGER", "configmap:ops", "REAPER_LEDGER", "is not configmap:NAMESPACE/NAME (example: REAPER_LEDGER="},
		{"bad timeout", "REAPER_KUBE_TIMEOUT", "0s", "REAPER_KUBE_TIMEOUT", "must be a positive duration, got 0s (example: REAPER_KUBE_TIMEOUT=30s)"},
		{"timeout too long", "REAPER_KUBE_TIMEOUT", "1h", "REAPER_KUBE_TIMEOUT", "must be at most 5m0s"},
		{"timeout not a duration", "REAPER_KUBE_TIMEOUT", "soon", "REAPER_KUBE_TIMEOUT", "cannot read \"soon\" as a duration"},
		{"no time to read", "REAPER_SWEEP_TIMEOUT", "0s", "REAPER_SWEEP_TIMEOUT", "must be a positive duration, got 0s (example: REAPER_SWEEP_TIMEOUT=45s)"},
		{"read too long", "REAPER_SWEEP_TIMEOUT", "2h", "REAPER_SWEEP_TIMEOUT", "must be at most 1h0m0s"},
		{"bad cluster", "REAPER_EKS_CLUSTER", "not a name!", "REAPER_EKS_CLUSTER", "not an EKS cluster name"},
		{"typo'd ledger", "REAPER_LEDGR", "configmap:ops/x", "REAPER_LEDGR", "did you mean REAPER_LEDGER?"},
		{"memory ledger", "REAPER_LEDGER", "memory", "REAPER_LEDGER", "memory keeps nothing after the sweep that wrote it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			setenv(t, map[string]string{c.k: c.v})
			_, err := LoadLedgerAccess(false, "")
			require.Error(t, err)
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), c.varName+": ")
			assert.Contains(t, err.Error(), c.what)
		})
	}
}

// Each variable LoadLedgerAccess reads is spec's own: the same field, so
// the same name, default and example.
func TestLedgerSpecIsPartOfSpec(t *testing.T) {
	part, whole := reflect.TypeFor[ledgerSpec](), reflect.TypeFor[spec]()
	for i := range part.NumField() {
		f := part.Field(i)
		w, ok := whole.FieldByName(f.Name)
		require.True(t, ok, "%s is not a field of spec", f.Name)
		assert.Equal(t, w.Type, f.Type, f.Name)
		assert.Equal(t, w.Tag, f.Tag, f.Name)
	}
}

// A loop setting out of bounds is refused whole, named, with an example.
func TestLoadLoopBounds(t *testing.T) {
	setenv(t, with(minimal(), "REAPER_LOOP_THRESHOLD", "2", "REAPER_LOOP_WINDOW", "24h"))
	c, err := Load(false, "")
	require.NoError(t, err)
	assert.Equal(t, loops.Policy{Threshold: 2, Window: 24 * time.Hour}, c.Loops, "the bounds are allowed")

	setenv(t, with(minimal(), "REAPER_LOOP_THRESHOLD", "1", "REAPER_LOOP_WINDOW", "25h"))
	_, err = Load(false, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REAPER_LOOP_THRESHOLD: must be between 2 and 50 actions, got 1 (example: REAPER_LOOP_THRESHOLD=5)")
	assert.Contains(t, err.Error(), "REAPER_LOOP_WINDOW: must be between 1m0s and 24h0m0s, got 25h0m0s (example: REAPER_LOOP_WINDOW=30m)")
}
