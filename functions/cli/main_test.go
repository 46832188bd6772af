package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the one real control plane this package's tests share, started
// by the first test that needs it; each test works in namespaces of its own.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }

const secret = "ghp_cli_test_secret_value"

// world is a namespace with one dead runner pod and one zombie, a
// simulator, and the environment the CLI reads.
type world struct {
	ns  string
	sim *ghsim.Sim
}

func setup(t *testing.T) world {
	t.Helper()
	env := plane.Env(t)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "REAPER_") {
			k, _, _ := strings.Cut(kv, "=")
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	sim := ghsim.New(ghsim.Options{Token: secret})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope("org:acme")
	sim.AddRunner("org:acme", ghsim.Runner{Name: "acme-zombie", OS: "linux", Status: "offline"})
	ns := env.Namespace(t, "cli")
	kubeconfig, err := env.Kubeconfig(t.TempDir())
	require.NoError(t, err)
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for k, v := range map[string]string{
		"REAPER_SCOPES":         "org:acme",
		"REAPER_NAMESPACES":     ns,
		"REAPER_GITHUB_TOKEN":   secret,
		"REAPER_GITHUB_API_URL": url,
		"REAPER_LEDGER":         "configmap:" + ns + "/reaper-ledger",
	} {
		t.Setenv(k, v)
	}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "acme-dead", Org: "acme", PodState: testenv.PodState{
		Phase: corev1.PodFailed, Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}})
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "acme-zombie", Org: "acme", PodState: testenv.Running()})
	return world{ns: ns, sim: sim}
}

func (w world) podExists(t *testing.T, name string) bool {
	t.Helper()
	env := plane.Env(t)
	return env.PodExists(t, w.ns, name)
}

func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSweepExitsZeroAndReapsTerminal(t *testing.T) {
	w := setup(t)
	code, out, stderr := runCLI("sweep")
	assert.Equal(t, 0, code, stderr)
	assert.False(t, w.podExists(t, "acme-dead"))
	assert.True(t, w.podExists(t, "acme-zombie"), "a zombie waits for confirmation")
	assert.Contains(t, out, `"msg":"action"`)
	assert.Contains(t, out, `"exit_class":"oom-host"`)
	assert.Contains(t, out, `"msg":"sweep"`)
	assert.NotContains(t, out+stderr, secret, "safety rule 5: no secret in any line")
}

func TestBadConfigurationExitsTwoAndTouchesNothing(t *testing.T) {
	cases := map[string][2]string{
		"bad duration":    {"REAPER_CONFIRM_AFTER", "5 minutes"},
		"bad scope":       {"REAPER_SCOPES", "team:acme"},
		"bad selector":    {"REAPER_POD_SELECTOR", "app in (x"},
		"typo'd variable": {"REAPER_DRYRUN", "true"},
		// The Lambda sets it; a hostile or broken one must not leave the
		// process without a limit it believes it has.
		"bad Lambda memory": {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512MB"},
	}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			w := setup(t)
			t.Setenv(kv[0], kv[1])
			code, out, stderr := runCLI("sweep")
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, kv[0], "the message names the variable")
			assert.Contains(t, stderr, "example", "the message gives a right example")
			assert.Empty(t, out)
			assert.Empty(t, w.sim.Requests(), "nothing was asked of GitHub")
			assert.True(t, w.podExists(t, "acme-dead"), "nothing was deleted")
			assert.NotContains(t, stderr, secret)
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{}, {"reap"}, {"audit", "--output", "yaml"}, {"sweep", "--force"},
		{"sweep", "--runner", "acme-1"}, {"audit", "--runner", "acme-1"}, {"history", "--output", "yaml"},
		{"history", "--dry-run"}, {"history", "acme-1"}, {"history", "--runner"}, {"history", "--runner", ""},
		{"serve", "--output", "json"}, {"serve", "--runner", "acme-1"}, {"serve", "now"}} {
		code, _, _ := runCLI(args...)
		assert.Equal(t, 2, code, "%v", args)
	}
}

func TestAuditPrintsTableAndChangesNothing(t *testing.T) {
	env := plane.Env(t)
	w := setup(t)
	code, out, stderr := runCLI("audit")
	assert.Equal(t, 0, code, stderr)
	assert.True(t, w.podExists(t, "acme-dead"), "an audit deletes nothing")
	for _, want := range []string{"VERDICT", "terminal", w.ns + "/acme-dead", "now: delete pod", "[oom-host]", "zombie", "acme-zombie", "mark: first seen now"} {
		assert.Contains(t, out, want)
	}
	_, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), "reaper-ledger", metav1.GetOptions{})
	assert.Error(t, err, "an audit writes no ledger")

	code, out, _ = runCLI("audit", "--output", "json")
	assert.Equal(t, 0, code)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	assert.Len(t, rows, 2)
}

