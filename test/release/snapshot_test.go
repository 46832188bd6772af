package release

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// platforms are the CLI's archives' platforms, as their names spell them.
var platforms = []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"}

// snapshot is one `make release-snapshot` into a directory of the test's.
type snapshot struct {
	dir            string // dist/release
	version, chart string // the release's version and its chart's
	revision       string
	epoch          time.Time // the commit's time, every timestamp's
}

func (s snapshot) path(name string) string { return filepath.Join(s.dir, name) }

func (s snapshot) archive(platform string) string {
	return s.path("runner-reaper_" + s.version + "_" + platform + ".tar.gz")
}

// names are the files a release holds, checksums.txt last.
func (s snapshot) names() []string {
	var out []string
	for _, p := range platforms {
		out = append(out, filepath.Base(s.archive(p)))
	}
	for _, p := range append(platforms, "lambda_linux_arm64") {
		out = append(out, filepath.Base(s.sbom(p)))
	}
	return append(out,
		"runner-reaper_"+s.version+"_oci-image.tar",
		"runner-reaper_"+s.version+"_lambda_linux_arm64.zip",
		"runner-reaper-"+s.chart+".tgz",
		"checksums.txt")
}

// sbom is the SBOM of the binary of platform, or of the Lambda's
// (lambda_linux_arm64).
func (s snapshot) sbom(platform string) string {
	return s.path("runner-reaper_" + s.version + "_" + platform + ".sbom.cdx.json")
}

