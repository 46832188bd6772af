package state_test

import (
	"testing"

	"github.com/runner-reaper/runner-reaper/test/statetest"
)

// TestMain stops the control plane if a configmap contract test started it.
func TestMain(m *testing.M) { statetest.Main(m) }
