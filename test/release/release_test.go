// Package release checks `make release` (mk/release.mk) and the workflows
// that run it: what it refuses before it builds anything, and that a
// snapshot release built twice is the same bytes, complete, and says what
// it is (its binaries' version, its chart's, its SBOM's modules).
package release

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// semVerV is a version `make release` accepts: SemVer 2.0.0 with a leading
// v and no build metadata.
var semVerV = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-((0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?$`)

// root is the repository's root.
func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	require.NoError(t, err)
	return r
}

// makeIn runs make -s in dir with args, in an environment without the
// variables the release reads (so that only args set them), and with
// helm's configuration in the test's own directory. It returns the output
// and the exit status.
func makeIn(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "VERSION", "REVISION", "IMAGE", "DIST", "RELEASE_SNAPSHOT", "MAKEFLAGS", "MFLAGS":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	cmd := exec.Command("make", append([]string{"-s"}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("make %v: %v", args, err)
	return "", -1
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// A VERSION that is not SemVer with a leading v, or none, is refused
// before anything is built: exit 2, a line naming VERSION, what is wrong
// with it and an example, and no dist/ made. It runs in a scratch
// repository, where a release that got past its checks could build
// nothing.
func TestReleaseRefusesAVersionThatIsNotSemVer(t *testing.T) {
	const example = "e.g. make release VERSION=v1.2.3"
	repo := scratchRepo(t)
	for _, c := range []struct {
		version string // "" with given false: no VERSION at all
		given   bool
		wrong   string
	}{
		{given: false, wrong: "VERSION is not given"},
		{version: "", given: true, wrong: "is empty"},
		{version: "1.2.3", given: true, wrong: "has no leading v"},
		{version: "V1.2.3", given: true, wrong: "has no leading v"},
		{version: "v1.2", given: true, wrong: "does not begin with three numbers"},
		{version: "v1.2.3.4", given: true, wrong: "does not begin with three numbers"},
		{version: "vlatest", given: true, wrong: "does not begin with three numbers"},
		{version: "v1.02.3", given: true, wrong: "has a number with a leading zero"},
		{version: "v1.2.3+build.5", given: true, wrong: "carries build metadata"},
		{version: "v1.2.3-", given: true, wrong: "has nothing after the -"},
		{version: "v1.2.3-rc..1", given: true, wrong: "has an empty pre-release identifier"},
		{version: "v1.2.3-rc.01", given: true, wrong: "has a numeric pre-release identifier with a leading zero (01)"},
		{version: "v1.2.3-rc_1", given: true, wrong: "has a pre-release holding something other than 0-9, A-Z, a-z, - and ."},
		{version: "v1.2.3-it's", given: true, wrong: "has a pre-release holding something other than 0-9, A-Z, a-z, - and ."},
		{version: "v18446744073709551616.0.0", given: true, wrong: "has a number above 18446744073709551615"},
	} {
		name := "VERSION=" + c.version
		if !c.given {
			name = "no VERSION"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dist := filepath.Join(t.TempDir(), "dist")
			args := []string{"release", "DIST=" + dist}
			if c.given {
				args = append(args, "VERSION="+c.version)
			}
			out, code := makeIn(t, repo, args...)
			assert.Equal(t, 2, code, out)
			if c.given {
				assert.Contains(t, out, "VERSION="+c.version+" "+c.wrong)
			} else {
				assert.Contains(t, out, c.wrong)
			}
			assert.Contains(t, out, example)
			assert.NoDirExists(t, dist, "a refused release makes nothing")
		})
	}
}

// scratchRepo is a git repository of its own holding the working tree's
// Makefile, its fragments, the release's checks and README.md, committed:
// enough for make to reach the release's checks, and a tree whose state the
// test decides.
func scratchRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	files := []string{"Makefile", "README.md", filepath.Join("tools", "release", "check.bash")}
	frags, err := filepath.Glob(filepath.Join(root(t), "mk", "*.mk"))
	require.NoError(t, err)
	for _, f := range frags {
		files = append(files, filepath.Join("mk", filepath.Base(f)))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root(t), f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false",
		"commit", "-q", "-m", "scratch")
	return dir
}

// A release is of a commit: in a tree with uncommitted changes to tracked
// files it is refused, naming the fix, while a snapshot of that tree is
// let through and says that it is dirty. The same tree, clean, passes the
// checks with every form of version SemVer allows, so the refusal is the
// changes' doing.
func TestReleaseRefusesADirtyTreeButNotASnapshot(t *testing.T) {
	repo := scratchRepo(t)
	head := git(t, repo, "rev-parse", "--short=12", "HEAD")

	for _, v := range []string{"v1.2.3", "v0.0.0", "v1.2.3-rc.1", "v1.2.3-0", "v1.2.3-alpha-1.x-y.7", "v10.20.30-0a.b0",
		"v18446744073709551615.0.0"} {
		out, code := makeIn(t, repo, "release-check", "VERSION="+v)
		assert.Equal(t, 0, code, "VERSION=%s: %s", v, out)
	}
	out, code := makeIn(t, repo, "snapshot-version")
	require.Equal(t, 0, code, out)
	assert.Equal(t, "v0.0.0-snapshot.g"+head, strings.TrimSpace(out))

	require.NoError(t, os.WriteFile(filepath.Join(repo, "untracked.txt"), []byte("x"), 0o644))
	out, code = makeIn(t, repo, "release-check", "VERSION=v1.2.3")
	assert.Equal(t, 0, code, "an untracked file leaves the tree clean, as for git describe --dirty: %s", out)

	f, err := os.OpenFile(filepath.Join(repo, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\nan uncommitted line\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	dist := filepath.Join(t.TempDir(), "dist")
	out, code = makeIn(t, repo, "release", "VERSION=v1.2.3", "DIST="+dist)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "refusing to release VERSION=v1.2.3 from a tree with uncommitted changes")
	assert.Contains(t, out, "make release-snapshot")
	assert.Contains(t, out, "README.md", "names what changed")
	assert.NoDirExists(t, dist, "a refused release makes nothing")

	out, code = makeIn(t, repo, "snapshot-version")
	require.Equal(t, 0, code, out)
	snapshot := strings.TrimSpace(out)
	assert.Equal(t, "v0.0.0-snapshot.g"+head+".dirty", snapshot)
	assert.Regexp(t, semVerV, snapshot)
	out, code = makeIn(t, repo, "release-check", "VERSION="+snapshot, "RELEASE_SNAPSHOT=1")
	assert.Equal(t, 0, code, "a snapshot of a dirty tree passes the checks: %s", out)
}