// The snapshot release, built twice from the same tree into two
// directories, is the same bytes; it holds every artifact, its
// checksums.txt verifies, and each artifact is what it says: the binaries
// of their platform and version (the host's prints it), the image of the
// linux archives' binaries, the chart of the release's version, and for
// each binary an SBOM of the modules linked into it, at go.mod's versions.
// With Go's build cache warm each build only links again, under a minute
// on two cores; with nothing cached the first takes a few minutes more.
func TestSnapshotReleaseIsReproducibleAndComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole release twice (minutes); `make test` runs this")
	}
	r := root(t)
	out, code := makeIn(t, r, "snapshot-version")
	require.Equal(t, 0, code, out)
	version := strings.TrimSpace(out)
	require.Regexp(t, semVerV, version, "make snapshot-version")
	out, code = makeIn(t, r, "chart-version", "VERSION="+version)
	require.Equal(t, 0, code, out)
	chart := strings.TrimSpace(out)
	revision := git(t, r, "rev-parse", "HEAD")
	epoch, err := strconv.ParseInt(git(t, r, "log", "-1", "--format=%ct"), 10, 64)
	require.NoError(t, err)

	build := func(name string) snapshot {
		dist := filepath.Join(t.TempDir(), name)
		start := time.Now()
		out, code := makeIn(t, r, "release-snapshot", "DIST="+dist)
		require.Equal(t, 0, code, out)
		t.Logf("release %s built in %s:\n%s", name, time.Since(start).Round(time.Second), out)
		return snapshot{dir: filepath.Join(dist, "release"), version: version, chart: chart, revision: revision,
			epoch: time.Unix(epoch, 0)}
	}
	a := build("a")
	b := build("b")

	t.Run("every artifact, and nothing else", func(t *testing.T) {
		for _, s := range []snapshot{a, b} {
			entries, err := os.ReadDir(s.dir)
			require.NoError(t, err)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			assert.ElementsMatch(t, s.names(), got, s.dir)
		}
	})

	t.Run("the two builds are byte-identical", func(t *testing.T) {
		for _, name := range a.names() {
			ba, err := os.ReadFile(a.path(name))
			require.NoError(t, err)
			bb, err := os.ReadFile(b.path(name))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(ba, bb), "%s differs between two builds of the same tree", name)
		}
	})

	t.Run("checksums.txt verifies", func(t *testing.T) {
		cmd := exec.Command("sha256sum", "-c", "checksums.txt")
		cmd.Dir = a.dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		var listed []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			name, result, ok := strings.Cut(sc.Text(), ": ")
			require.True(t, ok, sc.Text())
			assert.Equal(t, "OK", result, name)
			listed = append(listed, name)
		}
		names := a.names()
		assert.Equal(t, sorted(names[:len(names)-1]), listed, "every artifact but checksums.txt itself, in name order")
	})

	t.Run("archives", func(t *testing.T) {
		license, err := os.ReadFile(filepath.Join(r, "LICENSE"))
		require.NoError(t, err)
		for _, p := range platforms {
			t.Run(p, func(t *testing.T) {
				files := readTarGz(t, a.archive(p), a.epoch)
				assert.Equal(t, []string{"LICENSE", "README.md", "runner-reaper"}, files.names)
				assert.Equal(t, license, files.data["LICENSE"])
				assert.EqualValues(t, 0o644, files.mode["LICENSE"])
				assert.EqualValues(t, 0o755, files.mode["runner-reaper"])
				goos, goarch, _ := strings.Cut(p, "_")
				checkBinary(t, files.data["runner-reaper"], goos, goarch, a)
				t.Run("its SBOM", func(t *testing.T) {
					checkSBOM(t, r, a.sbom(p), files.data["runner-reaper"], goos, goarch, a)
				})
			})
		}
	})

	t.Run("the host's binary prints the version it was given", func(t *testing.T) {
		files := readTarGz(t, a.archive(runtime.GOOS+"_"+runtime.GOARCH), a.epoch)
		bin := filepath.Join(t.TempDir(), "runner-reaper")
		require.NoError(t, os.WriteFile(bin, files.data["runner-reaper"], 0o755))
		out, err := exec.Command(bin, "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "runner-reaper "+a.version+" (revision "+a.revision+")\n", string(out))
	})

	t.Run("the Lambda's package", func(t *testing.T) {
		z, err := zip.OpenReader(a.path("runner-reaper_" + a.version + "_lambda_linux_arm64.zip"))
		require.NoError(t, err)
		defer z.Close()
		require.Len(t, z.File, 1)
		f := z.File[0]
		assert.Equal(t, "bootstrap", f.Name, "bootstrap at the root, as provided.al2023 runs it")
		assert.EqualValues(t, 0o755, f.Mode().Perm())
		rc, err := f.Open()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		checkBinary(t, data, "linux", "arm64", a)
		t.Run("its SBOM", func(t *testing.T) {
			checkSBOM(t, r, a.sbom("lambda_linux_arm64"), data, "linux", "arm64", a)
		})
	})

	t.Run("the image runs the linux archives' binaries", func(t *testing.T) {
		oci := readTar(t, a.path("runner-reaper_"+a.version+"_oci-image.tar"), a.epoch)
		assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(oci.data["oci-layout"]))
		var outer ociIndex
		require.NoError(t, json.Unmarshal(oci.data["index.json"], &outer))
		require.Len(t, outer.Manifests, 1, "one image index, both platforms")
		var idx ociIndex
		blobJSON(t, oci, outer.Manifests[0].Digest, &idx)
		var plats []string
		for _, d := range idx.Manifests {
			plat := d.Platform.OS + "_" + d.Platform.Architecture
			plats = append(plats, plat)
			var m ociManifest
			blobJSON(t, oci, d.Digest, &m)
			var cfg struct {
				Config struct {
					Labels map[string]string
				} `json:"config"`
			}
			blobJSON(t, oci, m.Config.Digest, &cfg)
			assert.Equal(t, a.version, cfg.Config.Labels["org.opencontainers.image.version"], plat)
			assert.Equal(t, a.revision, cfg.Config.Labels["org.opencontainers.image.revision"], plat)
			var inImage []byte
			for _, l := range m.Layers {
				zr, err := gzip.NewReader(bytes.NewReader(blob(t, oci, l.Digest)))
				require.NoError(t, err)
				tr := tar.NewReader(zr)
				for {
					h, err := tr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					require.NoError(t, err)
					if strings.TrimPrefix(filepath.Clean("/"+h.Name), "/") == "runner-reaper" {
						inImage, err = io.ReadAll(tr)
						require.NoError(t, err)
					}
				}
			}
			archived := readTarGz(t, a.archive(plat), a.epoch).data["runner-reaper"]
			require.NotEmpty(t, inImage, "%s: the image holds /runner-reaper", plat)
			assert.True(t, bytes.Equal(archived, inImage), "the %s image's binary is the %s archive's", plat, plat)
		}
		assert.ElementsMatch(t, []string{"linux_amd64", "linux_arm64"}, plats)
	})

	t.Run("the chart", func(t *testing.T) {
		pkg := a.path("runner-reaper-" + a.chart + ".tgz")
		files := readTarGz(t, pkg, a.epoch)
		var meta map[string]any
		require.NoError(t, yaml.Unmarshal(files.data["runner-reaper/Chart.yaml"], &meta))
		assert.Equal(t, a.chart, meta["version"])
		assert.Equal(t, a.version, meta["appVersion"])
		helm := filepath.Join(r, ".cache", "bin", "helm")
		out, err := exec.Command(helm, "show", "chart", pkg).CombinedOutput()
		require.NoError(t, err, "helm reads the package packed again: %s", out)
		assert.Contains(t, string(out), "version: "+a.chart+"\n")
	})
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// tarFiles are a tar's regular files, in the archive's order.
type tarFiles struct {
	names []string
	data  map[string][]byte
	mode  map[string]int64
}

