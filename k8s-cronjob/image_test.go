package cronjob_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The layout is read here with the standard library alone, not with the
// library that wrote it, so a mistake in how tools/image uses
// go-containerregistry cannot hide behind the same mistake in the reader.

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// imageFile is one regular file or directory in an image's layers.
type imageFile struct {
	mode int64
	uid  int
	dir  bool
	data []byte
}

// platformImage is one architecture's image as a runtime would see it.
type platformImage struct {
	config ociConfig
	files  map[string]imageFile
}

// blob reads a blob and checks it against its digest's hex and its size.
func blob(t *testing.T, layout string, d ociDescriptor) []byte {
	t.Helper()
	algo, hex, ok := strings.Cut(d.Digest, ":")
	require.True(t, ok, "digest %q", d.Digest)
	b, err := os.ReadFile(filepath.Join(layout, "blobs", algo, hex))
	require.NoError(t, err)
	require.EqualValues(t, d.Size, len(b), "blob %s size", d.Digest)
	return b
}

func readImages(t *testing.T, layout string) (ociIndex, map[string]platformImage) {
	t.Helper()
	top, err := os.ReadFile(filepath.Join(layout, "index.json"))
	require.NoError(t, err)
	var outer ociIndex
	require.NoError(t, json.Unmarshal(top, &outer))
	require.Len(t, outer.Manifests, 1, "the layout holds one image index")
	require.Equal(t, "application/vnd.oci.image.index.v1+json", outer.Manifests[0].MediaType)
	var idx ociIndex
	require.NoError(t, json.Unmarshal(blob(t, layout, outer.Manifests[0]), &idx))

	images := map[string]platformImage{}
	for _, d := range idx.Manifests {
		require.NotNil(t, d.Platform, "every manifest in the index names its platform")
		var m ociManifest
		require.NoError(t, json.Unmarshal(blob(t, layout, d), &m))
		assert.Equal(t, "application/vnd.oci.image.manifest.v1+json", m.MediaType)
		var img platformImage
		require.NoError(t, json.Unmarshal(blob(t, layout, m.Config), &img.config))
		img.files = map[string]imageFile{}
		for _, l := range m.Layers {
			zr, err := gzip.NewReader(strings.NewReader(string(blob(t, layout, l))))
			require.NoError(t, err)
			tr := tar.NewReader(zr)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				data, err := io.ReadAll(tr)
				require.NoError(t, err)
				p := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
				img.files[p] = imageFile{mode: h.Mode, uid: h.Uid, dir: h.Typeflag == tar.TypeDir, data: data}
			}
		}
		images[d.Platform.OS+"/"+d.Platform.Architecture] = img
	}
	return outer, images
}

// `make image` builds one OCI index for both architectures, each image
// FROM scratch with only what the CronJob needs, runnable as the manifest
// runs it, and the amd64 binary in it is the real, static, versioned build.
func TestImageIsTheCronJobsRunnableScratchImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image for two architectures with tools/image; `make test` runs it")
	}
	dir := t.TempDir()
	img, err := testenv.BuildImage(dir)
	require.NoError(t, err)

	outer, images := readImages(t, img.Layout)
	assert.Equal(t, strings.TrimPrefix(testenv.ImageRef, "ghcr.io/runner-reaper/runner-reaper:"),
		outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	require.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, keys(images), "both architectures in one index")

	// The container's command, as the shipped CronJob runs it.
	containers := render(t, false).CronJob.Spec.JobTemplate.Spec.Template.Spec.Containers
	require.Len(t, containers, 1)
	require.NotEmpty(t, containers[0].Command)
	binPath := containers[0].Command[0]

	for plat, im := range images {
		t.Run(plat, func(t *testing.T) {
			osName, arch, _ := strings.Cut(plat, "/")
			assert.Equal(t, osName, im.config.OS)
			assert.Equal(t, arch, im.config.Architecture)
			assert.Equal(t, "65532:65532", im.config.Config.User, "runs as nonroot, as the manifest's runAsUser")
			assert.Equal(t, []string{binPath}, im.config.Config.Entrypoint, "the entrypoint is the manifest's command")
			assert.Empty(t, im.config.Config.Cmd, "no default command: the manifest says what to do")
			assert.Equal(t, map[string]string{
				"org.opencontainers.image.source":   "https://github.com/runner-reaper/runner-reaper",
				"org.opencontainers.image.revision": testenv.BinaryRevision,
				"org.opencontainers.image.version":  testenv.BinaryVersion,
				"org.opencontainers.image.title":    "runner-reaper",
			}, im.config.Config.Labels)

			bin, ok := im.files[binPath]
			require.True(t, ok, "the binary at %s, where the CronJob's command expects it", binPath)
			assert.EqualValues(t, 0o755, bin.mode)
			f, err := elf.NewFile(strings.NewReader(string(bin.data)))
			require.NoError(t, err)
			assert.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch], f.Machine)
			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary: no dynamic loader in a scratch image")
			}

			ca := im.files["/etc/ssl/certs/ca-certificates.crt"]
			assert.Greater(t, strings.Count(string(ca.data), "BEGIN CERTIFICATE"), 50, "a real CA bundle for GitHub's TLS")
			assert.Contains(t, string(im.files["/etc/passwd"].data), "nonroot:x:65532:65532:")
			assert.Contains(t, string(im.files["/etc/group"].data), "nonroot:x:65532:")

			var paths []string
			for p, f := range im.files {
				if !f.dir {
					paths = append(paths, p)
				}
				assert.NotContains(t, []string{"/bin/sh", "/bin/bash", "/bin/busybox", "/usr/bin/env"}, p, "no shell")
			}
			assert.ElementsMatch(t, []string{binPath, "/etc/passwd", "/etc/group", "/etc/ssl/certs/ca-certificates.crt"}, paths,
				"nothing but the binary, users and CA bundle")
		})
	}

	// The amd64 binary from the image runs here, and says which build it is.
	bin := filepath.Join(dir, "from-image")
	require.NoError(t, writeExecutable(bin, images["linux/amd64"].files[binPath].data))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := testenv.RunBinary(ctx, bin, nil, "--version")
	require.NoError(t, err)
	assert.Equal(t, 0, r.Code, r.Stderr)
	assert.Equal(t, "runner-reaper "+testenv.BinaryVersion+" (revision "+testenv.BinaryRevision+")\n", r.Stdout)

	st, err := os.Stat(img.Tarball)
	require.NoError(t, err, "the amd64 tarball for ctr/docker load")
	t.Logf("image linux/amd64: %d bytes as a tarball", st.Size())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func writeExecutable(path string, data []byte) error {
	return os.WriteFile(path, data, 0o755)
}
