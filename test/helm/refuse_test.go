package helm

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/reap"
)

// beyondTheTable are values the binary refuses at start-up that the
// hostile table (test/configtest) has no row for, and that the schema
// once let through, so that the CronJob would have exited 2 on every
// fire: URLs url.Parse refuses or a loopback check net.ParseIP fails;
// durations whose fraction time.ParseDuration drops below a nanosecond,
// leaving 0, or exactly a bound; a label key's prefix past 253
// characters; an enterprise scope with App auth. Each is set at its
// chart value (over App auth for app rows), and refusedAt is where the
// schema must say so when it is not the value's own place.
func beyondTheTable() []struct {
	at, env   string
	value     any
	app       bool
	refusedAt string
} {
	long := strings.Repeat("p", 254) + "/"
	type row = struct {
		at, env   string
		value     any
		app       bool
		refusedAt string
	}
	rows := []row{
		{at: "scopes", env: "REAPER_SCOPES", value: []any{"enterprise:acme"}, app: true, refusedAt: "/scopes/0"},
		{at: "scopes", env: "REAPER_SCOPES", value: []any{"org:acme", "enterprise:acme-corp"}, app: true, refusedAt: "/scopes/1"},
		{at: "confirmAfter", env: "REAPER_CONFIRM_AFTER", value: "0.0000000001s"},
		{at: "registrationDeadline", env: "REAPER_REGISTRATION_DEADLINE", value: "0.5ns"},
		{at: "startDeadline", env: "REAPER_START_DEADLINE", value: "0.000000000001m"},
		{at: "arc.failedAfter", env: "REAPER_ARC_FAILED_AFTER", value: "0.0000000000001h"},
		{at: "ownerStamp.maxAge", env: "REAPER_STAMP_MAX_AGE", value: "0.00000000001m"},
		{at: "github.timeout", env: "REAPER_GITHUB_TIMEOUT", value: "0.0001us"},
		{at: "kube.timeout", env: "REAPER_KUBE_TIMEOUT", value: "0.0000001ms"},
		{at: "sweepTimeout", env: "REAPER_SWEEP_TIMEOUT", value: "5.0000000001s"},
		{at: "sweepTimeout", env: "REAPER_SWEEP_TIMEOUT", value: "0.001388888889h"},
		{at: "podSelector", env: "REAPER_POD_SELECTOR", value: long + "app=x"},
		{at: "podSelector", env: "REAPER_POD_SELECTOR", value: "app=x,!" + long + "excluded"},
		{at: "scopeLabel", env: "REAPER_SCOPE_LABEL", value: long + "scope"},
		{at: "ownerStamp.label", env: "REAPER_OWNER_STAMP_LABEL", value: long + "claimed"},
		{at: "runnerNameFrom", env: "REAPER_RUNNER_NAME_FROM", value: "label:" + long + "name"},
		{at: "jobFrom", env: "REAPER_JOB_FROM", value: "annotation:" + long + "job"},
		{at: "metrics.otlpEndpoint", env: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "http://[::1/"},
	}
	for _, u := range []string{"https://ghes.example.com/api/%zz/", "https://[::1/", "http://127.999.0.1/", "http://127.0.0.01/",
		"https://[:::]/", "https://[::1]:x/", "https://ho{st/", "https://ghes.example.com/api/\x01/", "http://[::1/"} {
		rows = append(rows, row{at: "github.apiURL", env: "REAPER_GITHUB_API_URL", value: u})
	}
	for _, u := range []string{"http://[::1/", "http://pushgateway:9091/%zz", "http://push{gateway/", "http://[fd00::9/"} {
		rows = append(rows, row{at: "metrics.pushgatewayURL", env: "REAPER_PUSHGATEWAY_URL", value: u})
	}
	return rows
}