// readTarGz reads a release's .tar.gz or .tgz, checking what makes it
// reproducible: gzip with no name or time, every entry owned by 0:0 with no
// names, stamped with the commit's time.
func readTarGz(t *testing.T, path string, epoch time.Time) tarFiles {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	assert.Empty(t, zr.Name, "%s: gzip -n stores no name", path)
	assert.True(t, zr.ModTime.IsZero(), "%s: gzip -n stores no time, has %s", path, zr.ModTime)
	return readTarFrom(t, path, zr, epoch)
}

func readTar(t *testing.T, path string, epoch time.Time) tarFiles {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return readTarFrom(t, path, f, epoch)
}

func readTarFrom(t *testing.T, path string, r io.Reader, epoch time.Time) tarFiles {
	t.Helper()
	out := tarFiles{data: map[string][]byte{}, mode: map[string]int64{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, path)
		assert.Equal(t, 0, h.Uid, "%s: %s", path, h.Name)
		assert.Equal(t, 0, h.Gid, "%s: %s", path, h.Name)
		assert.Empty(t, h.Uname+h.Gname, "%s: %s", path, h.Name)
		assert.True(t, h.ModTime.Equal(epoch), "%s: %s is stamped %s, not the commit's %s", path, h.Name, h.ModTime, epoch)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		out.names = append(out.names, h.Name)
		out.data[h.Name] = b
		out.mode[h.Name] = h.Mode
	}
}

// checkBinary checks a shipped binary: built for goos/goarch, static,
// trimmed, with the release's version and revision linked in (-ldflags is
// not recorded with -trimpath, so the strings themselves are looked for).
func checkBinary(t *testing.T, data []byte, goos, goarch string, s snapshot) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	out, err := exec.Command("go", "version", "-m", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	info := string(out)
	for _, want := range []string{"\tbuild\tGOOS=" + goos + "\n", "\tbuild\tGOARCH=" + goarch + "\n",
		"\tbuild\tCGO_ENABLED=0\n", "\tbuild\t-trimpath=true\n"} {
		assert.Contains(t, info, want)
	}
	assert.NotContains(t, info, "vcs.", "no stamp of the checkout")
	assert.True(t, bytes.Contains(data, []byte(s.version)), "%s/%s: version %s linked in", goos, goarch, s.version)
	assert.True(t, bytes.Contains(data, []byte(s.revision)), "%s/%s: revision %s linked in", goos, goarch, s.revision)
}

// ociDescriptor, ociIndex and ociManifest are what the test reads of an
// OCI layout's JSON.
type ociDescriptor struct {
	Digest   string `json:"digest"`
	Platform struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

// blob is the layout's blob of digest, checked against it.
func blob(t *testing.T, oci tarFiles, digest string) []byte {
	t.Helper()
	algo, hex, _ := strings.Cut(digest, ":")
	require.Equal(t, "sha256", algo, digest)
	b, ok := oci.data["blobs/sha256/"+hex]
	require.True(t, ok, "the layout holds %s", digest)
	assert.Equal(t, hex, fmt.Sprintf("%x", sha256.Sum256(b)), "blob %s", digest)
	return b
}

func blobJSON(t *testing.T, oci tarFiles, digest string, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(blob(t, oci, digest), v), digest)
}

