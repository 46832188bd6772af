package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaRefusal is the line Helm's validator (santhosh-tekuri/jsonschema
// v6, in Helm 3.22) prints for each value it refuses: the JSON pointer of
// the value, then the message.
var schemaRefusal = regexp.MustCompile(`^\s*- at '(.*?)': (.*)$`)

// readable are the messages an operator may read from the schema: a
// sentence (a failed const, which the schema uses to carry one), Helm's own
// word on a type or an enum, which already says what is accepted, or a
// value left out entirely. "validation failed" only heads the lines of
// several refusals inside one object.
var readable = regexp.MustCompile(`^(value must be '.+'|got [a-z]+, want [a-z]+( or [a-z]+)*|value must be one of '.*|missing property '[^']+'|validation failed)$`)

// refusals are the schema's refusals in helm's error, by pointer. Every
// line must be readable: no regular expression, no bare bound
// ("minimum: got 0, want 1"), no "false schema" or "'not' failed".
func refusals(t testing.TB, err error) map[string][]string {
	t.Helper()
	require.Error(t, err)
	require.Contains(t, err.Error(), "values don't meet the specifications of the schema", "refused by the schema")
	out := map[string][]string{}
	for _, line := range strings.Split(err.Error(), "\n") {
		m := schemaRefusal.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		assert.Regexp(t, readable, m[2], "at %s the operator reads a sentence, Helm's word on a type or an enum, or a missing value", m[1])
		if m[2] != "validation failed" {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	require.NotEmpty(t, out, "the schema's refusal names a place: %v", err)
	return out
}

// assertRefusedAt checks that the schema refused the value at pointer (or
// an item or key of it), readably, and that each sentence there names the
// value by its path in values.yaml (dotted).
func assertRefusedAt(t testing.TB, err error, pointer, path string) {
	t.Helper()
	all := refusals(t, err)
	found := false
	for at, msgs := range all {
		if at != pointer && !strings.HasPrefix(at, pointer+"/") {
			continue
		}
		found = true
		for _, m := range msgs {
			if strings.HasPrefix(m, "value must be '") {
				assert.Contains(t, m, path, "the sentence names the value as values.yaml does")
			}
		}
	}
	assert.True(t, found, "refused at %s, not only at %v", pointer, keysOf(all))
}

// rawRefusals are what Helm's validator prints for a check that carries no
// sentence: a regular expression, a bare bound, a length, a count, a false
// schema, a negation, an object's extra keys.
var rawRefusals = []string{"does not match pattern", "minimum: got", "maximum: got", "exclusiveMinimum", "false schema", "'not' failed",
	"minLength", "maxLength", "minItems", "items at", "additional properties", "'allOf' failed"}

// assertNoRawRefusal checks that helm's error holds none of rawRefusals:
// for refusals whose lines a value's own line breaks split, which
// refusals cannot read line by line.
func assertNoRawRefusal(t testing.TB, err error) {
	t.Helper()
	for _, r := range rawRefusals {
		assert.NotContains(t, err.Error(), r, "the operator reads Helm's raw refusal")
	}
}

// dotted is a JSON pointer as a values.yaml path, list indexes left out:
// /limits/maxActions is limits.maxActions, /scopes/0 is scopes.
func dotted(pointer string) string {
	var out []string
	for _, p := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if strings.Trim(p, "0123456789") == "" {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// What an operator reads for each kind of value the chart refuses, word
// for word: the line helm prints for it (the validator's order of lines
// is not fixed, so they are compared as a set). Every refusal of the
// schema names the value's place and is a sentence saying what the value
// takes, with an example, or Helm's own line for a type or an enum, which
// says as much; the template's refusals are sentences of their own.
func TestOperatorsReadWhatWasWrongAndWhatIsAccepted(t *testing.T) {
	schema := func(lines ...string) []string { return lines }
	for _, c := range []struct {
		name   string
		values map[string]any
		raw    bool // the values as given, not made installable
		extra  []string
		schema []string // the lines of the schema's refusal; nil: the template's
		fail   string   // the template's refusal
	}{
		{name: "no scopes", values: map[string]any{"image": map[string]any{"tag": "v1.2.3"}}, raw: true, schema: schema(
			`- at '/scopes': value must be 'at least one scope to sweep for scopes (REAPER_SCOPES): org:NAME, repo:OWNER/NAME or enterprise:SLUG; the chart has no default, e.g. --set "scopes={org:my-org}"'`)},
		{name: "no scopes, the schema skipped", values: map[string]any{"image": map[string]any{"tag": "v1.2.3"}}, raw: true,
			extra: []string{"--skip-schema-validation"},
			fail:  "scopes is empty: list at least one scope to sweep (REAPER_SCOPES: org:NAME, repo:OWNER/NAME or enterprise:SLUG); the chart has no default, e.g. --set 'scopes={org:my-org}'"},
		{name: "a scope twice", values: map[string]any{"scopes": []any{"org:acme", "org:acme"}}, schema: schema(
			`- at '/scopes': value must be 'a list of distinct scopes for scopes (REAPER_SCOPES): one is listed twice'`)},
		{name: "a bad scope", values: map[string]any{"scopes": []any{"org:acme", "orgs:acme"}}, schema: schema(
			`- at '/scopes/1': value must be 'a scope for scopes (REAPER_SCOPES): org:NAME, repo:OWNER/NAME or enterprise:SLUG, each name up to 100 letters, digits, - and _ (a repository name also ., but not . or .. alone), e.g. --set "scopes={org:my-org,repo:my-org/my-repo}"'`)},
		{name: "an enterprise scope with App auth", values: map[string]any{"scopes": []any{"enterprise:acme"},
			"github": map[string]any{"auth": "app", "app": map[string]any{"id": 1, "installationID": 2}}}, schema: schema(
			`- at '/scopes/0': value must be 'a scope for scopes of org:NAME or repo:OWNER/NAME with github.auth: app: GitHub does not accept App installation tokens for enterprise runners, so an enterprise: scope needs github.auth: token and a classic token'`)},
		{name: "a bad duration", values: map[string]any{"sweepTimeout": "5 min"}, schema: schema(
			`- at '/sweepTimeout': value must be 'a Go duration above zero for sweepTimeout (REAPER_SWEEP_TIMEOUT): numbers each with a unit (ns, us, ms, s, m, h), no spaces, no finer than 1ns, e.g. --set sweepTimeout=45s'`)},
		{name: "a duration finer than a nanosecond", values: map[string]any{"arc": map[string]any{"failedAfter": "0.5ns"}}, schema: schema(
			`- at '/arc/failedAfter': value must be 'a Go duration above zero for arc.failedAfter (REAPER_ARC_FAILED_AFTER): numbers each with a unit (ns, us, ms, s, m, h), no spaces, no finer than 1ns, e.g. --set arc.failedAfter=10m'`)},
		{name: "a bad enum", values: map[string]any{"logLevel": "verbose"}, schema: schema(
			`- at '/logLevel': value must be one of 'debug', 'info', 'warn', 'error'`)},
		{name: "a bad type", values: map[string]any{"kube": map[string]any{"concurrency": "ten"}}, schema: schema(
			`- at '/kube/concurrency': got string, want integer`)},
		{name: "a number out of range", values: map[string]any{"limits": map[string]any{"maxActions": 0}}, schema: schema(
			`- at '/limits/maxActions': value must be 'a whole number from 1 to 9007199254740991 for limits.maxActions (REAPER_MAX_ACTIONS), e.g. --set limits.maxActions=10'`)},
		{name: "a fraction out of range", values: map[string]any{"massSuspicion": map[string]any{"fraction": "1e-3"}}, schema: schema(
			`- at '/massSuspicion/fraction': value must be 'a number above 0 and at most 1 for massSuspicion.fraction (REAPER_MASS_SUSPICION_FRACTION), a decimal without sign or exponent when quoted, e.g. --set massSuspicion.fraction=0.5'`)},
		{name: "an unknown value", values: map[string]any{"scopse": []any{"org:acme"}}, schema: schema(
			`- at '/scopse': value must be 'absent: the runner-reaper chart has no such value (values.yaml lists every value, README.md what each does)'`)},
		{name: "an unknown key", values: map[string]any{"github": map[string]any{"tokn": "x"}}, schema: schema(
			`- at '/github/tokn': value must be 'absent: github has no such key; its keys are existingSecret, secretLayout, auth, tokenKey, app, apiURL, timeout'`)},
		{name: "a rule across values", values: map[string]any{"arc": map[string]any{"removeFinalizers": true}}, schema: schema(
			`- at '/arc/enabled': value must be 'true when arc.removeFinalizers is true: removing the finalizers of ARC is part of ARC-aware reaping, e.g. --set arc.enabled=true'`)},
		{name: "App auth without its ids", values: map[string]any{"github": map[string]any{"auth": "app"}}, schema: schema(
			`- at '/github/app/id': value must be 'set, with github.auth: app and github.secretLayout: reaper, to the App id (REAPER_GITHUB_APP_ID), e.g. --set github.app.id=123456'`,
			`- at '/github/app/installationID': value must be 'set, with github.auth: app and github.secretLayout: reaper, to the App installation id (REAPER_GITHUB_INSTALLATION_ID), e.g. --set github.app.installationID=7890123'`)},
		{name: "ARC's layout with an id of the values", values: map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app",
			"app": map[string]any{"installationID": 7890123}}}, schema: schema(
			`- at '/github/app/installationID': value must be '0 (unset) with github.secretLayout: arc, which reads the App installation id from the key github_app_installation_id of the Secret: leave github.app.installationID out, e.g. --set github.app.installationID=0'`)},
		{name: "ARC's layout with a key of the values", values: map[string]any{"github": map[string]any{"secretLayout": "arc", "tokenKey": "token"}}, schema: schema(
			`- at '/github/tokenKey': value must be 'empty with github.secretLayout: arc, which reads the key github_token as ARC names it; github.tokenKey names a key only with github.secretLayout: reaper, e.g. --set github.tokenKey='`)},
		{name: "a label of the chart's", values: map[string]any{"podLabels": map[string]any{"app.kubernetes.io/name": "mine"}}, schema: schema(
			`- at '/podLabels/app.kubernetes.io~1name': value must be 'left out of podLabels: app.kubernetes.io/name and app.kubernetes.io/instance are labels of the chart, by which the logs of the pod are found; choose another key'`)},
		{name: "a label key that is none", values: map[string]any{"nodeSelector": map[string]any{"pool type": "gpu"}}, schema: schema(
			`- at '/nodeSelector/pool type': value must be 'under a label key in nodeSelector: [PREFIX/]NAME, NAME up to 63 letters, digits, -, _ and . starting and ending with a letter or digit, PREFIX a lower-case DNS subdomain of at most 253 characters, e.g. --set nodeSelector.pool=runners'`)},
		{name: "an image from a checkout, by no tag", values: map[string]any{"scopes": []any{"org:acme"}}, raw: true,
			fail: "image.tag and image.digest are empty, and this chart has no appVersion to default to: it is installed from a checkout, not a released chart. Name the image to run, e.g. --set image.tag=v1.2.3, or install a released chart (oci://ghcr.io/runner-reaper/charts/runner-reaper --version X.Y.Z), whose appVersion is its image's tag"},
		{name: "the sweep past the Job's deadline", values: map[string]any{"sweepTimeout": "1m"},
			fail: "sweepTimeout (1m) must be below activeDeadlineSeconds (50): the Job is killed at its deadline, before the sweep would write its report"},
		{name: "a mode the chart has not", values: map[string]any{"mode": "daemon"}, schema: schema(
			`- at '/mode': value must be one of 'cronjob', 'deployment'`)},
		{name: "a mode the chart has not, the schema skipped", values: map[string]any{"mode": "daemon"}, extra: []string{"--skip-schema-validation"},
			fail: `mode must be cronjob or deployment; got "daemon"`},
		{name: "a ServiceMonitor for a CronJob", values: map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}, schema: schema(
			`- at '/monitoring/serviceMonitor/enabled': value must be 'false with mode: cronjob, whose sweeps push their figures (metrics.pushgatewayURL) and have no Service to scrape; a ServiceMonitor scrapes the Deployment of mode: deployment, e.g. --set mode=deployment'`)},
		{name: "a port only root may bind", values: map[string]any{"mode": "deployment", "deployment": map[string]any{"port": 80}}, schema: schema(
			`- at '/deployment/port': value must be 'a port from 1024 to 65535 for deployment.port (REAPER_LISTEN): the reaper runs as a user that is not root and has no capabilities, which may not bind a lower one, e.g. --set deployment.port=8080'`)},
		{name: "the sweep past the interval", values: map[string]any{"mode": "deployment", "deployment": map[string]any{"interval": "30s"}},
			fail: "sweepTimeout (45s) must be below deployment.interval (30s): a sweep must end before the next is due"},
		{name: "a PodDisruptionBudget no drain gets past", values: map[string]any{"mode": "deployment", "deployment": map[string]any{"replicas": 1}},
			fail: "deployment.pdb.minAvailable (1) must be below deployment.replicas (1): otherwise no ready replica may ever be evicted, and a node drain waits for ever; raise deployment.replicas, or set deployment.pdb.enabled=false"},
		{name: "a Service name that starts with a digit", values: map[string]any{"mode": "deployment", "fullnameOverride": "1fleet"},
			fail: `with mode: deployment the Service takes the objects' name, "1fleet", and a Service's name must start with a letter and hold only lower-case letters, digits and -: name the objects with fullnameOverride, e.g. --set fullnameOverride=runner-reaper`},
		{name: "an unknown key of deployment", values: map[string]any{"deployment": map[string]any{"replica": 3}}, schema: schema(
			`- at '/deployment/replica': value must be 'absent: deployment has no such key; its keys are replicas, interval, port, leaseName, terminationGracePeriodSeconds, resources, pdb'`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			values := c.values
			if !c.raw {
				values = installable(values)
			}
			_, err := helmTemplate(t, chartDir(t), release, namespace, values, c.extra...)
			require.Error(t, err)
			if c.schema == nil {
				assert.NotContains(t, err.Error(), "values don't meet the specifications of the schema", "the template's refusal, past the schema")
				assert.Contains(t, err.Error(), "execution error at (runner-reaper/templates/")
				assert.Contains(t, err.Error(), "): "+c.fail+"\n", "the template's sentence, whole")
				return
			}
			refusals(t, err)
			var lines []string
			for _, l := range strings.Split(err.Error(), "\n") {
				if m := schemaRefusal.FindStringSubmatch(l); m != nil && m[2] != "validation failed" {
					lines = append(lines, strings.TrimSpace(l))
				}
			}
			assert.ElementsMatch(t, c.schema, lines, "what helm prints:\n%s", err)
		})
	}
}

// `helm lint` with the chart's own values fails, saying that scopes is
// required and how to give it: the schema refuses what lint must, as
// lint only logs a template's fail.
func TestLintWithoutScopesFailsSayingSo(t *testing.T) {
	stdout, stderr, err := helm(t, helmEnv(t), "lint", chartDir(t))
	require.Error(t, err, "helm lint passed the chart without scopes: %s", stdout)
	assert.Contains(t, stdout+stderr, `at '/scopes': value must be 'at least one scope to sweep for scopes (REAPER_SCOPES)`)
	assert.Contains(t, stdout+stderr, `e.g. --set "scopes={org:my-org}"`)
	assert.Contains(t, stdout+stderr, "1 chart(s) linted, 1 chart(s) failed")

	stdout, stderr, err = helm(t, helmEnv(t), "lint", "--strict", chartDir(t), "--set", "scopes={org:my-org}")
	require.NoError(t, err, "%s%s", stdout, stderr)
}

// schemaNodes are every object of the schema, with its JSON pointer in the
// schema.
func schemaNodes(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(b, &doc))
	out := map[string]map[string]any{}
	var walk func(at string, n any)
	walk = func(at string, n any) {
		switch v := n.(type) {
		case map[string]any:
			out[at] = v
			for k, c := range v {
				walk(at+"/"+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s/%d", at, i), c)
			}
		}
	}
	walk("", doc)
	return out
}

// The schema's sentences hold as the operator reads them: each is a const
// that also refuses itself as a value (not: the same const), so a value
// spelled like the sentence is no way around the check; none holds a ',
// which the validator would print as \'; and each list of an object's keys
// names exactly the keys it has.
func TestSchemaSentencesAreWholeAndGuarded(t *testing.T) {
	nodes := schemaNodes(t)
	sentences := 0
	for at, n := range nodes {
		s, ok := n["const"].(string)
		if !ok || strings.HasSuffix(at, "/not") || strings.Contains(at+"/", "/if/") {
			continue // not a sentence: a sentence's guard, or a condition
		}
		sentences++
		assert.NotContains(t, s, "'", "%s: a ' would read as \\'", at)
		assert.Equal(t, map[string]any{"const": s}, n["not"], "%s: the sentence refuses itself as a value", at)
		if strings.HasSuffix(at, "/additionalProperties") {
			parent := nodes[strings.TrimSuffix(at, "/additionalProperties")]
			props, _ := parent["properties"].(map[string]any)
			_, named, ok := strings.Cut(s, "its keys are ")
			if !ok {
				continue
			}
			assert.ElementsMatch(t, keysOf(props), strings.Split(named, ", "), "%s lists the object's keys", at)
		}
	}
	assert.Greater(t, sentences, 40, "the schema's checks carry sentences")

	// The guard is live: the sentence for sweepTimeout, given as
	// sweepTimeout, is refused.
	var sentence string
	for at, n := range nodes {
		if at == "/properties/sweepTimeout/else" {
			sentence = n["const"].(string)
		}
	}
	require.NotEmpty(t, sentence)
	_, err := render(t, namespace, map[string]any{"sweepTimeout": sentence})
	require.Error(t, err, "the sentence passed as a value")
	assert.Contains(t, err.Error(), "at '/sweepTimeout': 'not' failed")
}

// The schema keeps no check whose failure Helm would print raw: a pattern,
// a bound, a length, a count or a false schema stands only in an if, whose
// else is the sentence.
func TestSchemaChecksOutsideAnIfCarryASentence(t *testing.T) {
	raw := []string{"pattern", "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "minItems", "uniqueItems", "not", "propertyNames"}
	for at, n := range schemaNodes(t) {
		inIf := strings.Contains(at, "/if") || strings.HasPrefix(at, "/definitions/")
		for _, k := range raw {
			if _, ok := n[k]; !ok || inIf {
				continue
			}
			if k == "not" {
				if _, guard := n["const"]; guard {
					continue // a sentence's guard
				}
			}
			assert.Fail(t, "a check Helm would print raw", "%s has %s outside an if", at, k)
		}
		for k, v := range n {
			if b, ok := v.(bool); ok && !b && !slices.Contains([]string{"additionalProperties"}, k) {
				assert.Fail(t, "a false schema Helm would print as such", "%s/%s", at, k)
			}
		}
	}
}
