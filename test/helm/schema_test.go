package helm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/test/configtest"
)

// kind is how a row's text becomes a chart value.
type kind int

const (
	// text: the string itself.
	text kind = iota //nolint:unused // the zero kind, which a row that names no kind has
	// list: the text split at commas, as the binary splits the variable.
	list
	// scalar: a number or boolean value. The text is set as a user writes
	// it in a values file: what YAML reads it as (1e3 is the number 1000,
	// y and yes are true), or the string when YAML reads it as neither.
	scalar
)

// decision is what the chart does with one REAPER_ variable's hostile
// rows (configtest.Hostile and AppHostile). Every row of a variable that
// has a chart value is listed in exactly one of schema, startup,
// yamlReads and defaults; a variable without one says why in none.
type decision struct {
	// at is the chart value's dotted path; "" when the chart has none.
	at   string
	kind kind
	// app: the row is tried with App auth (github.auth: app), as
	// AppHostile's rows are.
	app bool
	// over are other values the row is set over, and why.
	over map[string]any
	// schema are the rows values.schema.json refuses.
	schema []string
	// refusedAt is the JSON pointer of the schema's refusal when it is not
	// at's own: a rule across values.
	refusedAt string
	// startup are the rows the schema cannot express, and why: the chart
	// passes them on unchanged and only the binary refuses them, at
	// start-up.
	startup map[string]string
	// yamlReads are rows that a values file does not hold as the text:
	// YAML reads the text as another value, which the binary accepts. The
	// map gives what the chart then renders.
	yamlReads map[string]string
	// defaults are rows the chart takes for its own default (an empty
	// name): it renders, as the map gives, a value the binary accepts.
	defaults map[string]string
	// none says why the variable has no chart value.
	none string
}

