package testenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StartCluster outside the namespaces ClusterMain makes (here: a test
// process, not their first, with or without the marker set) refuses before
// it writes or starts anything.
func TestStartClusterRefusesTheHost(t *testing.T) {
	for _, marker := range []string{"", "1"} {
		t.Setenv(insideEnv, marker)
		dir := t.TempDir()
		cl, err := StartCluster(dir, nil)
		require.Error(t, err)
		assert.Nil(t, cl)
		assert.Contains(t, err.Error(), "only as the first process of the test's own namespaces")
		assert.NoFileExists(t, dir+"/audit-policy.yaml", "nothing written")
	}
}
