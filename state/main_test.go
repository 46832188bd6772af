package state

import (
	"os"
	"testing"

	"github.com/runner-reaper/runner-reaper/internal/testenv"
)

// env is the real API server the ConfigMap backend is tested against.
var env *testenv.Env

func TestMain(m *testing.M) {
	// A child process of TestFileSeparateProcessesRace saves once and exits,
	// without a control plane of its own.
	if os.Getenv(fileSaverEnv) != "" {
		os.Exit(runFileSaver())
	}
	testenv.Main(m, &env)
}