// decisions is the chart's answer to every row of the hostile table. A row
// or a variable the table gains must be added here, so each new rule is
// either expressed in the schema or listed as checked at start-up only.
func decisions() map[string]decision {
	const (
		overflow  = "a duration past Go's int64 nanoseconds (about 292 years): a pattern cannot bound the number"
		atMost5m  = "above 5m: a duration's upper bound is a comparison of durations, which a pattern cannot make"
		above5s   = "not above 5s (the time before the deadline in which no action starts): a duration's bound"
		atMost1h  = "above 1h: a duration's upper bound"
		ledgerWhy = "the chart writes it: configmap:RELEASE-NAMESPACE/LEDGER, with ledger.name a DNS subdomain in the schema"
	)
	return map[string]decision{
		"REAPER_SCOPES": {at: "scopes", kind: list, schema: []string{"org:..", "repo:../..", "repo:acme/..", "org:acme/..", "org:%2e%2e",
			"org:ac me", "org:acme?page=2", "org:acme#x", "repo:acme/web/x", "enterprise:acme_corp", "org:\x01acme", "org:acme,,org:web",
			"org:" + strings.Repeat("x", 101), "orgs:acme"}},
		"REAPER_NAMESPACES":        {at: "namespaces", kind: list, schema: []string{"..", "Arc", "arc_runners", "*,arc-runners", "arc runners", strings.Repeat("a", 64), "-arc"}},
		"REAPER_POD_SELECTOR":      {at: "podSelector", schema: []string{"app in (a", "a=b=c", "x\x01=y", " "}},
		"REAPER_RUNNER_CONTAINER":  {at: "runnerContainer", schema: []string{"Runner", "run ner", "", strings.Repeat("r", 64), "../runner"}},
		"REAPER_RUNNER_NAME_FROM":  {at: "runnerNameFrom", schema: []string{"env:X", "label:", "label:bad key!", "annotation:a/b/c", "podname"}},
		"REAPER_SCOPE_LABEL":       {at: "scopeLabel", schema: []string{"bad key!", "a/b/c", "-x"}},
		"REAPER_JOB_FROM":          {at: "jobFrom", schema: []string{"label:pool/job", "annotation:", "annotation:bad key!", "annotation:a/b/c", "env:JOB", "pool/job"}},
		"REAPER_OWNER_STAMP_LABEL": {at: "ownerStamp.label", schema: []string{"bad key!", "/x"}},
		"REAPER_STAMP_MAX_AGE": {at: "ownerStamp.maxAge", schema: []string{"0", "-5m", "5", "NaN", "10 minutes"},
			startup: map[string]string{"99999999999h": overflow}},
		"REAPER_GHOST_NAME_PREFIX":        {at: "ghost.namePrefix", schema: []string{"arc-\n", "arc-\x7f", "ärc-", "a", "ar"}},
		"REAPER_GHOST_LABEL":              {at: "ghost.label", schema: []string{"own\x01ed", "lab\tel", "self-hosted", "Linux", "X64", "arm64"}},
		"REAPER_ARC_LEAKS":                {at: "arc.enabled", kind: scalar, schema: []string{"2"}, yamlReads: map[string]string{"yes": "true"}},
		"REAPER_ARC_FAILED_AFTER":         {at: "arc.failedAfter", schema: []string{"0s", "-1m", "forever"}},
		"REAPER_ARC_PODLESS_AFTER":        {at: "arc.podlessAfter", schema: []string{"0", "Inf"}},
		"REAPER_ARC_STUCK_DELETING_AFTER": {at: "arc.stuckDeletingAfter", schema: []string{"-30m", "1d"}},
		// YAML reads "on" as true, and true needs arc.enabled: the schema's
		// if/then says so.
		"REAPER_ARC_REMOVE_FINALIZERS": {at: "arc.removeFinalizers", kind: scalar, schema: []string{"on", "true"}, refusedAt: "/arc/enabled"},
		"REAPER_REGISTRATION_DEADLINE": {at: "registrationDeadline", schema: []string{"0", "-10m", "NaN"}},
		"REAPER_START_DEADLINE":        {at: "startDeadline", schema: []string{"0", "-15m", "15", "soon"}},
		"REAPER_DELETE_UNSCHEDULABLE":  {at: "deleteUnschedulable", kind: scalar, schema: []string{"sure", "2"}},
		"REAPER_CONFIRM_AFTER":         {at: "confirmAfter", schema: []string{"0s", "-5m", "5 min"}},
		"REAPER_MAX_ACTIONS": {at: "limits.maxActions", kind: scalar, schema: []string{"0", "-1", "99999999999999999999", "ten"},
			yamlReads: map[string]string{"1e3": "1000"}},
		"REAPER_MAX_FRACTION": {at: "limits.maxFraction", kind: scalar, schema: []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "0", "-0.1",
			"1.0001", "1e-400", "1e400"}},
		"REAPER_MASS_SUSPICION_FRACTION": {at: "massSuspicion.fraction", kind: scalar, schema: []string{"NaN", "Inf", "-Inf", "0", "2"}},
		"REAPER_MASS_SUSPICION_MIN":      {at: "massSuspicion.min", kind: scalar, schema: []string{"0", "-5", "many"}},
		"REAPER_DRY_RUN":                 {at: "dryRun", kind: scalar, schema: []string{"yes please"}, yamlReads: map[string]string{"y": "true"}},
		"REAPER_LEDGER":                  {none: ledgerWhy},
		"REAPER_HISTORY_SIZE": {at: "ledger.historySize", kind: scalar, schema: []string{"-1", "1001", "all", "2.5",
			"99999999999999999999", " "}},
		"REAPER_LOOP_THRESHOLD": {at: "loops.threshold", kind: scalar, schema: []string{"1", "0", "-5", "51", "many", "2.5",
			"99999999999999999999", " "}},
		"REAPER_LOOP_WINDOW": {at: "loops.window", schema: []string{"0s", "-30m", "half an hour", "30", " "},
			startup: map[string]string{"30s": "under 1m: a duration's lower bound", "25h": "above 24h: a duration's upper bound"}},
		"REAPER_DELETE_SERVICE_ACCOUNT": {at: "deleteServiceAccounts", kind: scalar, schema: []string{"sure"}},
		"REAPER_READ_RUNNER_LOG":        {at: "runnerLog.enabled", kind: scalar, schema: []string{"sure", "2"}},
		"REAPER_KUBE_CONCURRENCY":       {at: "kube.concurrency", kind: scalar, schema: []string{"0", "-1", "65", "1000000"}},
		"REAPER_KUBE_TIMEOUT": {at: "kube.timeout", schema: []string{"0", "-1s", "forever", "NaN"},
			startup: map[string]string{"6m": atMost5m}},
		// Over a Job's deadline past 2h: with the default 50s the template
		// would refuse 2h (sweepTimeout below activeDeadlineSeconds) before
		// the binary could, and the bound of 1h is the binary's alone.
		"REAPER_SWEEP_TIMEOUT": {at: "sweepTimeout", over: map[string]any{"activeDeadlineSeconds": 7201}, schema: []string{"0", "-45s", "soon", "Inf"},
			startup: map[string]string{"5s": above5s, "1s": above5s, "2h": atMost1h}},
		"REAPER_MAX_SCOPES_PER_SWEEP": {at: "limits.maxScopesPerSweep", kind: scalar, schema: []string{"-1", "ten", "1.5", "10001",
			"99999999999999999999", " "}, yamlReads: map[string]string{"1e3": "1000"}},
		"REAPER_LOG_LEVEL":    {at: "logLevel", schema: []string{"verbose", "trace"}},
		"REAPER_GITHUB_TOKEN": {none: "read from the Secret github.existingSecret (key github.tokenKey), never a value"},
		"REAPER_GITHUB_API_URL": {at: "github.apiURL", schema: []string{"ftp://x", "http://api.github.com/", "http://10.0.0.1/",
			"https://user:hunter2@ghes.example.com/api/v3/", "https://ghes.example.com/api/v3/?x=1", "https://ghes.example.com/#f",
			"https://", "api.github.com", "https:api.github.com"}},
		"REAPER_GITHUB_TIMEOUT": {at: "github.timeout", schema: []string{"0", "-1s", "soon"},
			startup: map[string]string{"1h": atMost5m}},
		"REAPER_GITHUB_SECRET_ARN": {none: "the Lambda's: the CronJob reads its credential from a Kubernetes Secret"},
		"REAPER_EKS_CLUSTER":       {none: "the Lambda's, which reaches EKS from outside; the CronJob runs inside the cluster"},
		"REAPER_METRICS_NAMESPACE": {none: "CloudWatch EMF lines, the Lambda's metrics; the chart's go to a Pushgateway (metrics.pushgatewayURL)"},
		"REAPER_PUSHGATEWAY_URL": {at: "metrics.pushgatewayURL", schema: []string{"pushgateway:9091", "ftp://pushgateway:9091",
			"http://user:hunter2@pushgateway:9091", "http://pushgateway:9091/?x=1", "http://pushgateway:9091/#f", "http://", "http:pushgateway"}},
		"REAPER_METRICS_INSTANCE": {at: "metrics.instance", schema: []string{"-eu", "eu west", "eu/west", strings.Repeat("i", 64), "eu\x01", "ëu"}},

		"REAPER_GITHUB_APP_ID":           {at: "github.app.id", kind: scalar, app: true, schema: []string{"-1", "0", "abc", "99999999999999999999"}},
		"REAPER_GITHUB_INSTALLATION_ID":  {at: "github.app.installationID", kind: scalar, app: true, schema: []string{"-2", "0", "1.5"}},
		"REAPER_GITHUB_PRIVATE_KEY":      {none: "read from the Secret github.existingSecret (key github.app.privateKeyKey), never a value"},
		"REAPER_GITHUB_PRIVATE_KEY_FILE": {none: "the chart passes the Secret's key as REAPER_GITHUB_PRIVATE_KEY; it mounts no file"},

		// The long-running mode's (mode: deployment). A sweep of 5.5s
		// leaves an interval below 10s to the binary: with the default 45s
		// the template would refuse it first (the sweep below the
		// interval).
		"REAPER_INTERVAL": {at: "deployment.interval", over: map[string]any{"mode": "deployment", "sweepTimeout": "5.5s"},
			schema: []string{"0", "-1m", "60", "soon"}, startup: map[string]string{"9s": "below 10s: a duration's lower bound"}},
		"REAPER_LISTEN": {none: "the chart writes it: :PORT, with deployment.port a whole number from 1024 to 65535 in the schema"},
		"REAPER_LEASE_NAME": {at: "deployment.leaseName", over: map[string]any{"mode": "deployment"},
			schema: []string{"Runner-Reaper", "runner_reaper", "-x", "x.", strings.Repeat("l", 254)}, defaults: map[string]string{"": release}},
		"REAPER_LEASE_NAMESPACE": {none: "the pod's namespace, from the downward API: the release's, a namespace name the template checks"},
		"REAPER_LEASE_DURATION":  {none: "not a chart value: the binary's 15s, from which the renew deadline and the retry period follow"},
		"REAPER_IDENTITY":        {none: "the pod's name, from the downward API, which the binary makes unique to the process"},
	}
}