// Each value of beyondTheTable is refused by the binary, set directly over
// what the chart's defaults render, and by the schema at its place: the
// chart no longer installs what the first sweep would refuse.
func TestSchemaRefusesWhatTheBinaryRefusesBeyondTheTable(t *testing.T) {
	defaults := podEnv(t, mustRender(t, namespace, nil), tokenSecret())
	appDefaults := podEnv(t, mustRender(t, namespace, appValues()), appSecret(t))
	for _, r := range beyondTheTable() {
		t.Run(fmt.Sprintf("%s=%q", r.at, r.value), func(t *testing.T) {
			env, base := defaults, map[string]any{}
			if r.app {
				env, base = appDefaults, appValues()
			}
			direct := maps.Clone(env)
			text := fmt.Sprint(r.value)
			if l, ok := r.value.([]any); ok {
				var items []string
				for _, x := range l {
					items = append(items, x.(string))
				}
				text = strings.Join(items, ",")
			}
			direct[r.env] = text
			_, err := load(t, namespace, direct)
			refusedFor(t, err, r.env, text)

			_, err = render(t, namespace, with(base, r.at, r.value))
			require.Error(t, err, "the schema accepted %s=%q, which the binary refuses", r.at, r.value)
			at := r.refusedAt
			if at == "" {
				at = "/" + strings.ReplaceAll(r.at, ".", "/")
			}
			assertRefusedAt(t, err, at, r.at)
		})
	}
}

// The sweep's own deadline ends the sweep before the Job's, as the
// kustomize base's TestSweepEndsBeforeTheJobsDeadline checks for the
// shipped configuration (k8s-cronjob/deadline_test.go): for the chart's
// defaults and the full values, the binary's SweepTimeout is below
// activeDeadlineSeconds and above the spare in which no action starts,
// and the pod's grace period leaves the action in flight its spare. A
// sweepTimeout not below activeDeadlineSeconds, in any spelling of the
// duration, fails the render, naming both: the Job would be killed
// before the sweep wrote its report.
func TestSweepEndsBeforeTheJobsDeadline(t *testing.T) {
	full := chartValues(t, "testdata/full-values.yaml")
	for name, values := range map[string]map[string]any{"the defaults": nil, "the full values": full} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, namespace, values)
			spec, _, err := unstructured.NestedMap(theCronJob(t, objs).Object, "spec", "jobTemplate", "spec")
			require.NoError(t, err)
			deadline, ok := spec["activeDeadlineSeconds"].(float64) // as JSON decodes every number
			require.True(t, ok, "the Job has a deadline: %v", spec["activeDeadlineSeconds"])
			jobDeadline := time.Duration(deadline) * time.Second
			secret := appSecret(t)
			secret["app.pem"] = secret["private-key"]
			cfg, err := load(t, namespace, podEnv(t, objs, mergeSecrets(tokenSecret(), secret)))
			require.NoError(t, err)
			assert.Less(t, cfg.SweepTimeout, jobDeadline, "the sweep ends before the Job's deadline")
			assert.Greater(t, cfg.SweepTimeout, reap.DefaultSpare, "there is time to act")
			grace := 30 * time.Second // Kubernetes' default
			if g, ok, _ := unstructured.NestedFieldNoCopy(spec, "template", "spec", "terminationGracePeriodSeconds"); ok {
				seconds := g.(float64)
				grace = time.Duration(seconds) * time.Second
			}
			assert.Greater(t, grace, reap.DefaultSpare, "after SIGTERM the action in flight has its spare to finish")
		})
	}

	for _, c := range []struct {
		sweep    string
		deadline int
		ok       bool
	}{
		{"45s", 50, true},
		{"49.999999999s", 50, true},
		{"49999999999ns", 50, true},
		{"0.0138888888h", 50, true},
		{"100s", 110, true},
		{"59m59.999999999s", 3600, true},
		{"1h", 3601, true},
		{"49s999999999ns", 50, true},
		{"50s", 50, false},
		{"+50s", 50, false},
		{"50000ms", 50, false},
		{"50000000000ns", 50, false},
		{"50000000us", 50, false},
		{"0.8333333334m", 50, false},
		{"1m", 50, false},
		{"1h", 3600, false},
		{"2h", 50, false},
		{"49.5s500ms", 50, false},
		{"20s30s", 50, false},
	} {
		t.Run(fmt.Sprintf("sweepTimeout %s, activeDeadlineSeconds %d", c.sweep, c.deadline), func(t *testing.T) {
			values := map[string]any{"sweepTimeout": c.sweep, "activeDeadlineSeconds": c.deadline}
			objs, err := render(t, namespace, values)
			if !c.ok {
				require.Error(t, err)
				assert.Contains(t, err.Error(), fmt.Sprintf("sweepTimeout (%s) must be below activeDeadlineSeconds (%d)", c.sweep, c.deadline))
				_, err = render(t, namespace, values, "--skip-schema-validation")
				require.Error(t, err, "the template's rule, not the schema's")
				return
			}
			require.NoError(t, err)
			env := podEnv(t, objs, tokenSecret())
			assert.Equal(t, c.sweep, env["REAPER_SWEEP_TIMEOUT"])
			d, err := time.ParseDuration(c.sweep)
			require.NoError(t, err)
			assert.Less(t, d, time.Duration(c.deadline)*time.Second)
		})
	}
}

// chartValues reads a values file.
func chartValues(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(b, &m))
	return m
}

// mergeSecrets is one Secret holding the keys of both.
func mergeSecrets(a, b secretData) secretData {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// GitHub's ids pass through exactly or not at all. YAML gives Helm a
// number as a float64, which keeps integers exactly only up to 2^53-1:
// 12345678901234567 would become 12345678901234568, another installation.
// The schema refuses a number past 2^53-1 and takes a larger id as a
// string of digits, which reaches the binary as written.
func TestGitHubIDsAreExactOrRefused(t *testing.T) {
	app := func(id any) map[string]any {
		return map[string]any{"github": map[string]any{"auth": "app", "app": map[string]any{"id": 1, "installationID": id}}}
	}
	for _, c := range []struct {
		name  string
		value any
		want  string // "": refused
	}{
		{"the largest exact number", 9007199254740991, "9007199254740991"},
		{"a number past it", 12345678901234567, ""},
		{"the same as a string", "12345678901234567", "12345678901234567"},
		{"the largest string", "999999999999999999", "999999999999999999"},
		{"a leading zero", "012", ""},
		{"hex", "0x10", ""},
		{"zero", "0", ""},
		{"a sign", "+5", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, namespace, app(c.value))
			if c.want == "" {
				require.Error(t, err, "%v accepted", c.value)
				assertRefusedAt(t, err, "/github/app/installationID", "github.app.installationID")
				return
			}
			require.NoError(t, err)
			env := podEnv(t, objs, appSecret(t))
			assert.Equal(t, c.want, env["REAPER_GITHUB_INSTALLATION_ID"])
			cfg, err := load(t, namespace, env)
			require.NoError(t, err)
			assert.Equal(t, c.want, fmt.Sprint(cfg.GitHub.InstallationID), "the binary reads the id given")
		})
	}
}

// What the chart's README lists as checked at start-up only, beyond the hostile
// table's start-up rows (a duration's bounds and overflow): the chart
// renders it, and the binary refuses it naming the variable. A rule the
// schema learns to say moves from here to the refused lists.
func TestStartupOnlyRefusalsReachTheBinary(t *testing.T) {
	for _, c := range []struct {
		name, env string
		values    map[string]any
	}{
		{"scopes that differ only in case", "REAPER_SCOPES", map[string]any{"scopes": []any{"org:Acme", "org:acme"}}},
		{"a selector that misses ARC's pods with arc.enabled", "REAPER_ARC_LEAKS",
			map[string]any{"arc": map[string]any{"enabled": true}, "podSelector": "app=runner"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, namespace, c.values)
			require.NoError(t, err, "the schema cannot say it")
			_, err = load(t, namespace, podEnv(t, objs, tokenSecret()))
			refusedFor(t, err, c.env, fmt.Sprint(c.values))
		})
	}
}
