package helm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The image: by tag (the chart's appVersion unless image.tag is set) or
// pinned by image.digest; its pull policy is Kubernetes' choice unless
// image.pullPolicy sets one, as with the kustomize base, which sets none
// (Always for latest or no tag, else IfNotPresent): the chart once set
// IfNotPresent, and `latest` was never pulled again.
func TestImageIsTheOneNamedAndPulledAsKubernetesDecides(t *testing.T) {
	const digest = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
	for _, c := range []struct {
		name       string
		image      map[string]any
		want       string
		pullPolicy any // nil: no field
	}{
		{name: "a tag", image: map[string]any{"tag": "v1.2.3"}, want: "ghcr.io/runner-reaper/runner-reaper:v1.2.3"},
		{name: "latest, said", image: map[string]any{"tag": "latest"}, want: "ghcr.io/runner-reaper/runner-reaper:latest"},
		{name: "a digest", image: map[string]any{"digest": digest}, want: "ghcr.io/runner-reaper/runner-reaper@" + digest},
		{name: "a digest wins over a tag", image: map[string]any{"tag": "v1.2.3", "digest": digest},
			want: "ghcr.io/runner-reaper/runner-reaper@" + digest},
		{name: "a registry with a port", image: map[string]any{"repository": "localhost:5000/runner-reaper", "tag": "dev_1.2-rc.3"},
			want: "localhost:5000/runner-reaper:dev_1.2-rc.3"},
		{name: "a path of several parts", image: map[string]any{"repository": "registry.example.com:8443/platform/tools/runner_reaper", "tag": "v1.2.3"},
			want: "registry.example.com:8443/platform/tools/runner_reaper:v1.2.3"},
		{name: "a name alone", image: map[string]any{"repository": "runner-reaper", "tag": "v1.2.3"}, want: "runner-reaper:v1.2.3"},
		{name: "a pull policy set", image: map[string]any{"tag": "v1.2.3", "pullPolicy": "Always"}, want: "ghcr.io/runner-reaper/runner-reaper:v1.2.3",
			pullPolicy: "Always"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			objs, err := render(t, namespace, map[string]any{"image": c.image})
			require.NoError(t, err)
			ctr := container(t, objs)
			assert.Equal(t, c.want, ctr["image"])
			assert.Equal(t, c.pullPolicy, ctr["imagePullPolicy"])
		})
	}
}

// The image is never latest unless the values say so. The chart in the
// tree has no appVersion, and image.tag defaults to none: installed from a
// checkout, it refuses to render without image.tag or image.digest, with
// the schema or without, saying what to set. A packaged chart, whose
// appVersion `make chart` stamps (helm package --app-version here), runs
// the image of that version, and labels its objects with it; one packaged
// without an appVersion refuses as a checkout does.
func TestImageIsNeverLatestUnlessSaid(t *testing.T) {
	meta := chartValues(t, filepath.Join(chartDir(t), "Chart.yaml"))
	assert.NotContains(t, meta, "appVersion", "the chart in the tree names no image tag")
	tag, ok, err := unstructured.NestedFieldNoCopy(chartDefaults(t), "image", "tag")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "", tag, "values.yaml's image.tag defaults to the appVersion")

	scopes := map[string]any{"scopes": []any{testScope}}
	const refusal = "image.tag and image.digest are empty, and this chart has no appVersion to default to"
	for _, extra := range [][]string{nil, {"--skip-schema-validation"}} {
		_, err := helmTemplate(t, chartDir(t), release, namespace, scopes, extra...)
		require.Error(t, err, "a checkout rendered with no image named (%v)", extra)
		assert.Contains(t, err.Error(), refusal)
		assert.Contains(t, err.Error(), "--set image.tag=v1.2.3")
	}

	// A digest alone names the image; no version label is made up.
	const digest = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
	objs, err := helmTemplate(t, chartDir(t), release, namespace, with(scopes, "image.digest", digest))
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper@"+digest, container(t, objs)["image"])
	assert.NotContains(t, theCronJob(t, objs).GetLabels(), "app.kubernetes.io/version")

	pkg := func(t *testing.T, args ...string) string {
		t.Helper()
		dest := t.TempDir()
		_, stderr, err := helm(t, helmEnv(t), append([]string{"package", chartDir(t), "--version", "1.2.3", "--destination", dest}, args...)...)
		require.NoError(t, err, stderr)
		return filepath.Join(dest, "runner-reaper-1.2.3.tgz")
	}
	t.Run("packaged with an appVersion", func(t *testing.T) {
		chart := pkg(t, "--app-version", "v1.2.3")
		objs, err := helmTemplate(t, chart, release, namespace, scopes)
		require.NoError(t, err)
		assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:v1.2.3", container(t, objs)["image"])
		for _, o := range objs {
			assert.Equal(t, "v1.2.3", o.GetLabels()["app.kubernetes.io/version"], "%s %s", o.GetKind(), o.GetName())
		}
		objs, err = helmTemplate(t, chart, release, namespace, with(scopes, "image.tag", "v1.2.4"))
		require.NoError(t, err)
		assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:v1.2.4", container(t, objs)["image"], "image.tag overrides the appVersion")
		assert.Equal(t, "v1.2.4", theCronJob(t, objs).GetLabels()["app.kubernetes.io/version"], "the version is the image's that runs")
	})
	t.Run("packaged without one", func(t *testing.T) {
		_, err := helmTemplate(t, pkg(t), release, namespace, scopes)
		require.Error(t, err)
		assert.Contains(t, err.Error(), refusal)
	})
}

// The schema refuses an image reference the runtime could not pull, at
// its place: each part has its own grammar, so that none can smuggle in
// another (a tag holding "@", a repository holding ":tag").
func TestSchemaRefusesImagesThatAreNotReferences(t *testing.T) {
	for _, c := range []struct{ at, value string }{
		{"image.repository", "ghcr.io/Runner-Reaper/runner-reaper"},
		{"image.repository", "ghcr.io//runner-reaper"},
		{"image.repository", "runner-reaper:v1.2.3"},
		{"image.repository", "ghcr.io/runner-reaper@" + "sha256:" + strings.Repeat("a", 64)},
		{"image.repository", "-runner-reaper"},
		{"image.repository", ""},
		{"image.repository", strings.Repeat("r", 256)},
		{"image.tag", "v1.2.3@sha256:abc"},
		{"image.tag", ".v1"},
		{"image.tag", "v 1"},
		{"image.tag", strings.Repeat("t", 129)},
		{"image.digest", "sha256:" + strings.Repeat("A", 64)},
		{"image.digest", "sha256:" + strings.Repeat("a", 63)},
		{"image.digest", "sha512:" + strings.Repeat("a", 128)},
		{"image.digest", strings.Repeat("a", 64)},
		{"image.pullPolicy", "Sometimes"},
	} {
		t.Run(c.at+"="+c.value, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, namespace, with(map[string]any{}, c.at, c.value))
			require.Error(t, err, "the schema accepted %s=%q", c.at, c.value)
			assertRefusedAt(t, err, "/"+strings.ReplaceAll(c.at, ".", "/"), c.at)
		})
	}
}
