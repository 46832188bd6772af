package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// monitoringFile reads one of the chart's monitoring files, which the
// monitoring work ships; the test fails, naming it, while it is missing.
func monitoringFile(t *testing.T, name string) []byte {
	t.Helper()
	path := filepath.Join(chartDir(t), "files", "monitoring", name)
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the chart's %s (the shipped alerts and dashboard) is missing", path)
	return b
}

// With monitoring on, the chart renders a PrometheusRule whose spec is the
// shipped rule file, and a ConfigMap Grafana's sidecar loads holding the
// shipped dashboard; with its defaults, neither.
func TestMonitoringObjectsHoldTheShippedFiles(t *testing.T) {
	for _, o := range mustRender(t, namespace, nil) {
		assert.NotEqual(t, "PrometheusRule", o.GetKind(), "off by default")
		assert.NotContains(t, o.GetLabels(), "grafana_dashboard", "off by default")
	}

	var rules map[string]any
	require.NoError(t, yaml.Unmarshal(monitoringFile(t, "rules.yaml"), &rules))
	var dashboard map[string]any
	require.NoError(t, json.Unmarshal(monitoringFile(t, "dashboard.json"), &dashboard))

	objs := mustRender(t, namespace, map[string]any{"monitoring": map[string]any{
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
		"dashboard":      map[string]any{"enabled": true, "labels": map[string]any{"grafana_folder": "ci"}},
	}})

	pr := find(objs, "PrometheusRule", namespace, release)
	require.NotNil(t, pr, "a PrometheusRule")
	assert.Equal(t, "monitoring.coreos.com/v1", pr.GetAPIVersion())
	assert.Equal(t, "kube-prometheus-stack", pr.GetLabels()["release"], "its labels, for the operator's ruleSelector")
	assert.Equal(t, rules, pr.Object["spec"], "its spec is files/monitoring/rules.yaml")
	assert.NotEmpty(t, rules["groups"], "a rule file with groups")

	cm := find(objs, "ConfigMap", namespace, release+"-dashboard")
	require.NotNil(t, cm, "a dashboard ConfigMap")
	assert.Equal(t, "1", cm.GetLabels()["grafana_dashboard"], "the label Grafana's sidecar looks for")
	assert.Equal(t, "ci", cm.GetLabels()["grafana_folder"])
	data, ok, err := unstructured.NestedString(cm.Object, "data", "runner-reaper.json")
	require.NoError(t, err)
	require.True(t, ok, "the ConfigMap holds runner-reaper.json")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &got), "runner-reaper.json is JSON")
	assert.Equal(t, dashboard, got, "runner-reaper.json is files/monitoring/dashboard.json")
}

// Enabled without its file, each monitoring object fails the render,
// naming the file and the value, rather than installing an empty rule or
// dashboard; disabled, the file is not needed.
func TestMonitoringFailsClearlyWithoutItsFile(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "runner-reaper")
	require.NoError(t, os.CopyFS(chart, os.DirFS(chartDir(t))))
	require.NoError(t, os.RemoveAll(filepath.Join(chart, "files", "monitoring")))

	_, err := renderChart(t, chart, namespace, nil)
	require.NoError(t, err, "with monitoring off the files are not needed")
	for value, file := range map[string]string{
		"monitoring.prometheusRule.enabled": "files/monitoring/rules.yaml",
		"monitoring.dashboard.enabled":      "files/monitoring/dashboard.json",
	} {
		t.Run(value, func(t *testing.T) {
			_, err := renderChart(t, chart, namespace, with(map[string]any{}, value, true))
			require.Error(t, err)
			assert.Contains(t, err.Error(), file)
			assert.Contains(t, err.Error(), value)
		})
	}
}
