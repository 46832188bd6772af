package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// awsStandIns points the binary's AWS clients at local stand-ins with
// fixed credentials, and nothing else of the machine's AWS setup.
func awsStandIns(e map[string]string, endpoints map[string]string) {
	for k, v := range map[string]string{
		"AWS_REGION":                  "us-east-1",
		"AWS_ACCESS_KEY_ID":           "AKIDCLITEST",
		"AWS_SECRET_ACCESS_KEY":       "cli-test-secret",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		e[k] = v
	}
	for k, v := range endpoints {
		e[k] = v
	}
}

// The CLI is built by the same composition root as the Lambda: a setting
// one honours, the other honours too. Each of these was once accepted by
// the CLI and ignored or mishandled.
func TestCLIHonoursEverySetting(t *testing.T) {
	t.Parallel()

	t.Run("REAPER_GITHUB_SECRET_ARN: the token comes from Secrets Manager", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, nil)
		sm, calls := secretsManager(t, w.token)
		delete(w.env, "REAPER_GITHUB_TOKEN")
		w.env["REAPER_GITHUB_SECRET_ARN"] = secretARN
		awsStandIns(w.env, map[string]string{"AWS_ENDPOINT_URL_SECRETS_MANAGER": sm.URL})
		w.runner("acme-done", "offline", false)
		w.pod("acme-done", testenv.PodState{Phase: corev1.PodSucceeded, Terminated: testenv.Terminated(0, 0, "Completed")})

		r := w.sweep()
		r.requireCode(t, 0)
		assert.EqualValues(t, 1, calls.Load(), "the secret was read once")
		assert.Equal(t, 1, r.results()["deleted"], "the sweep reached GitHub with the token from the secret")
		assert.False(t, w.podExists("acme-done"))
	})

	t.Run("REAPER_METRICS_NAMESPACE: EMF lines beside the log lines", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, map[string]string{"REAPER_METRICS_NAMESPACE": "RunnerReaperCLI"})
		w.runner("acme-ok", "online", false)
		w.pod("acme-ok", testenv.Running())
		r := w.sweep()
		r.requireCode(t, 0)
		var emf int
		for _, l := range r.Logs {
			meta, ok := l["_aws"].(map[string]any)
			if !ok {
				continue
			}
			emf++
			b, err := json.Marshal(meta)
			require.NoError(t, err)
			assert.Contains(t, string(b), `"Namespace":"RunnerReaperCLI"`)
		}
		assert.Positive(t, emf, "the CLI wrote EMF metric lines; stdout:\n%s", r.Stdout)
	})

	t.Run("REAPER_EKS_CLUSTER: the cluster is reached through EKS, not the kubeconfig", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var asked []string
		eks := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked = append(asked, r.Method+" "+r.URL.Path)
			mu.Unlock()
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusNotFound)
			_, _ = rw.Write([]byte(`{"message":"No cluster found for name: build-fleet."}`))
		}))
		t.Cleanup(eks.Close)
		w := newWorld(t, map[string]string{"REAPER_EKS_CLUSTER": "build-fleet"})
		awsStandIns(w.env, map[string]string{"AWS_ENDPOINT_URL_EKS": eks.URL})
		w.runner("acme-done", "offline", false)
		w.pod("acme-done", testenv.PodState{Phase: corev1.PodSucceeded, Terminated: testenv.Terminated(0, 0, "Completed")})

		r := w.sweep()
		assert.NotEqual(t, 0, r.Code, "a cluster EKS does not know is not swept")
		mu.Lock()
		assert.Equal(t, []string{"GET /clusters/build-fleet"}, asked, "DescribeCluster was asked for the named cluster")
		mu.Unlock()
		assert.True(t, strings.Contains(r.Stderr, "build-fleet"), "the error names the cluster: %s", r.Stderr)
		assert.True(t, w.podExists("acme-done"), "the kubeconfig's cluster was not swept instead")
		assert.Empty(t, w.sim.Requests(), "nothing was asked of GitHub")
	})
}
