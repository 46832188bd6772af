package helm

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `helm lint --strict` passes the chart with its defaults, with each
// option on, and with the full values: no error and no warning.
func TestLintPassesWithEachOption(t *testing.T) {
	cases := map[string][]string{}
	for _, o := range options() {
		cases[o.name] = []string{"--values", valuesFile(t, installable(o.values))}
	}
	cases["the full values"] = []string{"--values", filepath.Join("testdata", "full-values.yaml")}
	cases["monitoring"] = append([]string{"--set", "monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"}, installableArgs...)
	for _, o := range deploymentOptions() {
		cases["mode deployment: "+o.name] = []string{"--values", valuesFile(t, installable(o.values))}
	}
	cases["mode deployment: the full values"] = []string{"--values", filepath.Join("testdata", "full-values.yaml"),
		"--set", "mode=deployment,monitoring.serviceMonitor.enabled=true"}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := helm(t, helmEnv(t), append([]string{"lint", "--strict", chartDir(t)}, args...)...)
			require.NoError(t, err, "%s%s", stdout, stderr)
			assert.Contains(t, stdout, "1 chart(s) linted, 0 chart(s) failed")
			assert.NotContains(t, stdout, "[WARNING]")
			assert.NotContains(t, stdout, "[ERROR]")
		})
	}
}

// `helm lint` refuses what the schema refuses at `helm template`
// (TestSchemaAndBinaryRefuseTheSameHostileValues), in the same sentence:
// the same validation runs before either renders. `helm install` is
// refused on the real cluster (k8s-cronjob/cluster's
// TestHelmInstallOnARealKubelet).
func TestLintRefusesWhatTheSchemaRefuses(t *testing.T) {
	bad := valuesFile(t, installable(map[string]any{"limits": map[string]any{"maxActions": 0}}))
	stdout, stderr, err := helm(t, helmEnv(t), "lint", chartDir(t), "--values", bad)
	require.Error(t, err, "helm lint accepted limits.maxActions: 0")
	assert.Contains(t, stdout+stderr, "values don't meet the specifications of the schema")
	assert.Contains(t, stdout+stderr, "at '/limits/maxActions': value must be 'a whole number from 1 to 9007199254740991 for limits.maxActions")
}