// row is one hostile value of one variable.
type row struct {
	name, value string
	d           decision
}

// rows are the hostile table's rows, each with the chart's decision; a row
// or variable without one, or a decision naming a row the table does not
// have, fails the test.
func rows(t *testing.T) []row {
	t.Helper()
	ds := decisions()
	table := configtest.Hostile()
	app := configtest.AppHostile()
	for k, v := range app {
		table[k] = v
	}
	var out []row
	for name, values := range table {
		d, ok := ds[name]
		if !assert.True(t, ok, "%s is in the hostile table, and the chart has made no decision on it: give it a chart value (and say which rows the schema refuses), or say why it has none", name) {
			continue
		}
		if d.at == "" {
			assert.NotEmpty(t, d.none, "%s has no chart value: say why", name)
			assert.Empty(t, d.schema, "%s has no chart value", name)
			assert.Empty(t, d.startup, "%s has no chart value", name)
			assert.Empty(t, d.yamlReads, "%s has no chart value", name)
			assert.Empty(t, d.defaults, "%s has no chart value", name)
			continue
		}
		_, isApp := app[name]
		assert.Equal(t, isApp, d.app, "%s: a row of AppHostile is tried with App auth, and only those", name)
		listed := map[string]int{}
		for _, v := range d.schema {
			listed[v]++
		}
		for v := range d.startup {
			listed[v]++
		}
		for v := range d.yamlReads {
			listed[v]++
		}
		for v := range d.defaults {
			listed[v]++
		}
		for _, v := range values {
			n := listed[v]
			assert.Equal(t, 1, n, "%s=%q: list the row in exactly one of schema, startup, yamlReads and defaults (it is in %d)", name, v, n)
			delete(listed, v)
			out = append(out, row{name: name, value: v, d: d})
		}
		for v := range listed {
			assert.Fail(t, "a decision on a row the table does not have", "%s=%q", name, v)
		}
	}
	for name := range ds {
		_, ok := table[name]
		assert.True(t, ok, "the decisions name %s, which the hostile table does not", name)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].value < out[j].value
	})
	return out
}

