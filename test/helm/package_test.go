package helm

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
		// A dirty tag is after the tag, not a pre-release of it.
		{"v1.2.3-dirty", "1.2.4-0.0.dirty"},
		{"v1.2.3-rc.1-dirty", "1.2.3-rc.1.0.0.dirty"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.4-0.4.gabc1234.dirty"},
		{"dev", "0.0.0-dev"},
		// Numbers past awk's: incremented as strings of digits, up to
		// the largest Helm reads (2^64-1).
		{"v1.2.2147483647-1-gabc1234", "1.2.2147483648-0.1.gabc1234"},
		{"v1.2.99999999999999999-1-gabc1234", "1.2.100000000000000000-0.1.gabc1234"},
		{"v1.2.18446744073709551614-1-gabc1234", "1.2.18446744073709551615-0.1.gabc1234"},
		{"v18446744073709551615.0.0", "18446744073709551615.0.0"},
		{"v1.2.18446744073709551615-1-gabc1234", ""},
		{"v1.2.18446744073709551616", ""},
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
	assert.ElementsMatch(t, chartFiles, packageFiles(t, pkg), "the package holds the chart's files, and only those")

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
		// No image.tag: a packaged chart runs the image of its appVersion.
		stdout, stderr, err := helm(t, env, "template", release, ref, "--version", semver, "--plain-http", "--namespace", namespace,
			"--set", "scopes={"+testScope+"}")
		require.NoError(t, err, stderr)
		cj := find(decode(t, stdout), "CronJob", namespace, release)
		require.NotNil(t, cj)
		spec := cj.Object["spec"].(map[string]any)["jobTemplate"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:"+version, spec["containers"].([]any)[0].(map[string]any)["image"])
	})
}

// The chart's versions keep git's order: for describes in the order git
// makes them (a tag, the tag's tree changed, commits after it, the next
// pre-release and release), the mapped versions ascend under SemVer's
// precedence, which Helm and OCI registries sort by. A dirty tag mapped
// to 1.2.3-dirty would sort below 1.2.3, and 10 commits compared as text
// below 2.
func TestChartVersionsKeepGitsOrder(t *testing.T) {
	t.Run("the comparator follows semver.org", func(t *testing.T) {
		ordered := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
			"1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0", "18446744073709551615.0.0"}
		for i := 1; i < len(ordered); i++ {
			assert.Equal(t, -1, semverCompare(ordered[i-1], ordered[i]), "%s < %s", ordered[i-1], ordered[i])
			assert.Equal(t, 1, semverCompare(ordered[i], ordered[i-1]), "%s > %s", ordered[i], ordered[i-1])
			assert.Equal(t, 0, semverCompare(ordered[i], ordered[i]))
		}
	})

	describes := []string{
		"v1.2.3",
		"v1.2.3-dirty",
		"v1.2.3-1-gabc1234",
		"v1.2.3-1-gabc1234-dirty",
		"v1.2.3-2-gdef5678",
		"v1.2.3-10-g0123456",
		"v1.2.4-rc.1",
		"v1.2.4-rc.1-dirty",
		"v1.2.4-rc.1-3-g89abcde",
		"v1.2.4-rc.2",
		"v1.2.4",
		"v1.2.9-1-gfedcba9",
		"v1.2.10",
		"v1.10.0",
		"v2.0.0",
	}
	mapped := make([]string, len(describes))
	for i, d := range describes {
		out, err := makeIn(t, "chart-version", "VERSION="+d)
		require.NoError(t, err, out)
		mapped[i] = strings.TrimSpace(out)
		require.Regexp(t, semVer, mapped[i], "VERSION=%s", d)
	}
	for i := 1; i < len(mapped); i++ {
		assert.Equal(t, -1, semverCompare(mapped[i-1], mapped[i]), "%s (%s) sorts below %s (%s)", describes[i-1], mapped[i-1], describes[i], mapped[i])
	}
}

