package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/state"
)

// onlyTheLedger leaves the process environment with REAPER_LEDGER and the
// kubeconfig alone: no scope, no token, no GitHub.
func onlyTheLedger(t *testing.T) {
	t.Helper()
	ledger := os.Getenv("REAPER_LEDGER")
	cleanEnv(t)
	t.Setenv("REAPER_LEDGER", ledger)
}

// A sweep reaps a terminal pod; history, with nothing but the ledger's
// variable, prints it: a table for a person, a line of JSON for a script,
// and one runner's alone. A bad value of a variable it does not read is
// not its business; a bad one of its own is exit 2.
func TestHistoryPrintsWhatASweepDid(t *testing.T) {
	w := setup(t)
	code, _, stderr := runCLI("sweep")
	require.Equal(t, 0, code, stderr)
	require.False(t, w.podExists(t, "acme-dead"))
	w.sim.ResetRequests()

	onlyTheLedger(t)
	t.Setenv("REAPER_MAX_ACTIONS", "ten")
	code, out, stderr := runCLI("history")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, "a header and the one action:\n%s", out)
	for _, want := range []string{"terminal", "Pod " + w.ns + "/acme-dead", "object=deleted", "[oom-host] exit 137 OOMKilled"} {
		assert.Contains(t, lines[1], want)
	}
	assert.Empty(t, w.sim.Requests(), "GitHub is asked nothing")

	code, out, stderr = runCLI("history", "--output", "json", "--runner", "acme-dead")
	require.Equal(t, 0, code, stderr)
	var r state.Record
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, "acme-dead", r.RunnerName)
	assert.Equal(t, "dev", r.Version)
	require.NotNil(t, r.Exit)
	assert.Equal(t, "oom-host", r.Exit.Class)

	code, out, stderr = runCLI("history", "--output", "json", "--runner", "acme-zombie")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, out, "no line for a script")
	assert.Contains(t, stderr, "no action on runner acme-zombie is recorded in configmap:"+w.ns+"/reaper-ledger")

	t.Setenv("REAPER_KUBE_TIMEOUT", "forever")
	code, out, stderr = runCLI("history")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "REAPER_KUBE_TIMEOUT")
	assert.Contains(t, stderr, "example: REAPER_KUBE_TIMEOUT=30s")
}

// An empty record is said plainly, exit 0: no ledger yet, or one that has
// recorded nothing.
func TestHistoryOfNothing(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	t.Setenv("REAPER_LEDGER", "file:"+path)
	code, out, stderr := runCLI("history")
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, "no action is recorded in file:"+path+" (there is no ledger there yet)\n", out)

	require.NoError(t, os.WriteFile(path, []byte(`{"format":4,"version":3,"ledger":{"marks":{}}}`), 0o600))
	code, out, stderr = runCLI("history")
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, "no action is recorded in file:"+path+"\n", out)
}

// A ledger that cannot be read is exit 1, saying what was being done and
// which ledger; the file is left as it was.
func TestHistoryOfAnUnreadableLedgerExitsOne(t *testing.T) {
	cleanEnv(t)
	path := filepath.Join(t.TempDir(), "ledger.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"format":5,"version":1,"ledger":{"history":"nope"}}`), 0o600))
	t.Setenv("REAPER_LEDGER", "file:"+path)
	code, out, stderr := runCLI("history")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "read the record of actions in file:"+path)
	assert.Contains(t, stderr, "cannot unmarshal string")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"format":5,"version":1,"ledger":{"history":"nope"}}`, string(b))

	t.Setenv("REAPER_LEDGER", "configmap:ops/ledger")
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "https://127.0.0.1:1"))
	code, _, stderr = runCLI("history")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "read the record of actions in configmap:ops/ledger: get ledger configmap ops/ledger")
}