// cdxBOM is what the test reads of a CycloneDX SBOM.
type cdxBOM struct {
	BOMFormat    string  `json:"bomFormat"`
	SpecVersion  string  `json:"specVersion"`
	SerialNumber *string `json:"serialNumber"`
	Metadata     struct {
		Timestamp  *string      `json:"timestamp"`
		Component  cdxComponent `json:"component"`
		Properties []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"metadata"`
	Components   []cdxComponent `json:"components"`
	Dependencies []struct {
		Ref string `json:"ref"`
	} `json:"dependencies"`
}

type cdxComponent struct {
	BOMRef  string `json:"bom-ref"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

// checkSBOM checks the SBOM of a binary against the binary, go.mod and
// Go's build list: the main module at the release's version, for the
// binary's platform, with the binary's hash; as components, exactly the
// modules Go recorded in the binary, each at the version the build list
// selects; among them the direct dependencies the product is built on, and
// every direct dependency the binary links, at go.mod's versions; no
// serial number or timestamp.
func checkSBOM(t *testing.T, root, path string, binary []byte, goos, goarch string, s snapshot) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var bom cdxBOM
	require.NoError(t, json.Unmarshal(raw, &bom))
	assert.Equal(t, "CycloneDX", bom.BOMFormat)
	assert.Equal(t, "1.6", bom.SpecVersion)
	assert.Nil(t, bom.SerialNumber, "no serial number: it would be random")
	assert.Nil(t, bom.Metadata.Timestamp, "no timestamp: it would be the build's")

	m := bom.Metadata.Component
	assert.Equal(t, "github.com/runner-reaper/runner-reaper", m.Name)
	assert.Equal(t, s.version, m.Version)
	assert.Contains(t, m.PURL, "@"+s.version+"?goarch="+goarch+"&goos="+goos+"&")
	var refs []string
	for _, d := range bom.Dependencies {
		refs = append(refs, d.Ref)
	}
	assert.Contains(t, refs, m.BOMRef, "the dependency graph starts at the main module")
	props := map[string]string{}
	for _, p := range bom.Metadata.Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, fmt.Sprintf("%x", sha256.Sum256(binary)), props["cdx:gomod:binary:hash:SHA-256"], "the SBOM is of this binary")

	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
		assert.Contains(t, c.PURL, "@"+c.Version+"?goarch="+goarch+"&goos="+goos+"&", "%s: the binary's platform", c.Name)
	}

	bin := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(bin, binary, 0o755))
	out, err := exec.Command("go", "version", "-m", bin).Output()
	require.NoError(t, err)
	linked := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "dep" {
			linked[f[1]] = f[2]
		}
	}
	require.NotEmpty(t, linked)
	assert.Equal(t, linked, listed, "the SBOM lists the modules linked into the binary, at their versions")

	var mod struct {
		Require []struct {
			Path, Version string
			Indirect      bool
		}
	}
	decodeGo(t, root, &mod, "mod", "edit", "-json")
	direct := map[string]string{}
	for _, req := range mod.Require {
		if !req.Indirect {
			direct[req.Path] = req.Version
		}
	}
	for _, name := range []string{"k8s.io/client-go", "github.com/google/go-github/v60", "github.com/aws/aws-sdk-go-v2",
		"github.com/prometheus/client_golang"} {
		require.Contains(t, direct, name, "go.mod requires it directly")
		assert.Equal(t, direct[name], listed[name], "%s in the SBOM at go.mod's version", name)
	}
	for name, v := range direct {
		if _, ok := linked[name]; ok {
			assert.Equal(t, v, listed[name], "%s, a direct dependency the binary links, at go.mod's version", name)
		}
	}

	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	cmd.Dir = root
	out, err = cmd.Output()
	require.NoError(t, err)
	selected := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, v, _ := strings.Cut(line, " ")
		selected[p] = v
	}
	for name, v := range listed {
		assert.Equal(t, selected[name], v, "%s at the build list's version", name)
	}
}

// decodeGo decodes the JSON a go command prints, run in dir.
func decodeGo(t *testing.T, dir string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "go %v", args)
	require.NoError(t, json.Unmarshal(out, v), "go %v", args)
}