// semverCompare is SemVer 2.0.0's precedence (semver.org, item 11) of two
// versions semVer matches: -1, 0 or 1. Numbers are compared as strings of
// digits, by length first, as they have no leading zeros and may be past
// 64 bits.
func semverCompare(a, b string) int {
	ma, mb := semVer.FindStringSubmatch(a), semVer.FindStringSubmatch(b)
	if ma == nil || mb == nil {
		panic(fmt.Sprintf("not SemVer: %q, %q", a, b))
	}
	for i := 1; i <= 3; i++ {
		if c := compareNumbers(ma[i], mb[i]); c != 0 {
			return c
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == pb:
		return 0
	case pa == "":
		return 1 // a release is above its pre-releases
	case pb == "":
		return -1
	}
	ia, ib := strings.Split(pa, "."), strings.Split(pb, ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		na, nb := numeric.MatchString(ia[i]), numeric.MatchString(ib[i])
		var c int
		switch {
		case na && nb:
			c = compareNumbers(ia[i], ib[i])
		case na:
			c = -1 // a numeric identifier is below an alphanumeric one
		case nb:
			c = 1
		default:
			c = strings.Compare(ia[i], ib[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ia), len(ib))
}

var numeric = regexp.MustCompile(`^[0-9]+$`)

func compareNumbers(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// `make chart-push` refuses a dirty VERSION, saying so, before it builds
// anything: a chart of uncommitted changes could be rebuilt from no commit.
func TestChartPushRefusesADirtyVersion(t *testing.T) {
	for _, version := range []string{"v1.2.3-dirty", "v1.2.3-4-gabc1234-dirty", "e489eb0-dirty"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			dist := t.TempDir()
			// A registry nothing listens at: the push must not get that far.
			out, err := makeIn(t, "chart-push", "VERSION="+version, "CHART_REPO=oci://127.0.0.1:9/charts", "DIST="+dist)
			require.Error(t, err, out)
			assert.Contains(t, out, "refusing to push VERSION="+version+": the tree has uncommitted changes")
			entries, err := os.ReadDir(dist)
			require.NoError(t, err)
			assert.Empty(t, entries, "refused before the chart was packaged")
		})
	}
}

// chartFiles are the files a package of the chart holds, and all of them:
// a file the chart gains is added here, so that nothing reaches the
// package unseen.
var chartFiles = []string{
	".helmignore", "Chart.yaml", "README.md", "values.yaml", "values.schema.json",
	"files/monitoring/dashboard.json", "files/monitoring/rules.yaml",
	"templates/NOTES.txt", "templates/_helpers.tpl", "templates/_pod.tpl", "templates/config.yaml", "templates/cronjob.yaml",
	"templates/dashboard.yaml", "templates/deployment.yaml", "templates/lease.yaml", "templates/ledger.yaml", "templates/pdb.yaml",
	"templates/prometheusrule.yaml", "templates/rbac.yaml", "templates/service.yaml", "templates/serviceaccount.yaml",
	"templates/servicemonitor.yaml",
}

// packageFiles are the files of a packaged chart, without the chart's
// directory.
func packageFiles(t *testing.T, pkg string) []string {
	t.Helper()
	f, err := os.Open(pkg)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		name, ok := strings.CutPrefix(h.Name, "runner-reaper/")
		require.True(t, ok, "%s is in the chart's directory", h.Name)
		out = append(out, name)
	}
}

// `helm package` of a chart beside what a checkout, an editor or a test
// run leaves (VCS directories, backups, swap files, IDE settings, test
// inputs, an earlier package) packages the chart's files and nothing else;
// a Helm test hook under templates/tests/ stays, as the tests/ ignored is
// the chart's own.
func TestPackageHoldsOnlyTheChartsFiles(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "runner-reaper")
	require.NoError(t, os.CopyFS(chart, os.DirFS(chartDir(t))))
	for _, junk := range []string{
		".git/HEAD", ".gitignore", ".gitattributes", ".hg/store/data", ".svn/entries", ".bzr/branch-format",
		".idea/workspace.xml", ".vscode/settings.json", ".project", "runner-reaper.tmproj",
		".DS_Store", "templates/.DS_Store",
		"values.yaml.bak", "values.yaml.orig", "values.yaml.rej", "templates/cronjob.yaml~", "templates/.cronjob.yaml.swp",
		"templates/.cronjob.yaml.swo", ".#values.yaml", "notes.tmp",
		"tests/defaults_test.yaml", "ci/full-values.yaml", "chart_test.go", "runner-reaper-0.1.0.tgz",
	} {
		path := filepath.Join(chart, junk)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte("junk\n"), 0o644))
	}
	hook := "templates/tests/test-connection.yaml"
	require.NoError(t, os.MkdirAll(filepath.Join(chart, filepath.Dir(hook)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(chart, hook), []byte("# a Helm test hook\n"), 0o644))

	dest := t.TempDir()
	_, stderr, err := helm(t, helmEnv(t), "package", chart, "--version", "1.2.3", "--destination", dest)
	require.NoError(t, err, stderr)
	assert.ElementsMatch(t, append(slices.Clone(chartFiles), hook), packageFiles(t, filepath.Join(dest, "runner-reaper-1.2.3.tgz")))
}