// chartValue is the row's text as the chart value its decision says.
func chartValue(t testing.TB, k kind, v string) any {
	t.Helper()
	switch k {
	case list:
		return strings.Split(v, ",")
	case scalar:
		var m map[string]any
		if err := yaml.Unmarshal([]byte("v: "+v), &m); err == nil {
			switch x := m["v"].(type) {
			case float64, bool:
				return x
			}
		}
		return v
	default:
		return v
	}
}

// appValues are the values of App auth, over which AppHostile's rows are
// tried.
func appValues() map[string]any {
	return map[string]any{"github": map[string]any{"auth": "app", "app": map[string]any{"id": 1, "installationID": 2}}}
}

// baseValues are the values a row is set over.
func baseValues(d decision) map[string]any {
	out := map[string]any{}
	if d.app {
		out = appValues()
	}
	for k, v := range d.over {
		out[k] = v
	}
	return out
}

// baseSecret is what the pod reads from the Secret for a row.
func baseSecret(t testing.TB, d decision) secretData {
	if d.app {
		return appSecret(t)
	}
	return tokenSecret()
}

// refusedFor checks that err is config.Load's refusal naming name.
func refusedFor(t *testing.T, err error, name, value string) {
	t.Helper()
	require.Error(t, err, "%s=%q: the binary accepted it", name, value)
	var ce *config.Error
	require.True(t, errors.As(err, &ce), "a configuration error, not %T: %v", err, err)
	for _, p := range ce.Problems {
		if p.Var == name || strings.Contains(p.What, name) {
			return
		}
	}
	t.Fatalf("%s=%q: no problem names %s: %v", name, value, name, err)
}

