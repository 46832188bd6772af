package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// workflow is what these tests read of a GitHub Actions workflow.
type workflow struct {
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			Name string `yaml:"name"`
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// workflows reads every workflow under .github/workflows, by file name.
func workflows(t *testing.T) map[string]workflow {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root(t), ".github", "workflows", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	out := map[string]workflow{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var w workflow
		require.NoError(t, yaml.Unmarshal(b, &w), p)
		require.NotEmpty(t, w.Jobs, p)
		out[filepath.Base(p)] = w
	}
	return out
}

// What actionlint (make lint-workflows) does not hold the workflows to:
// no ${{ }} expression is spliced into a run: script, where a value with
// quotes or a newline would become shell; everything reaches the scripts
// through env:. actionlint flags only the contexts it knows to be
// untrusted.
func TestWorkflowsSpliceNothingIntoRunScripts(t *testing.T) {
	for file, w := range workflows(t) {
		for job, j := range w.Jobs {
			for i, s := range j.Steps {
				assert.NotContains(t, s.Run, "${{", "%s: job %s, step %d (%s) splices an expression into its script", file, job, i, s.Name)
			}
		}
	}
}

// Every action is pinned: GitHub's own (actions/*) at a major tag, and any
// other at a full commit SHA, so that no one else's tag can change what a
// release runs with its write permissions.
func TestWorkflowsPinEveryAction(t *testing.T) {
	own := regexp.MustCompile(`^actions/[a-z-]+@v[0-9]+$`)
	pinned := regexp.MustCompile(`^[A-Za-z0-9-]+/[A-Za-z0-9._-]+@[0-9a-f]{40}$`)
	var uses int
	for file, w := range workflows(t) {
		for job, j := range w.Jobs {
			for _, s := range j.Steps {
				if s.Uses == "" {
					continue
				}
				uses++
				if strings.HasPrefix(s.Uses, "actions/") {
					assert.Regexp(t, own, s.Uses, "%s: job %s", file, job)
				} else {
					assert.Regexp(t, pinned, s.Uses, "%s: job %s", file, job)
				}
			}
		}
	}
	assert.NotZero(t, uses)
}

// Each workflow holds only the permissions its job needs: CI reads the
// repository; a release writes the GitHub release and the packages and
// asks for the OIDC token cosign signs with. No job widens them.
func TestWorkflowsHoldTheLeastPermissions(t *testing.T) {
	w := workflows(t)
	require.Contains(t, w, "ci.yml")
	require.Contains(t, w, "release.yml")
	assert.Equal(t, map[string]string{"contents": "read"}, w["ci.yml"].Permissions)
	assert.Equal(t, map[string]string{"contents": "write", "packages": "write", "id-token": "write"}, w["release.yml"].Permissions)
	for file, wf := range w {
		for job, j := range wf.Jobs {
			assert.Nil(t, j.Permissions, "%s: job %s sets permissions of its own", file, job)
		}
	}
}
