package deploy_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/reap"
)

// The function's environment bounds every wait: each Kubernetes request
// (REAPER_KUBE_TIMEOUT) and the whole sweep (REAPER_SWEEP_TIMEOUT), whose
// default ends before the function's own timeout, so that the sweep stops
// starting actions, finishes the one in flight and answers before Lambda
// stops the process.
func TestFunctionBoundsEveryWait(t *testing.T) {
	tpl := loadTemplate(t)
	fn := props(t, tpl, functionID, "AWS::Serverless::Function")
	fnTimeout := time.Duration(num(t, fn["Timeout"], "Timeout")) * time.Second

	env := functionEnv(t, tpl, sampleParams(t, tpl))
	assert.Equal(t, "10s", env["REAPER_KUBE_TIMEOUT"])
	assert.Equal(t, "45s", env["REAPER_SWEEP_TIMEOUT"])

	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix+"_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(false, "")
	require.NoError(t, err)
	assert.Less(t, cfg.SweepTimeout, fnTimeout, "the sweep's deadline comes before the function's")
	assert.Greater(t, cfg.SweepTimeout, reap.DefaultSpare)
	assert.Less(t, cfg.KubeTimeout, fnTimeout-reap.DefaultSpare, "one request never outlasts the sweep")
	assert.Less(t, cfg.GitHub.Timeout, fnTimeout-reap.DefaultSpare, "one request never outlasts the sweep")
}