// TestSchemaAndBinaryRefuseTheSameHostileValues sets every row of the
// hostile table whose variable has a chart value through the chart: the
// rows the schema can express must be refused by `helm template`, at the
// value's own place; the rows listed as start-up only must reach the
// pod's environment unchanged and be refused there by config.Load; the
// rows YAML reads as another value must render that value, which the
// binary accepts. And config.Load refuses every row set directly, over the
// environment the chart's defaults render: the two agree.
func TestSchemaAndBinaryRefuseTheSameHostileValues(t *testing.T) {
	all := rows(t)
	require.NotEmpty(t, all)

	// The chart, rows in parallel: helm runs as a process of its own.
	var mu sync.Mutex
	rendered := map[string]map[string]string{} // name=value -> the pod's environment
	t.Run("chart", func(t *testing.T) {
		for _, r := range all {
			if r.d.at == "" {
				continue
			}
			t.Run(fmt.Sprintf("%s=%q", r.name, r.value), func(t *testing.T) {
				t.Parallel()
				values := with(baseValues(r.d), r.d.at, chartValue(t, r.d.kind, r.value))
				objs, err := render(t, namespace, values)
				if slices.Contains(r.d.schema, r.value) {
					require.Error(t, err, "the schema accepted %s=%q (as %#v)", r.d.at, r.value, chartValue(t, r.d.kind, r.value))
					at := r.d.refusedAt
					if at == "" {
						at = "/" + strings.ReplaceAll(r.d.at, ".", "/")
					}
					// Refused by the schema, at the value's place, in a
					// sentence naming it (or Helm's word on a type).
					if strings.ContainsAny(r.value, "\n\r") {
						assert.Contains(t, err.Error(), "at '"+at, "refused at the value's place")
						assertNoRawRefusal(t, err)
						return
					}
					assertRefusedAt(t, err, at, dotted(at))
					return
				}
				require.NoError(t, err, "%s=%q is for the binary to refuse, not the schema", r.d.at, r.value)
				env := podEnv(t, objs, baseSecret(t, r.d))
				if want, ok := r.d.yamlReads[r.value]; ok {
					require.Equal(t, want, env[r.name], "YAML reads %q as %#v", r.value, chartValue(t, r.d.kind, r.value))
				} else if want, ok := r.d.defaults[r.value]; ok {
					require.Equal(t, want, env[r.name], "the chart takes %q for its default", r.value)
				} else {
					require.Equal(t, r.value, env[r.name], "the chart passes %s on unchanged, for the binary to refuse", r.d.at)
				}
				mu.Lock()
				rendered[r.name+"="+r.value] = env
				mu.Unlock()
			})
		}
	})

	// The binary, rows one after another: config.Load reads the process's
	// environment.
	t.Run("binary", func(t *testing.T) {
		defaults := podEnv(t, mustRender(t, namespace, nil), tokenSecret())
		appDefaults := podEnv(t, mustRender(t, namespace, appValues()), appSecret(t))
		for _, r := range all {
			t.Run(fmt.Sprintf("%s=%q", r.name, r.value), func(t *testing.T) {
				env := defaults
				if r.d.app {
					env = appDefaults
				}
				direct := maps.Clone(env)
				direct[r.name] = r.value
				if r.name == "REAPER_GITHUB_PRIVATE_KEY_FILE" {
					delete(direct, "REAPER_GITHUB_PRIVATE_KEY")
				}
				_, err := load(t, namespace, direct)
				refusedFor(t, err, r.name, r.value)

				env, ok := rendered[r.name+"="+r.value]
				switch {
				case r.d.startup[r.value] != "":
					require.True(t, ok, "the chart rendered the row")
					_, err := load(t, namespace, env)
					refusedFor(t, err, r.name, r.value)
				case r.d.yamlReads[r.value] != "", r.d.defaults[r.value] != "":
					require.True(t, ok, "the chart rendered the row")
					_, err := load(t, namespace, env)
					require.NoError(t, err, "the binary accepts what the chart rendered for %q", r.value)
				}
			})
		}
	})
}
