package sweep_test

import (
	"testing"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the one real control plane this package's tests share, started
// by the first test that needs it; each test works in namespaces of its own.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }
