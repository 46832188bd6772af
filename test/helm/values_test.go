package helm

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The chart's defaults pass its schema, and the environment they render
// is the binary's own defaults but for what the chart means to change:
// dry-run on (as the kustomize base ships it), the release's namespace,
// and the metrics instance named after the release and its namespace. A
// default that drifted from the binary's would show here.
func TestChartDefaultsAreTheBinarysDefaults(t *testing.T) {
	env := podEnv(t, mustRender(t, namespace, nil), tokenSecret())
	fromChart, err := load(t, namespace, env)
	require.NoError(t, err, "the binary accepts what the chart's defaults render: %v", env)
	assert.True(t, fromChart.DryRun, "the chart starts in dry-run")

	binary, err := load(t, namespace, map[string]string{
		"REAPER_SCOPES":           "org:example-org",
		"REAPER_NAMESPACES":       namespace,
		"REAPER_DRY_RUN":          "true",
		"REAPER_METRICS_INSTANCE": namespace + "." + release,
		"REAPER_GITHUB_TOKEN":     tokenSecret()["token"],
	})
	require.NoError(t, err)
	assert.Equal(t, binary, fromChart, "every other value the chart sets is the binary's default")
}

// A realistic release that sets every value passes the schema, renders
// each value into the variable it names, and the binary accepts the
// result.
func TestFullValuesPassTheSchemaAndTheBinary(t *testing.T) {
	path := filepath.Join("testdata", "full-values.yaml")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var full map[string]any
	require.NoError(t, yaml.Unmarshal(b, &full))
	defaults := chartDefaults(t)
	assert.Empty(t, missingKeys(defaults, full, ""), "%s sets every value of the chart's values.yaml", path)

	secret := appSecret(t)
	secret["app.pem"] = secret["private-key"]
	objs := mustRender(t, namespace, full)
	c := container(t, objs)
	assert.Equal(t, "registry.example.com/platform/runner-reaper@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
		c["image"], "with a digest, the image is pinned by it and the tag is unused")
	assert.Equal(t, "Always", c["imagePullPolicy"])
	env := podEnv(t, objs, secret)
	assert.Equal(t, map[string]string{
		"REAPER_SCOPES":                   "org:acme,repo:acme/web.site,org:acme-labs",
		"REAPER_NAMESPACES":               "arc-runners,arc-runners-gpu",
		"REAPER_POD_SELECTOR":             "actions-ephemeral-runner in (True),!pool.example.com/excluded",
		"REAPER_RUNNER_CONTAINER":         "runner",
		"REAPER_RUNNER_NAME_FROM":         "annotation:runners.example.com/github-name",
		"REAPER_SCOPE_LABEL":              "runners.example.com/github-scope",
		"REAPER_JOB_FROM":                 "annotation:pool.example.com/job",
		"REAPER_OWNER_STAMP_LABEL":        "pool.example.com/claimed-by",
		"REAPER_STAMP_MAX_AGE":            "15m",
		"REAPER_GHOST_NAME_PREFIX":        "arc-runners-",
		"REAPER_GHOST_LABEL":              "reaper-owned",
		"REAPER_ARC_LEAKS":                "true",
		"REAPER_ARC_REMOVE_FINALIZERS":    "true",
		"REAPER_ARC_FAILED_AFTER":         "15m",
		"REAPER_ARC_PODLESS_AFTER":        "20m",
		"REAPER_ARC_STUCK_DELETING_AFTER": "1h",
		"REAPER_DELETE_SERVICE_ACCOUNT":   "true",
		"REAPER_READ_RUNNER_LOG":          "false",
		"REAPER_REGISTRATION_DEADLINE":    "12m",
		"REAPER_START_DEADLINE":           "20m",
		"REAPER_DELETE_UNSCHEDULABLE":     "true",
		"REAPER_CONFIRM_AFTER":            "3m",
		"REAPER_MAX_ACTIONS":              "25",
		"REAPER_MAX_FRACTION":             "0.1",
		"REAPER_MAX_SCOPES_PER_SWEEP":     "50",
		"REAPER_MASS_SUSPICION_FRACTION":  "0.4",
		"REAPER_MASS_SUSPICION_MIN":       "8",
		"REAPER_LOOP_THRESHOLD":           "4",
		"REAPER_LOOP_WINDOW":              "45m",
		"REAPER_DRY_RUN":                  "false",
		"REAPER_LEDGER":                   "configmap:arc-runners/fleet-a-marks",
		"REAPER_HISTORY_SIZE":             "500",
		"REAPER_KUBE_CONCURRENCY":         "8",
		"REAPER_KUBE_TIMEOUT":             "20s",
		"REAPER_SWEEP_TIMEOUT":            "100s",
		"REAPER_LOG_LEVEL":                "debug",
		"REAPER_GITHUB_API_URL":           "https://ghes.example.com/api/v3/",
		"REAPER_GITHUB_TIMEOUT":           "20s",
		"REAPER_GITHUB_APP_ID":            "123456",
		"REAPER_GITHUB_INSTALLATION_ID":   "7890123",
		"REAPER_GITHUB_PRIVATE_KEY":       secret["app.pem"],
		"REAPER_PUSHGATEWAY_URL":          "http://pushgateway.monitoring:9091",
		"REAPER_METRICS_INSTANCE":         "fleet-a",
		"OTEL_EXPORTER_OTLP_ENDPOINT":     "http://otel-collector.monitoring:4318",
	}, env)
	cfg, err := load(t, namespace, env)
	require.NoError(t, err, "the binary accepts what the full values render")
	assert.False(t, cfg.DryRun)
	require.NotNil(t, cfg.Push.OTLP, "the OTLP endpoint reached the binary")
	assert.Equal(t, "http://otel-collector.monitoring:4318/v1/metrics", cfg.Push.OTLP.URL)
}

// chartDefaults is the chart's values.yaml.
func chartDefaults(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(b, &m))
	return m
}

// missingKeys are the dotted paths of defaults' values that values does
// not set; an empty map or list in defaults is a value of its own.
func missingKeys(defaults, values map[string]any, prefix string) []string {
	var out []string
	for k, d := range defaults {
		v, ok := values[k]
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		dm, dIsMap := d.(map[string]any)
		vm, vIsMap := v.(map[string]any)
		if dIsMap && len(dm) > 0 && vIsMap {
			out = append(out, missingKeys(dm, vm, prefix+k+".")...)
		}
	}
	sort.Strings(out)
	return out
}
