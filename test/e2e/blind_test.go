package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An audit that cannot reach the API server prints no table: not "0
// pod(s), 0 finding(s)", not [] as JSON, which an operator reads as
// "nothing to clean". It says in one plain line what it could not reach
// and why, exits 1, and does not blame a watch-list the server never got
// the chance to refuse.
func TestAuditThatCannotReachTheAPIServerShowsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: gone, context: {cluster: gone, user: u}}]
current-context: gone
`, addr)), 0o600))
	w.env["KUBECONFIG"] = kc

	table := w.exec("audit")
	table.requireCode(t, 1)
	lines := strings.Split(strings.TrimSuffix(table.Stdout, "\n"), "\n")
	require.Len(t, lines, 1, "one plain line, no table:\n%s", table.Stdout)
	assert.True(t, strings.HasPrefix(lines[0], "audit could not look, so it shows nothing: "), lines[0])
	assert.Contains(t, lines[0], addr)
	assert.Contains(t, lines[0], "connection refused")
	assert.NotContains(t, table.Stdout, "finding(s)")
	assert.NotContains(t, table.Stderr, "gave no watch-list", "the server refused nothing: it was not reached")

	js := w.exec("audit", "--output", "json")
	js.requireCode(t, 1)
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(js.Stdout), &got), "an error object, not a list: %s", js.Stdout)
	assert.Contains(t, got["error"], "connection refused")
}
