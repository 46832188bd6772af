package cronjob_test

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

// The sweep's own deadline, as the shipped configuration sets it, ends the
// sweep before the Job's: it stops starting actions a spare before it, the
// action in flight has that spare to finish, and the report is written
// before the kubelet sends SIGTERM at activeDeadlineSeconds. A SIGTERM
// that still comes (a node drain) leaves the action in flight its spare,
// well within the pod's grace period.
func TestSweepEndsBeforeTheJobsDeadline(t *testing.T) {
	m := render(t, false)
	spec := m.CronJob.Spec.JobTemplate.Spec
	require.NotNil(t, spec.ActiveDeadlineSeconds)
	jobDeadline := time.Duration(*spec.ActiveDeadlineSeconds) * time.Second

	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix+"_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range m.Config.Data {
		t.Setenv(k, v)
	}
	t.Setenv("REAPER_GITHUB_TOKEN", token)
	cfg, err := config.Load(true, shippedNamespace)
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, cfg.SweepTimeout, "the shipped configuration says it")
	assert.Less(t, cfg.SweepTimeout, jobDeadline, "the sweep ends before the Job's deadline")
	assert.Greater(t, cfg.SweepTimeout, reap.DefaultSpare, "there is time to act")

	grace := 30 * time.Second // Kubernetes' default
	if g := spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	assert.Greater(t, grace, reap.DefaultSpare, "after SIGTERM the action in flight has its spare to finish")
}
