// Package monitoring tests the shipped alerts and Grafana dashboard: the
// rules with the real promtool (check, and unit tests that make each alert
// fire and stay quiet on recorded Pushgateway series, and that fail when an
// alert is broken; on pushed series, and on a Deployment's scraped
// replicas), in a real Prometheus on a real Pushgateway, and as a
// PrometheusRule against the Prometheus Operator's CRD on the test API
// server, as the ServiceMonitors of the chart and of
// components/servicemonitor are against theirs; the kustomize component
// against the Helm chart's copies; and
// every metric name the alerts and panels select against the contract of
// metrics/names.go.
package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// layout is where the shipped monitoring files are, from the repository's
// root.
type layout struct {
	root string
	// chartRules and chartDashboard are the Helm chart's copies.
	chartRules, chartDashboard string
	// component is the kustomize component; componentRule its
	// PrometheusRule and componentDashboard its dashboard.
	component, componentRule, componentDashboard string
	// testdata holds the promtool unit tests.
	testdata string
}

func files(t *testing.T) layout {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(root, "k8s-cronjob", "components", "monitoring")
	chart := filepath.Join(root, "charts", "runner-reaper", "files", "monitoring")
	return layout{
		root:               root,
		chartRules:         filepath.Join(chart, "rules.yaml"),
		chartDashboard:     filepath.Join(chart, "dashboard.json"),
		component:          component,
		componentRule:      filepath.Join(component, "prometheusrule.yaml"),
		componentDashboard: filepath.Join(component, "dashboard.json"),
		testdata:           filepath.Join(root, "test", "monitoring", "testdata"),
	}
}

// contractNames are the names of metrics.Families, the table every sink
// pushes from: the only runner_reaper_* names the alerts and the dashboard
// may select, so a renamed metric breaks this test, not a dashboard.
func contractNames() []string {
	var out []string
	for _, f := range metrics.Families() {
		out = append(out, f.Name)
	}
	return out
}

// pushgatewayNames are the Pushgateway's own per-group series, which the
// alerts and the dashboard may also select.
func pushgatewayNames() []string {
	return []string{"push_time_seconds", "push_failure_time_seconds"}
}

// ruleFile is a Prometheus rule file, as much of it as the tests read.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert,omitempty"`
	Record      string            `yaml:"record,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	KeepFiring  string            `yaml:"keep_firing_for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// alerts lists the file's alerting rules in order.
func (f ruleFile) alerts() []rule {
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// readYAML decodes the YAML file at path into v, refusing fields v does
// not have, so that a misspelt key fails instead of vanishing.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// prometheusRule is the component's PrometheusRule.
type prometheusRule struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec yaml.Node `yaml:"spec"`
}

// componentSpecFile writes the component's PrometheusRule's spec to a rule
// file of its own, for promtool, and returns its path.
func componentSpecFile(t *testing.T, l layout) string {
	t.Helper()
	var pr prometheusRule
	readYAML(t, l.componentRule, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s, not a monitoring.coreos.com/v1 PrometheusRule", l.componentRule, pr.APIVersion, pr.Kind)
	}
	b, err := yaml.Marshal(&pr.Spec)
	if err != nil {
		t.Fatalf("encode the PrometheusRule's spec: %v", err)
	}
	path := filepath.Join(t.TempDir(), "prometheusrule-spec.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// promtool runs the real promtool and returns its output and exit error.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := testenv.RequirePrometheusTool(t, "promtool")
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}
