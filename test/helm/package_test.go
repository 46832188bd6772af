package helm

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// semVer is SemVer 2.0.0's own regular expression (semver.org), which
// Helm's chart versions follow.
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// makeIn runs make in the repository's root with args, helm's own
// directories in the test's (make's helm reads nothing of the machine's).
func makeIn(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("make", append([]string{"-s"}, args...)...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// The chart's version is the image's version (git describe) made SemVer
// as mk/helm.mk documents, the same every time; a version it cannot map
// is refused, naming the fix.
func TestChartVersionFollowsTheImageVersion(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3-rc.1"},
		{"v1.2.3-4-gabc1234", "1.2.4-0.4.gabc1234"},
		{"v1.2.3-rc.1-4-gabc1234", "1.2.3-rc.1.0.4.gabc1234"},
		{"v1.9.9-12-g0123456", "1.9.10-0.12.g0123456"},
		{"e489eb0", "0.0.0-0.ge489eb0"},
		{"0123456", "0.0.0-0.g0123456"},
		{"e489eb0-dirty", "0.0.0-0.ge489eb0.dirty"},
		{"v1.2.3-dirty", "1.2.3-dirty"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.4-0.4.gabc1234.dirty"},
		{"dev", "0.0.0-dev"},
		{"v1.2", ""},
		{"v01.2.3", ""},
		{"v1.2.3-01", ""},
		{"release-7", ""},
	} {
		t.Run(c.version, func(t *testing.T) {
			t.Parallel()
			out, err := makeIn(t, "chart-version", "VERSION="+c.version)
			if c.want == "" {
				require.Error(t, err, "VERSION=%s was mapped to %q", c.version, out)
				assert.Contains(t, out, "say VERSION=vX.Y.Z")
				return
			}
			require.NoError(t, err, out)
			got := strings.TrimSpace(out)
			assert.Equal(t, c.want, got)
			assert.Regexp(t, semVer, got, "a SemVer Helm accepts")
		})
	}
}

// `make chart` packages the chart with the image's version; the package
// pushed to an OCI registry (go-containerregistry's, on loopback) comes
// back with that version and appVersion, and renders from its OCI
// reference with the image of that version.
func TestPackagedChartPushesToAndInstallsFromAnOCIRegistry(t *testing.T) {
	const version, semver = "v1.2.3-4-gabc1234", "1.2.4-0.4.gabc1234"
	helmPath(t) // fails, naming `make helm`, before make would build it
	dist := t.TempDir()
	out, err := makeIn(t, "chart", "VERSION="+version, "DIST="+dist)
	require.NoError(t, err, out)
	pkg := filepath.Join(dist, "runner-reaper-"+semver+".tgz")
	require.FileExists(t, pkg)

	meta := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		stdout, stderr, err := helm(t, helmEnv(t), append([]string{"show", "chart"}, args...)...)
		require.NoError(t, err, stderr)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(stdout), &m))
		return m
	}
	m := meta(t, pkg)
	assert.Equal(t, semver, m["version"], "the package's version")
	assert.Equal(t, version, m["appVersion"], "the package's appVersion is the image's tag")

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := "oci://" + strings.TrimPrefix(reg.URL, "http://") + "/charts"
	env := helmEnv(t)
	stdout, stderr, err := helm(t, env, "push", pkg, repo, "--plain-http")
	require.NoError(t, err, "%s%s", stdout, stderr)
	ref := repo + "/runner-reaper"

	t.Run("helm show chart from the registry", func(t *testing.T) {
		m := meta(t, ref, "--version", semver, "--plain-http")
		assert.Equal(t, semver, m["version"])
		assert.Equal(t, version, m["appVersion"])
	})
	t.Run("helm pull gives the package pushed", func(t *testing.T) {
		dir := t.TempDir()
		_, stderr, err := helm(t, env, "pull", ref, "--version", semver, "--plain-http", "--destination", dir)
		require.NoError(t, err, stderr)
		pushed, err := os.ReadFile(pkg)
		require.NoError(t, err)
		pulled, err := os.ReadFile(filepath.Join(dir, "runner-reaper-"+semver+".tgz"))
		require.NoError(t, err)
		assert.Equal(t, pushed, pulled, "the same bytes")
	})
	t.Run("helm template from the registry runs the image of its version", func(t *testing.T) {
		stdout, stderr, err := helm(t, env, "template", release, ref, "--version", semver, "--plain-http", "--namespace", namespace)
		require.NoError(t, err, stderr)
		cj := find(decode(t, stdout), "CronJob", namespace, release)
		require.NotNil(t, cj)
		spec := cj.Object["spec"].(map[string]any)["jobTemplate"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:"+version, spec["containers"].([]any)[0].(map[string]any)["image"])
	})
}
