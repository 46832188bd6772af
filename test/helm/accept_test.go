package helm

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// accepted are values the binary accepts, in the forms a user writes them,
// for the values whose schema is a pattern: each must pass the schema too,
// so that the schema, while refusing what the binary refuses, never
// refuses what it accepts. The REAPER_ variable each renders into, and the
// value it must render as, follow; over are the values it is set over.
func accepted() []acceptedRow {
	var out []acceptedRow
	add := func(at, env string, values ...any) { out = append(out, acceptedOver(nil, at, env, values...)...) }
	// A sweep of an hour needs a Job's deadline past it: the template
	// refuses a sweepTimeout that is not below activeDeadlineSeconds.
	out = append(out, acceptedOver(map[string]any{"activeDeadlineSeconds": 3601}, "sweepTimeout", "REAPER_SWEEP_TIMEOUT", "1h", "59m59s")...)
	add("scopes", "REAPER_SCOPES", []any{"org:a"}, []any{"repo:acme/.github", "org:acme"}, []any{"repo:acme/web_site.v2"},
		[]any{"enterprise:acme-corp"}, []any{"org:Acme_Managed-1"}, []any{"repo:a/" + strings.Repeat("r", 100)},
		[]any{"org:" + strings.Repeat("o", 100)}, []any{"repo:acme/..."})
	add("namespaces", "REAPER_NAMESPACES", []any{"a"}, []any{"arc-runners", "arc-runners-gpu"}, []any{strings.Repeat("n", 63)}, []any{"0ns"})
	add("podSelector", "REAPER_POD_SELECTOR", strings.Repeat("p", 253)+"/app=x", "a=b", "a==b", "a = b", " a=b ", "a=", "a in (x)", "a in (x, y,z)", "a in(x)",
		"k8s.io/app=x,!other", "!other,app", "a!=b,c", "a notin (x),b", "a>5,b", "b,a<3", "example.com/name-v1.2=Value_1",
		"actions-ephemeral-runner=True,app.kubernetes.io/component=runner")
	add("runnerContainer", "REAPER_RUNNER_CONTAINER", "runner", "r", "actions-runner-2", strings.Repeat("r", 63))
	add("runnerNameFrom", "REAPER_RUNNER_NAME_FROM", "pod-name", "label:runner-name", "annotation:runners.example.com/github-name", "label:A_b.c")
	add("scopeLabel", "REAPER_SCOPE_LABEL", "scope", "runners.example.com/github-scope", "a.b-c/D_e.f", strings.Repeat("p.", 126)+"p/k")
	add("jobFrom", "REAPER_JOB_FROM", "annotation:job", "annotation:pool.example.com/job")
	add("ownerStamp.label", "REAPER_OWNER_STAMP_LABEL", "claimed", "pool.example.com/claimed-by")
	add("ownerStamp.maxAge", "REAPER_STAMP_MAX_AGE", "1h30m", "1.5h", ".5h", "90s", "300ms", "1µs", "2μs", "1h0m0s", "+10m", "5m0.5s", "1000000h",
		// Fractions down to one nanosecond in each unit, and trailing zeros,
		// which change nothing.
		"0.000000001s", "1.500000000000s", "0.0000000001m", "0.00000000001h", "0.000001ms", "1.001us", "2.0ns", "1h.5000000000000000000m")
	add("ghost.namePrefix", "REAPER_GHOST_NAME_PREFIX", "abc", "arc-runners-", "acme runners: ")
	add("ghost.label", "REAPER_GHOST_LABEL", "reaper-owned", "gpu", "self-hosted-x", "linux-large", "x64 pool")
	add("confirmAfter", "REAPER_CONFIRM_AFTER", "1s", "10m", "48h")
	add("sweepTimeout", "REAPER_SWEEP_TIMEOUT", "5001ms", "5.000000001s", "49.999999999s")
	add("kube.timeout", "REAPER_KUBE_TIMEOUT", "1ns", "5m", "299s")
	add("github.apiURL", "REAPER_GITHUB_API_URL", "https://api.github.com/", "https://ghes.example.com/api/v3", "https://ghes.example.com:8443/api/v3/",
		"https://10.0.0.1/", "http://127.0.0.1:8080/", "http://localhost:3000/api/v3/", "http://[::1]:9/", "http://127.8.9.10/",
		"http://127.255.255.254/", "https://[2001:db8::1]:8443/api/v3/", "https://[::ffff:a00:1]/", "https://ghes.example.com/api/v3/a%20b/",
		"https://ghes_internal.example.com/", "https://ghes.example.com./api/v3/", "https://ghes.example.com:/api/v3/")
	add("github.timeout", "REAPER_GITHUB_TIMEOUT", "1s", "4m59s")
	add("ledger.historySize", "REAPER_HISTORY_SIZE", 0, 1, 1000)
	add("limits.maxFraction", "REAPER_MAX_FRACTION", "0.5", ".5", "1", "1.0", "0.001", 0.1, 1)
	add("massSuspicion.fraction", "REAPER_MASS_SUSPICION_FRACTION", "0.75", 0.3)
	add("metrics.pushgatewayURL", "REAPER_PUSHGATEWAY_URL", "http://pushgateway.monitoring:9091", "https://pgw.example.com/", "http://10.0.0.9:9091/push",
		"http://[fd00::9]:9091/")
	add("metrics.instance", "REAPER_METRICS_INSTANCE", "eu-west.1", "a", "Shard_2", strings.Repeat("i", 63))
	add("metrics.otlpEndpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.monitoring:4318", "https://otlp.example.com/v1")
	// mode: deployment's. An interval of 10s needs a sweep below it.
	out = append(out, acceptedOver(map[string]any{"mode": "deployment", "sweepTimeout": "6s"}, "deployment.interval", "REAPER_INTERVAL",
		"10s", "1m", "90s", "1h30m")...)
	out = append(out, acceptedOver(map[string]any{"mode": "deployment"}, "deployment.leaseName", "REAPER_LEASE_NAME",
		"runner-reaper", "a", "fleet-a.leader", strings.Repeat("l", 253))...)
	return out
}

