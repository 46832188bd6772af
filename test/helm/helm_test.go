// Package helm checks the Helm chart (charts/runner-reaper) with the real
// helm that `make helm` builds: its schema against the binary's start-up
// checks, its RBAC against the kustomize base's, lint, packaging, and a
// push to and install from an OCI registry. The chart installed on a real
// kubelet is k8s-cronjob/cluster's TestHelmInstallOnARealKubelet.
package helm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	// release and namespace are the kustomize base's: a release named
	// runner-reaper gives the base's object names.
	release   = "runner-reaper"
	namespace = "arc-runners"
)

// root is the repository's root.
func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	require.NoError(t, err)
	return r
}

// chartDir is the chart in the tree.
func chartDir(t testing.TB) string { return filepath.Join(root(t), "charts", "runner-reaper") }

// helmPath is the helm `make helm` builds. Without it the test fails naming
// the target, or skips under -short (`make unit`, which builds nothing).
func helmPath(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(root(t), ".cache", "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("helm is not built (%s); `make helm` builds it, `make test` runs this", bin)
		}
		t.Fatalf("helm is not built: run `make helm` (builds %s from tools/helm): %v", bin, err)
	}
	return bin
}

// helmEnv is the environment helm runs in: its config, cache and data in
// the test's own directory, and no kubeconfig or registry login of the
// machine's, so nothing outside the repository and the test is read.
func helmEnv(t testing.TB) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"DOCKER_CONFIG=" + filepath.Join(home, "docker"),
		"KUBECONFIG=" + filepath.Join(home, "kubeconfig"),
	}
	return env
}

// helm runs helm with args and returns its stdout, stderr and error.
func helm(t testing.TB, env []string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmPath(t), args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// valuesFile writes values as JSON (which is YAML) into the test's
// directory, so that every string, control characters included, reaches
// helm exactly: encoding/json escapes the C0 controls, and DEL and the C1
// controls, which it leaves as they are and YAML refuses, are escaped
// here.
func valuesFile(t testing.TB, values map[string]any) string {
	t.Helper()
	b, err := json.Marshal(values)
	require.NoError(t, err)
	var escaped strings.Builder
	for _, r := range string(b) {
		if r >= 0x7f && r <= 0x9f {
			fmt.Fprintf(&escaped, `\u%04x`, r)
			continue
		}
		escaped.WriteRune(r)
	}
	// Not t.TempDir(): its name comes from the test's, which may hold a
	// comma, and helm splits --values at commas.
	dir, err := os.MkdirTemp("", "helm-values-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(f, []byte(escaped.String()), 0o600))
	return f
}

const (
	// testScope is the scope installable gives a release that names none:
	// the kustomize base's, so that the two configure the binary alike.
	testScope = "org:example-org"
	// testTag is the image tag installable gives a release that names no
	// image: the chart in the tree has no appVersion to default to.
	testTag = "v0.0.0-chart-test"
)

// installable is values with what an install from the tree must say and
// the chart cannot default: scopes, and the image's tag (unless a tag or a
// digest is given). Each is added only where values leave it out, so a
// test of either sets it, and a test of its absence calls helmTemplate.
func installable(values map[string]any) map[string]any {
	out := deepCopy(values)
	if _, ok := out["scopes"]; !ok {
		out["scopes"] = []any{testScope}
	}
	image, _ := out["image"].(map[string]any)
	_, tag := image["tag"]
	_, digest := image["digest"]
	if !tag && !digest {
		out = with(out, "image.tag", testTag)
	}
	return out
}

// installableArgs are installable's values as --set flags, for a helm
// command that is given no values file.
var installableArgs = []string{"--set", "scopes={" + testScope + "}", "--set", "image.tag=" + testTag}

// render is `helm template` of the chart in the tree, as release into
// namespace ns, with values made installable (nil: the chart's defaults);
// it returns the objects, or helm's error with its stderr.
func render(t testing.TB, ns string, values map[string]any, extra ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderChart(t, chartDir(t), ns, values, extra...)
}

func renderChart(t testing.TB, chart, ns string, values map[string]any, extra ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplate(t, chart, release, ns, installable(values), extra...)
}

// renderRelease is render as the release rel.
func renderRelease(t testing.TB, rel, ns string, values map[string]any, extra ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplate(t, chartDir(t), rel, ns, installable(values), extra...)
}

// helmTemplate is `helm template` with values exactly as given (nil: the
// chart's own).
func helmTemplate(t testing.TB, chart, rel, ns string, values map[string]any, extra ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	args := []string{"template", rel, chart, "--namespace", ns}
	if values != nil {
		args = append(args, "--values", valuesFile(t, values))
	}
	stdout, stderr, err := helm(t, helmEnv(t), append(args, extra...)...)
	if err != nil {
		return nil, errors.New(stderr)
	}
	return decode(t, stdout), nil
}

// mustRender is render that fails the test on helm's error.
func mustRender(t testing.TB, ns string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, ns, values)
	require.NoError(t, err, "helm template")
	return objs
}

// decode splits a multi-document YAML stream into objects. Each document
// is read strictly first: a key twice in one mapping (a user's label
// repeating one of the chart's) is a fault of the template that a lenient
// decoder would hide, keeping the last.
func decode(t testing.TB, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "split the rendered YAML")
		var strict any
		require.NoError(t, yaml.UnmarshalStrict(doc, &strict), "the rendered YAML, read strictly:\n%s", doc)
		var m map[string]any
		err = utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(&m)
		if errors.Is(err, io.EOF) {
			continue // a document of comments only
		}
		require.NoError(t, err, "decode the rendered YAML")
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// find is the object of kind, namespace and name, or nil.
func find(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

// with is a deep copy of base with the value at the dotted path set (maps
// are made on the way).
func with(base map[string]any, path string, v any) map[string]any {
	out := deepCopy(base)
	m := out
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
	return out
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}
