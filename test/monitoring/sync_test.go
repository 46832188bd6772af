package monitoring

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// decodeAny reads YAML into plain maps, lists and scalars, the form in
// which two documents with the same content compare equal whatever their
// comments, order of keys and styles of string.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(b, &v))
	return v
}

// The component's PrometheusRule holds, as its spec, exactly the chart's
// rule file: the two can be edited apart, and must not drift.
func TestComponentRuleSpecIsTheChartsRules(t *testing.T) {
	l := files(t)
	var pr prometheusRule
	readYAML(t, l.componentRule, &pr)
	assert.Equal(t, "monitoring.coreos.com/v1", pr.APIVersion)
	assert.Equal(t, "PrometheusRule", pr.Kind)
	spec, err := yaml.Marshal(&pr.Spec)
	require.NoError(t, err)
	chart, err := os.ReadFile(l.chartRules)
	require.NoError(t, err)
	assert.Equal(t, decodeAny(t, chart), decodeAny(t, spec))
}

// The component's dashboard and the chart's are the same bytes.
func TestDashboardCopiesAreIdentical(t *testing.T) {
	l := files(t)
	chart, err := os.ReadFile(l.chartDashboard)
	require.NoError(t, err)
	component, err := os.ReadFile(l.componentDashboard)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(chart, component), "%s and %s differ", l.chartDashboard, l.componentDashboard)
}

// object is a rendered Kubernetes object, as much as the test reads.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
}

// The base with the component, rendered by kustomize, adds the
// PrometheusRule with the chart's rules and the dashboard's ConfigMap
// with the label Grafana's sidecar looks for and the chart's dashboard,
// under a name that does not change with its content, both in the base's
// namespace or the one an overlay moves them to.
func TestComponentRenders(t *testing.T) {
	l := files(t)
	chartRules, err := os.ReadFile(l.chartRules)
	require.NoError(t, err)
	chartDashboard, err := os.ReadFile(l.chartDashboard)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, namespace, want string
	}{
		{"base namespace", "", "arc-runners"},
		{"overlay namespace", "ci-runners", "ci-runners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := testenv.Kustomize(t, testenv.Kustomization{
				Base:       l.root + "/k8s-cronjob",
				Components: []string{l.component},
				Namespace:  tc.namespace,
			})
			var rule, dash *object
			dec := yaml.NewDecoder(bytes.NewReader(out))
			for {
				var o object
				err := dec.Decode(&o)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				switch {
				case o.Kind == "PrometheusRule":
					require.Nil(t, rule, "two PrometheusRules")
					rule = &o
				case o.Kind == "ConfigMap" && o.Metadata.Labels["grafana_dashboard"] != "":
					require.Nil(t, dash, "two dashboard ConfigMaps")
					dash = &o
				}
			}
			require.NotNil(t, rule, "no PrometheusRule rendered")
			assert.Equal(t, "monitoring.coreos.com/v1", rule.APIVersion)
			assert.Equal(t, tc.want, rule.Metadata.Namespace)
			spec, err := yaml.Marshal(&rule.Spec)
			require.NoError(t, err)
			assert.Equal(t, decodeAny(t, chartRules), decodeAny(t, spec))

			require.NotNil(t, dash, "no ConfigMap labelled grafana_dashboard")
			assert.Equal(t, "1", dash.Metadata.Labels["grafana_dashboard"])
			assert.Equal(t, "runner-reaper-dashboard", dash.Metadata.Name, "no content hash in the name")
			assert.Equal(t, tc.want, dash.Metadata.Namespace)
			require.Len(t, dash.Data, 1)
			assert.Equal(t, string(chartDashboard), dash.Data["runner-reaper.json"])
		})
	}
}