// acceptedRow is one value of accepted.
type acceptedRow struct {
	over    map[string]any
	at, env string
	value   any
	want    string
}

// acceptedOver are rows of values at at, each set over over.
func acceptedOver(over map[string]any, at, env string, values ...any) []acceptedRow {
	var out []acceptedRow
	for _, v := range values {
		want := fmt.Sprint(v)
		if l, ok := v.([]any); ok {
			var s []string
			for _, x := range l {
				s = append(s, x.(string))
			}
			want = strings.Join(s, ",")
		}
		out = append(out, acceptedRow{over: over, at: at, env: env, value: v, want: want})
	}
	return out
}

// Every value of accepted passes the schema, renders into its variable
// as written, and the binary accepts what was rendered.
func TestSchemaAcceptsWhatTheBinaryAccepts(t *testing.T) {
	// The binary's half loads what the chart's half rendered: without helm
	// neither can run, so the whole test skips under -short (or fails,
	// naming `make helm`) here, before either half.
	helmPath(t)
	var mu sync.Mutex
	rendered := map[string]map[string]string{}
	all := accepted()
	name := func(at string, v any) string { return fmt.Sprintf("%s=%#v", at, v) }
	t.Run("chart", func(t *testing.T) {
		for _, r := range all {
			t.Run(name(r.at, r.value), func(t *testing.T) {
				t.Parallel()
				over := r.over
				if over == nil {
					over = map[string]any{}
				}
				objs, err := render(t, namespace, with(over, r.at, r.value))
				require.NoError(t, err, "the schema refused %s=%#v, which the binary accepts", r.at, r.value)
				env := podEnv(t, objs, tokenSecret())
				require.Equal(t, r.want, env[r.env])
				mu.Lock()
				rendered[name(r.at, r.value)] = env
				mu.Unlock()
			})
		}
	})
	t.Run("binary", func(t *testing.T) {
		for _, r := range all {
			t.Run(name(r.at, r.value), func(t *testing.T) {
				env, ok := rendered[name(r.at, r.value)]
				require.True(t, ok, "the chart rendered it")
				_, err := load(t, namespace, env)
				require.NoError(t, err, "the binary accepts %s=%q", r.env, env[r.env])
			})
		}
	})
}
