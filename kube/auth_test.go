package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestRESTConfigFromKubeconfig: outside a pod, RESTConfig reads KUBECONFIG
// and the result reaches the real API server.
func TestRESTConfigFromKubeconfig(t *testing.T) {
	env := plane.Env(t)
	path, err := env.Kubeconfig(t.TempDir())
	require.NoError(t, err)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", path)

	cfg, err := RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSuffix(env.Config.Host, "/"), strings.TrimSuffix(cfg.Host, "/"))

	ns := env.Namespace(t, "kube")
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	pods, err := c.ListPods(context.Background(), []string{ns}, "", Mapping{})
	require.NoError(t, err)
	assert.Empty(t, pods)
	assert.Equal(t, int64(1), c.Counts().Requests)
}

// TestRESTConfigOrder: in-cluster first, then the kubeconfig, and an error
// that says what was tried.
func TestRESTConfigOrder(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://from-kubeconfig.example:6443"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`), 0o600))
	missing := filepath.Join(dir, "missing")

	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://10.0.0.1:443"}, nil }
	notInCluster := func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	noToken := func() (*rest.Config, error) {
		return nil, errors.New("open /var/run/secrets/kubernetes.io/serviceaccount/token: no such file or directory")
	}

	tests := []struct {
		name      string
		explicit  bool
		inCluster func() (*rest.Config, error)
		path      string
		wantHost  string
		wantErr   []string
	}{
		{"in a pod", false, inCluster, kubeconfig, "https://10.0.0.1:443", nil},
		{"in a pod with KUBECONFIG set: KUBECONFIG wins", true, inCluster, kubeconfig, "https://from-kubeconfig.example:6443", nil},
		{"KUBECONFIG set but missing: an error, not another cluster", true, inCluster, missing, "", []string{"KUBECONFIG=" + missing}},
		{"not in a pod: kubeconfig", false, notInCluster, kubeconfig, "https://from-kubeconfig.example:6443", nil},
		{"in a pod without a token: kubeconfig", false, noToken, kubeconfig, "https://from-kubeconfig.example:6443", nil},
		{"neither", false, notInCluster, missing, "", []string{"not running in a pod", "KUBERNETES_SERVICE_HOST", "kubeconfig (tried " + missing}},
		{"in-cluster broken and no kubeconfig", false, noToken, missing, "", []string{"in-cluster config failed", "serviceaccount/token", "kubeconfig (tried " + missing}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			explicit := ""
			if tc.explicit {
				explicit = tc.path
			}
			cfg, err := restConfig(explicit, tc.inCluster, &clientcmd.ClientConfigLoadingRules{ExplicitPath: tc.path})
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantHost, cfg.Host)
		})
	}

	// Outside a pod with no kubeconfig at its default places: the error
	// says what to do, not client-go's hint about KUBERNETES_MASTER, which
	// nothing here reads.
	_, err := restConfig("", notInCluster, &clientcmd.ClientConfigLoadingRules{Precedence: []string{missing}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubeconfig (tried "+missing+"): no kubeconfig was found there: set KUBECONFIG")
	assert.NotContains(t, err.Error(), "KUBERNETES_MASTER")
}
