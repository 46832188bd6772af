package cronjob_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The read of runners' logs is on by default: the base includes
// components/runner-log, whose one right (get pods/log, in a Role and
// RoleBinding of its own) and setting come together;
// components/runner-log-off takes both away again, by name, and only them,
// whatever other component an overlay adds. Adding components/runner-log a
// second time is refused, not a second grant that runner-log-off would
// leave behind.
func TestRunnerLogComponents(t *testing.T) {
	base := render(t, false)
	require.NotNil(t, base.LogRole)
	assert.Equal(t, []string{"get pods/log"}, testenv.Permissions(base.LogRole.Rules), "the runner-log Role grants that and nothing else")
	assert.NotContains(t, testenv.Permissions(base.Role.Rules), "get pods/log")
	assert.Equal(t, "true", base.Config.Data["REAPER_READ_RUNNER_LOG"])

	for _, tc := range []struct {
		name       string
		components []string
		extra      []string
	}{
		{"runner-log-off", []string{"runner-log-off"}, nil},
		{"runner-log-off with arc", []string{"runner-log-off", arcComponent}, arcRules},
		{"arc with runner-log-off", []string{arcComponent, "runner-log-off"}, arcRules},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := renderWith(t, tc.components...)
			want := append(testenv.Permissions(testenv.Without(testenv.LeastPrivilege(), "get pods/log")), tc.extra...)
			sort.Strings(want)
			assert.Equal(t, want, testenv.Permissions(m.rules()))
			assert.Nil(t, m.LogRole)
			assert.Nil(t, m.LogBinding)
			assert.NotContains(t, string(m.YAML), "pods/log")
			assert.NotContains(t, string(m.YAML), logRBACName)
			require.Contains(t, m.Config.Data, "REAPER_READ_RUNNER_LOG")
			assert.Equal(t, "false", m.Config.Data["REAPER_READ_RUNNER_LOG"])
			assert.Equal(t, base.CronJob, m.CronJob)
		})
	}

	_, err := testenv.KustomizeErr(t, testenv.Kustomization{Base: baseDir(t), Components: []string{"components/runner-log"}})
	require.Error(t, err, "the base already includes components/runner-log")
	assert.Contains(t, err.Error(), "already registered id")
}
