package helm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// arcSecretName is a Secret as ARC's gha-runner-scale-set chart names the
// one it writes from githubConfigSecret (RELEASE-gha-rs-github-secret).
const arcSecretName = "arc-runner-set-gha-rs-github-secret"

// secretRefs are the rendered container's variables read from a Secret:
// the variable's name, then the Secret's name and key.
func secretRefs(t *testing.T, objs []*unstructured.Unstructured) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	vars, _, _ := unstructured.NestedSlice(container(t, objs), "env")
	for _, raw := range vars {
		v := raw.(map[string]any)
		name, ok, _ := unstructured.NestedString(v, "valueFrom", "secretKeyRef", "name")
		if !ok {
			continue
		}
		key, _, _ := unstructured.NestedString(v, "valueFrom", "secretKeyRef", "key")
		out[v["name"].(string)] = [2]string{name, key}
	}
	return out
}

// With github.secretLayout: arc the chart reads the Secret an ARC runner
// scale set already has, by ARC's own keys (its appconfig package reads
// github_token, or github_app_id, github_app_installation_id and
// github_app_private_key): the token from github_token; with App auth the
// App's id and installation id from the Secret too, not from values, so
// the ConfigMap holds neither. The binary accepts the environment a pod
// would get from a Secret as ARC's chart writes it (only the keys set).
func TestARCSecretLayoutReadsARCsKeys(t *testing.T) {
	pem := appSecret(t)["private-key"]
	for _, c := range []struct {
		name   string
		auth   string
		secret secretData
		refs   map[string][2]string
	}{
		{name: "token", auth: "token", secret: secretData{"github_token": "ghp_arc_layout_token"},
			refs: map[string][2]string{"REAPER_GITHUB_TOKEN": {arcSecretName, "github_token"}}},
		{name: "App", auth: "app",
			secret: secretData{"github_app_id": "123456", "github_app_installation_id": "7890123", "github_app_private_key": pem},
			refs: map[string][2]string{
				"REAPER_GITHUB_APP_ID":          {arcSecretName, "github_app_id"},
				"REAPER_GITHUB_INSTALLATION_ID": {arcSecretName, "github_app_installation_id"},
				"REAPER_GITHUB_PRIVATE_KEY":     {arcSecretName, "github_app_private_key"},
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := mustRender(t, namespace, map[string]any{"github": map[string]any{
				"secretLayout": "arc", "auth": c.auth, "existingSecret": arcSecretName}})
			assert.Equal(t, c.refs, secretRefs(t, objs), "every credential from ARC's Secret, by ARC's keys")
			for _, k := range []string{"REAPER_GITHUB_TOKEN", "REAPER_GITHUB_APP_ID", "REAPER_GITHUB_INSTALLATION_ID", "REAPER_GITHUB_PRIVATE_KEY"} {
				assert.NotContains(t, configData(t, objs), k, "no credential in the ConfigMap")
			}

			cfg, err := load(t, namespace, podEnv(t, objs, c.secret))
			require.NoError(t, err, "the binary accepts what ARC's Secret gives the pod")
			if c.auth == "app" {
				assert.EqualValues(t, 123456, cfg.GitHub.AppID)
				assert.EqualValues(t, 7890123, cfg.GitHub.InstallationID)
				assert.Equal(t, pem, string(cfg.GitHub.PrivateKey))
				assert.Empty(t, cfg.GitHub.Token)
			} else {
				assert.Equal(t, "ghp_arc_layout_token", cfg.GitHub.Token)
				assert.Zero(t, cfg.GitHub.AppID)
			}
		})
	}

	// The reaper's own layout is unchanged: keys token and private-key,
	// or those named, and the App's ids from the values.
	objs := mustRender(t, namespace, nil)
	assert.Equal(t, map[string][2]string{"REAPER_GITHUB_TOKEN": {"runner-reaper-github", "token"}}, secretRefs(t, objs))
	objs = mustRender(t, namespace, appValues())
	assert.Equal(t, map[string][2]string{"REAPER_GITHUB_PRIVATE_KEY": {"runner-reaper-github", "private-key"}}, secretRefs(t, objs))
	assert.Equal(t, "1", configData(t, objs)["REAPER_GITHUB_APP_ID"])
	assert.Equal(t, "2", configData(t, objs)["REAPER_GITHUB_INSTALLATION_ID"])
}

// ARC's gha-runner-scale-set takes a GitHub App's client id in
// github_app_id as well as its number; the reaper reads
// REAPER_GITHUB_APP_ID as a number, so such a Secret is refused when the
// sweep starts (exit 2, naming the variable), never later: what the chart
// cannot see in the Secret, the binary refuses at start-up.
func TestARCSecretWithAClientIDIsRefusedAtStartup(t *testing.T) {
	objs := mustRender(t, namespace, map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}})
	secret := secretData{"github_app_id": "Iv23liAbCdEfGhIjKlMn", "github_app_installation_id": "7890123",
		"github_app_private_key": appSecret(t)["private-key"]}
	_, err := load(t, namespace, podEnv(t, objs, secret))
	refusedFor(t, err, "REAPER_GITHUB_APP_ID", secret["github_app_id"])
}
