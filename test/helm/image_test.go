package helm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		{name: "the defaults", image: map[string]any{}, want: "ghcr.io/runner-reaper/runner-reaper:latest"},
		{name: "a tag", image: map[string]any{"tag": "v1.2.3"}, want: "ghcr.io/runner-reaper/runner-reaper:v1.2.3"},
		{name: "a digest", image: map[string]any{"digest": digest}, want: "ghcr.io/runner-reaper/runner-reaper@" + digest},
		{name: "a digest wins over a tag", image: map[string]any{"tag": "v1.2.3", "digest": digest},
			want: "ghcr.io/runner-reaper/runner-reaper@" + digest},
		{name: "a registry with a port", image: map[string]any{"repository": "localhost:5000/runner-reaper", "tag": "dev_1.2-rc.3"},
			want: "localhost:5000/runner-reaper:dev_1.2-rc.3"},
		{name: "a path of several parts", image: map[string]any{"repository": "registry.example.com:8443/platform/tools/runner_reaper"},
			want: "registry.example.com:8443/platform/tools/runner_reaper:latest"},
		{name: "a name alone", image: map[string]any{"repository": "runner-reaper"}, want: "runner-reaper:latest"},
		{name: "a pull policy set", image: map[string]any{"pullPolicy": "Always"}, want: "ghcr.io/runner-reaper/runner-reaper:latest",
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
			assert.Contains(t, err.Error(), "at '/"+strings.ReplaceAll(c.at, ".", "/")+"'")
		})
	}
}