func TestDegradedScopeExitsThree(t *testing.T) {
	w := setup(t)
	w.sim.Fault("org:acme", "list", ghsim.Fault{Status: 502})
	code, out, _ := runCLI("sweep")
	assert.Equal(t, 3, code)
	assert.Contains(t, out, `"msg":"scope skipped"`)
	assert.False(t, w.podExists(t, "acme-dead"), "the kubelet's word needs no list")
}

func TestCannotObserveExitsOne(t *testing.T) {
	w := setup(t)
	// Credentials GitHub refuses are a skipped scope; a kubeconfig that
	// points nowhere is a sweep that cannot observe.
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "https://127.0.0.1:1"))
	code, _, stderr := runCLI("sweep")
	assert.Equal(t, 1, code, stderr)
	assert.True(t, w.podExists(t, "acme-dead"))
}

func TestWrongTokenNeverLogged(t *testing.T) {
	setup(t)
	wrong := "ghp_wrong_token_must_not_leak"
	t.Setenv("REAPER_GITHUB_TOKEN", wrong)
	code, out, stderr := runCLI("sweep")
	assert.Equal(t, 3, code, "GitHub refusing the token skips the scope")
	assert.NotContains(t, out+stderr, wrong)
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := t.TempDir() + "/kubeconfig"
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// A word the command does not take exits 2 with the usage wherever it
// stands, before anything is read or deleted; flags are read wherever they
// stand.
func TestStrayWordsExitTwoAndTouchNothing(t *testing.T) {
	w := setup(t)
	for _, args := range [][]string{{"sweep", "extra-arg", "--dry-run"}, {"sweep", "--dry-run", "extra"}, {"audit", "--output", "json", "x"}} {
		code, out, stderr := runCLI(args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "unexpected argument", "%v", args)
		assert.Contains(t, stderr, "usage:", "%v", args)
		assert.Empty(t, out, "%v", args)
		assert.Empty(t, w.sim.Requests(), "%v: nothing was asked of GitHub", args)
		assert.True(t, w.podExists(t, "acme-dead"), "%v: nothing was deleted", args)
	}
	code, out, stderr := runCLI("--dry-run", "sweep")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"mode":"dry-run"`)
	assert.True(t, w.podExists(t, "acme-dead"), "a flag before the command is read")

	for _, help := range []string{"-h", "--help", "help"} {
		code, out, _ := runCLI(help)
		assert.Equal(t, 0, code, help)
		assert.Contains(t, out, "usage:", help)
	}
}

// --version answers before any configuration is read: an operator checking
// which build an image holds has no REAPER_* variables set, and must not be
// told about them instead. A plain `go build` says it is a dev build.
func TestVersionPrintsBuildAndNeedsNoConfiguration(t *testing.T) {
	w := setup(t)
	t.Setenv("REAPER_SCOPES", "")
	for _, args := range [][]string{{"--version"}, {"sweep", "--version"}, {"version"}} {
		code, out, stderr := runCLI(args...)
		assert.Equal(t, 0, code, "%v: %s", args, stderr)
		assert.Equal(t, "runner-reaper dev (revision unknown)\n", out, "%v", args)
		assert.Empty(t, stderr, "%v", args)
	}
	assert.Empty(t, w.sim.Requests(), "nothing was asked of GitHub")
	assert.True(t, w.podExists(t, "acme-dead"), "nothing was deleted")
}

// The summary line says which build swept.
func TestSummaryCarriesVersionAndRevision(t *testing.T) {
	setup(t)
	code, out, stderr := runCLI("sweep", "--dry-run")
	require.Equal(t, 0, code, stderr)
	summary := summaryLine(t, out)
	assert.Equal(t, "dev", summary["version"])
	assert.Equal(t, "unknown", summary["revision"])
	assert.Regexp(t, `^configmap:[a-z0-9-]+/reaper-ledger$`, summary["ledger"], "the summary says which ledger")
}

// summaryLine is the sweep's summary line in out, decoded.
func summaryLine(t *testing.T, out string) map[string]any {
	t.Helper()
	var summary map[string]any
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"msg":"sweep"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &summary))
		}
	}
	require.NotNil(t, summary, "a summary line: %s", out)
	return summary
}

// Run by hand outside a pod with REAPER_LEDGER unset, a sweep keeps its
// marks in a file in the working directory, and its summary says which,
// by its absolute path.
func TestSummaryNamesTheDefaultLedgerFile(t *testing.T) {
	setup(t)
	t.Setenv("REAPER_LEDGER", "")
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, stderr := runCLI("sweep", "--dry-run")
	require.Equal(t, 0, code, stderr)
	summary := summaryLine(t, out)
	assert.Equal(t, "file:"+filepath.Join(dir, "runner-reaper-ledger.json"), summary["ledger"])
	assert.FileExists(t, filepath.Join(dir, "runner-reaper-ledger.json"), "a dry run saves its marks")
}
