package sweep_test

import (
	"testing"

	"github.com/runner-reaper/runner-reaper/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
