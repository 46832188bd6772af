package noheapprofile

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Importing the package turns heap profiling off. (That it does so before
// the packages that allocate much is test/ranks'
// TestEntryPointsTurnHeapProfilingOffFirst.)
func TestImportTurnsHeapProfilingOff(t *testing.T) {
	assert.Equal(t, 0, runtime.MemProfileRate)
}
