package cronjob_test

// components/arc-secret and components/arc-secret-app: the CronJob reads
// its GitHub credentials from the Secret an ARC runner scale set already
// has, by ARC's own keys, named in an overlay exactly as each component's
// comment shows. What they render is accepted by a real API server; they
// change the container's Secret variables and nothing else; and the
// binary's start-up check accepts the environment a pod gets from such a
// Secret, created on the API server as ARC's chart writes it.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// arcSecretName is the Secret the components' comments name: as ARC's
// gha-runner-scale-set chart names the one it writes from
// githubConfigSecret (RELEASE-gha-rs-github-secret).
const arcSecretName = "arc-runner-set-gha-rs-github-secret"

// documentedPatches are the overlay's patches a component's comment
// shows: its lines from "#   patches:" to the comment's next empty line,
// uncommented.
func documentedPatches(t *testing.T, component string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(baseDir(t), "components", component, "kustomization.yaml"))
	require.NoError(t, err)
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "#   patches:" {
			in = true
		}
		if !in {
			continue
		}
		if strings.TrimSpace(line) == "#" {
			break
		}
		out = append(out, strings.TrimPrefix(line, "#   "))
	}
	require.NotEmpty(t, out, "components/%s's comment shows the overlay's patches", component)
	return strings.Join(out, "\n") + "\n"
}

// arcSecretOverlay renders the overlay a component's comment shows: the
// base, the component, and its patches naming ARC's Secret.
func arcSecretOverlay(t *testing.T, component string) manifest {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(baseDir(t), p))
		require.NoError(t, err)
		return r
	}
	k := "resources: [" + rel(".") + "]\ncomponents: [" + rel(filepath.Join("components", component)) + "]\n" + documentedPatches(t, component)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600))
	return parse(t, testenv.Kustomize(t, testenv.Kustomization{Base: dir}))
}

// loadEnv runs the binary's start-up check over exactly env, as a pod in
// the base's namespace.
func loadEnv(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix+"_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return config.Load(true, shippedNamespace)
}

func TestARCSecretComponentsReadARCsKeys(t *testing.T) {
	shippedNamespaceExists(t)
	env := plane.Env(t)
	ctx := context.Background()
	base := render(t, false)
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	key := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))

	for _, c := range []struct {
		component string
		// secret is what ARC's chart writes for the auth: only the keys set.
		secret map[string]string
		// refs are the container's Secret variables, by ARC's keys.
		refs map[string]string
	}{
		{component: "arc-secret", secret: map[string]string{"github_token": token},
			refs: map[string]string{"REAPER_GITHUB_TOKEN": "github_token"}},
		{component: "arc-secret-app",
			secret: map[string]string{"github_app_id": "123456", "github_app_installation_id": "7890123", "github_app_private_key": key},
			refs: map[string]string{"REAPER_GITHUB_APP_ID": "github_app_id", "REAPER_GITHUB_INSTALLATION_ID": "github_app_installation_id",
				"REAPER_GITHUB_PRIVATE_KEY": "github_app_private_key"}},
	} {
		t.Run(c.component, func(t *testing.T) {
			m := arcSecretOverlay(t, c.component)
			stdout, stderr, err := serverDryRun(t, m.YAML)
			require.NoError(t, err, "kubectl apply --dry-run=server:\n%s%s", stdout, stderr)
			assert.NotContains(t, strings.ToLower(stderr), "warning")

			ctr := m.CronJob.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
			refs := map[string]string{}
			for _, e := range ctr.Env {
				require.NotNil(t, e.ValueFrom, "%s is read from the Secret", e.Name)
				require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s is read from the Secret", e.Name)
				assert.Equal(t, arcSecretName, e.ValueFrom.SecretKeyRef.Name, "%s reads ARC's Secret, as the overlay names it", e.Name)
				refs[e.Name] = e.ValueFrom.SecretKeyRef.Key
			}
			assert.Equal(t, c.refs, refs, "each credential by ARC's key, and nothing else from a Secret")

			// Nothing else changes: the container's Secret variables are
			// the base's but for these.
			cj := m.CronJob.DeepCopy()
			cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env = base.CronJob.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
			assert.Equal(t, base.CronJob, cj)
			assert.Equal(t, base.Kinds, m.Kinds)
			assert.Equal(t, base.Config, m.Config)
			assert.Equal(t, base.Role, m.Role)
			assert.Equal(t, base.Binding, m.Binding)
			assert.Equal(t, base.SA, m.SA)
			assert.Equal(t, base.Ledger, m.Ledger)

			// The Secret as ARC's chart writes it, on the API server; the
			// pod's environment is its keys, as the kubelet resolves each
			// reference, and the ConfigMap's.
			ns := env.Namespace(t, "arc-secret")
			data := map[string][]byte{}
			for k, v := range c.secret {
				data[k] = []byte(v)
			}
			_, err = env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: arcSecretName}, Data: data},
				metav1.CreateOptions{})
			require.NoError(t, err)
			s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, arcSecretName, metav1.GetOptions{})
			require.NoError(t, err)
			vars := map[string]string{}
			for k, v := range m.Config.Data {
				vars[k] = v
			}
			for _, e := range ctr.Env {
				v, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]
				require.True(t, ok, "ARC's Secret holds the key %s", e.ValueFrom.SecretKeyRef.Key)
				vars[e.Name] = string(v)
			}
			cfg, err := loadEnv(t, vars)
			require.NoError(t, err, "the binary accepts what ARC's Secret gives the pod")
			if c.component == "arc-secret-app" {
				assert.EqualValues(t, 123456, cfg.GitHub.AppID)
				assert.EqualValues(t, 7890123, cfg.GitHub.InstallationID)
				assert.Equal(t, key, string(cfg.GitHub.PrivateKey))
				assert.Empty(t, cfg.GitHub.Token)
			} else {
				assert.Equal(t, token, cfg.GitHub.Token)
				assert.Zero(t, cfg.GitHub.AppID)
			}
		})
	}
}
