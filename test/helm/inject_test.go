package helm

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hostileStrings are what a value written as free text could hold to
// break out of its place in the rendered YAML: a line that ends the
// object and starts another (the review's ClusterRoleBinding to
// cluster-admin), lines that add a key at the ConfigMap's and the env
// list's indentation (REAPER_DRY_RUN=false), template syntax and every
// character YAML gives a meaning, and the line breaks YAML knows beyond
// \n.
func hostileStrings() map[string]string {
	return map[string]string{
		"an object": "x\"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwn\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
			"subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: \"system:authenticated\"}]\n---\n# \"",
		"a key": "x\n  REAPER_DRY_RUN: \"false\"\n                - name: REAPER_DRY_RUN\n                  value: \"false\"\n" +
			"                - name: X\n                  valueFrom:\n                    secretKeyRef:\n                      name: x",
		"YAML's and Go templates' characters": `{{ .Release.Name }}{{ fail "x" }} ' # : - ? [ ] { } & * ! | > % @ ` + "`" + ` \ " ,`,
		"line breaks":                         "a\u2028b\u2029c\u0085d\re\tf...",
	}
}

// freeText is a value the chart takes as text, and where its text lands.
type freeText struct {
	// at is the value's dotted path; its text is placed by wrap (a list or
	// map around it, say), over the values base.
	at   string
	wrap func(h string) any
	base map[string]any
	// got is what the rendered objects hold where the text belongs, and
	// want what that must be for the text h.
	got  func(t *testing.T, objs []*unstructured.Unstructured) any
	want func(h string) any
	// refused, when set, is the template's own refusal of any of the
	// strings, schema or no schema: a value that widens the chart's rights
	// (a namespace).
	refused string
}

// freeTexts are every value of the chart that reaches a template as
// text, scalar or map key, with where each lands.
func freeTexts() map[string]freeText {
	same := func(h string) any { return h }
	app := appValues()
	arcApp := map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}}
	env := func(name string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any { return configData(t, objs)[name] }
	}
	image := func(t *testing.T, objs []*unstructured.Unstructured) any { return container(t, objs)["image"] }
	secretRef := func(field string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any {
			vars, _, _ := unstructured.NestedSlice(container(t, objs), "env")
			require.NotEmpty(t, vars)
			v, _, _ := unstructured.NestedString(vars[0].(map[string]any), "valueFrom", "secretKeyRef", field)
			return v
		}
	}
	podSpec := func(t *testing.T, objs []*unstructured.Unstructured, path ...string) any {
		v, _, err := unstructured.NestedFieldNoCopy(podTemplate(t, objs), path...)
		require.NoError(t, err)
		return v
	}
	at := func(path ...string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any { return podSpec(t, objs, path...) }
	}
	label := func(kind, name, key string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any {
			o := find(objs, kind, namespace, name)
			require.NotNil(t, o, "%s %s", kind, name)
			return o.GetLabels()[key]
		}
	}
	keyed := func(h string) any { return map[string]any{h: "v"} }
	valued := func(h string) any { return map[string]any{"k": h} }
	rule := map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}
	dashboard := map[string]any{"monitoring": map[string]any{"dashboard": map[string]any{"enabled": true}}}
	deployment := map[string]any{"mode": "deployment"}
	scraped := map[string]any{"mode": "deployment", "monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}
	podVar := func(name string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any { return podEnv(t, objs, tokenSecret())[name] }
	}
	endpoint := func(field string) func(*testing.T, []*unstructured.Unstructured) any {
		return func(t *testing.T, objs []*unstructured.Unstructured) any {
			sm := find(objs, "ServiceMonitor", namespace, release)
			require.NotNil(t, sm, "the ServiceMonitor")
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			require.Len(t, eps, 1)
			v, _, _ := unstructured.NestedFieldNoCopy(eps[0].(map[string]any), strings.Split(field, ".")...)
			return v
		}
	}

	texts := map[string]freeText{
		"image.repository": {got: image, want: func(h string) any { return h + ":" + testTag }},
		"image.tag":        {got: image, want: func(h string) any { return "ghcr.io/runner-reaper/runner-reaper:" + h }},
		"image.digest":     {got: image, want: func(h string) any { return "ghcr.io/runner-reaper/runner-reaper@" + h }},
		"image.pullPolicy": {got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			return container(t, objs)["imagePullPolicy"]
		}},
		"imagePullSecrets": {wrap: func(h string) any { return []any{map[string]any{"name": h}} },
			got: at("spec", "imagePullSecrets"), want: func(h string) any { return []any{map[string]any{"name": h}} }},
		"nameOverride": {got: at("metadata", "labels", "app.kubernetes.io/name"), want: func(h string) any { return cut(h) }},
		"fullnameOverride": {got: func(t *testing.T, objs []*unstructured.Unstructured) any { return theCronJob(t, objs).GetName() },
			want: func(h string) any { return cut(h) }},
		"schedule": {got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			return theCronJob(t, objs).Object["spec"].(map[string]any)["schedule"]
		}},
		// A switch is a boolean, not text: refused, schema or no schema
		// (a template takes any string for true).
		"suspend": {refused: "suspend must be true or false"},

		"github.existingSecret":                          {got: secretRef("name")},
		"github.existingSecret (ARC's layout, App auth)": {at: "github.existingSecret", base: arcApp, got: secretRef("name")},
		"github.tokenKey":                                {got: secretRef("key")},
		"github.app.privateKeyKey":                       {base: app, got: secretRef("key")},
		"github.app.id":                                  {base: app, got: env("REAPER_GITHUB_APP_ID")},
		"github.app.installationID":                      {base: app, got: env("REAPER_GITHUB_INSTALLATION_ID")},
		"github.apiURL":                                  {got: env("REAPER_GITHUB_API_URL")},
		"github.timeout":                                 {got: env("REAPER_GITHUB_TIMEOUT")},
		"scopes":                                         {wrap: func(h string) any { return []any{h} }, got: env("REAPER_SCOPES")},
		"podSelector":                                    {got: env("REAPER_POD_SELECTOR")},
		"runnerContainer":                                {got: env("REAPER_RUNNER_CONTAINER")},
		"runnerNameFrom":                                 {got: env("REAPER_RUNNER_NAME_FROM")},
		"scopeLabel":                                     {got: env("REAPER_SCOPE_LABEL")},
		"jobFrom":                                        {got: env("REAPER_JOB_FROM")},
		"ownerStamp.label":                               {got: env("REAPER_OWNER_STAMP_LABEL")},
		"ownerStamp.maxAge":                              {got: env("REAPER_STAMP_MAX_AGE")},
		"ghost.namePrefix":                               {got: env("REAPER_GHOST_NAME_PREFIX")},
		"ghost.label":                                    {got: env("REAPER_GHOST_LABEL")},
		"arc.enabled":                                    {refused: "arc.enabled must be true or false"},
		"arc.removeFinalizers":                           {refused: "arc.removeFinalizers must be true or false"},
		"arc.failedAfter":                                {got: env("REAPER_ARC_FAILED_AFTER")},
		"arc.podlessAfter":                               {got: env("REAPER_ARC_PODLESS_AFTER")},
		"arc.stuckDeletingAfter":                         {got: env("REAPER_ARC_STUCK_DELETING_AFTER")},
		"deleteServiceAccounts":                          {refused: "deleteServiceAccounts must be true or false"},
		"runnerLog.enabled":                              {refused: "runnerLog.enabled must be true or false"},
		"registrationDeadline":                           {got: env("REAPER_REGISTRATION_DEADLINE")},
		"startDeadline":                                  {got: env("REAPER_START_DEADLINE")},
		"deleteUnschedulable":                            {refused: "deleteUnschedulable must be true or false"},
		"confirmAfter":                                   {got: env("REAPER_CONFIRM_AFTER")},
		"limits.maxFraction":                             {got: env("REAPER_MAX_FRACTION")},
		"massSuspicion.fraction":                         {got: env("REAPER_MASS_SUSPICION_FRACTION")},
		"dryRun":                                         {refused: "dryRun must be true or false"},
		"kube.timeout":                                   {got: env("REAPER_KUBE_TIMEOUT")},
		"sweepTimeout":                                   {got: env("REAPER_SWEEP_TIMEOUT")},
		"logLevel":                                       {got: env("REAPER_LOG_LEVEL")},
		"metrics.pushgatewayURL":                         {got: env("REAPER_PUSHGATEWAY_URL")},
		"metrics.instance":                               {got: env("REAPER_METRICS_INSTANCE")},
		"metrics.otlpEndpoint": {got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			return podEnv(t, objs, tokenSecret())["OTEL_EXPORTER_OTLP_ENDPOINT"]
		}},
		"ledger.name": {got: func(t *testing.T, objs []*unstructured.Unstructured) any { return configData(t, objs)["REAPER_LEDGER"] }, want: func(h string) any { return "configmap:" + namespace + "/" + h }},
		"lambdaAccess.group": {base: map[string]any{"lambdaAccess": map[string]any{"enabled": true}}, got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			return find(objs, "RoleBinding", namespace, release+"-lambda").Object["subjects"].([]any)[0].(map[string]any)["name"]
		}},
		"namespaces":                         {wrap: func(h string) any { return []any{h} }, refused: "namespaces: "},
		"podLabels (key)":                    {at: "podLabels", wrap: keyed},
		"podLabels (value)":                  {at: "podLabels", wrap: valued, got: at("metadata", "labels", "k")},
		"podAnnotations (key)":               {at: "podAnnotations", wrap: keyed},
		"podAnnotations (value)":             {at: "podAnnotations", wrap: valued, got: at("metadata", "annotations", "k")},
		"nodeSelector (key)":                 {at: "nodeSelector", wrap: keyed},
		"nodeSelector (value)":               {at: "nodeSelector", wrap: valued, got: at("spec", "nodeSelector", "k")},
		"prometheusRule labels":              {at: "monitoring.prometheusRule.labels", base: rule, wrap: valued, got: label("PrometheusRule", release, "k")},
		"serviceMonitor labels":              {at: "monitoring.serviceMonitor.labels", base: scraped, wrap: valued, got: label("ServiceMonitor", release, "k")},
		"monitoring.serviceMonitor.interval": {base: scraped, got: endpoint("interval")},
		"metrics.instance (the ServiceMonitor's)": {at: "metrics.instance", base: scraped, got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			relabel, _ := endpoint("relabelings")(t, objs).([]any)
			require.Len(t, relabel, 1)
			return relabel[0].(map[string]any)["replacement"]
		}},
		"monitoring.serviceMonitor.enabled": {refused: "monitoring.serviceMonitor.enabled must be true or false"},
		"mode":                              {refused: "mode must be cronjob or deployment"},
		"deployment.interval":               {base: deployment, got: podVar("REAPER_INTERVAL")},
		"deployment.leaseName": {base: deployment, got: func(t *testing.T, objs []*unstructured.Unstructured) any {
			lease := podEnv(t, objs, tokenSecret())["REAPER_LEASE_NAME"]
			role := find(objs, "Role", namespace, release+"-lease")
			require.NotNil(t, role, "the lease Role")
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			require.NotEmpty(t, rules)
			assert.Equal(t, []any{lease}, rules[0].(map[string]any)["resourceNames"], "the Role names the Lease the pod leads on")
			return lease
		}},
		"deployment.pdb.enabled": {refused: "deployment.pdb.enabled must be true or false"},
		"deployment.resources": {base: deployment, wrap: func(h string) any { return map[string]any{"limits": map[string]any{"memory": h}} },
			got: func(t *testing.T, objs []*unstructured.Unstructured) any {
				v, _, _ := unstructured.NestedString(container(t, objs), "resources", "limits", "memory")
				return v
			}},
		"podLabels (value), mode deployment":      {at: "podLabels", base: deployment, wrap: valued, got: at("metadata", "labels", "k")},
		"podAnnotations (value), mode deployment": {at: "podAnnotations", base: deployment, wrap: valued, got: at("metadata", "annotations", "k")},
		"github.existingSecret, mode deployment":  {at: "github.existingSecret", base: deployment, got: secretRef("name")},
		"dashboard labels":                        {at: "monitoring.dashboard.labels", base: dashboard, wrap: valued, got: label("ConfigMap", release+"-dashboard", "k")},
		"resources": {wrap: func(h string) any { return map[string]any{"limits": map[string]any{"memory": h}} },
			got: func(t *testing.T, objs []*unstructured.Unstructured) any {
				v, _, _ := unstructured.NestedString(container(t, objs), "resources", "limits", "memory")
				return v
			}},
		"tolerations": {wrap: func(h string) any { return []any{map[string]any{"key": h, "operator": "Exists"}} },
			got: at("spec", "tolerations"), want: func(h string) any { return []any{map[string]any{"key": h, "operator": "Exists"}} }},
		"affinity": {wrap: func(h string) any { return map[string]any{"nodeAffinity": map[string]any{h: h}} },
			got: at("spec", "affinity", "nodeAffinity"), want: func(h string) any { return map[string]any{h: h} }},
	}
	for name, f := range texts {
		if f.at == "" {
			f.at = name
		}
		if f.wrap == nil {
			f.wrap = same
		}
		if f.want == nil {
			f.want = same
		}
		texts[name] = f
	}
	return texts
}

// cut is a name as the chart cuts it: at 52 bytes, less the "-" and "."
// it then ends on.
func cut(s string) string {
	if len(s) > 52 {
		s = s[:52]
	}
	return strings.TrimRight(s, "-.")
}

// configData is the data of the ConfigMap the reaper's container reads.
func configData(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	from, _, _ := unstructured.NestedSlice(container(t, objs), "envFrom")
	require.Len(t, from, 1)
	name, _, _ := unstructured.NestedString(from[0].(map[string]any), "configMapRef", "name")
	cm := find(objs, "ConfigMap", namespace, name)
	require.NotNil(t, cm, "the ConfigMap %q", name)
	data, _, err := unstructured.NestedStringMap(cm.Object, "data")
	require.NoError(t, err)
	return data
}

// kinds counts the objects of each kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetAPIVersion()+" "+o.GetKind()]++
	}
	return out
}

// Every value a user writes as text, set to each hostile string, with the
// schema and with --skip-schema-validation, either is refused (by the
// schema, or by the template's own fail for a value that bounds the
// chart's rights), never by a YAML error, which would say the text got
// out of its place; or renders exactly the objects the value's plain
// form does (no ClusterRoleBinding, no object more or less), its text
// landing, whole, where the value belongs (a key of its own map, the
// ConfigMap's value of its variable), and every mapping without a key
// twice.
func TestHostileStringsStayInTheirValues(t *testing.T) {
	for name, f := range freeTexts() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := f.base
			if base == nil {
				base = map[string]any{}
			}
			plain, err := render(t, namespace, base)
			require.NoError(t, err)
			want := kinds(plain)
			for hname, h := range hostileStrings() {
				for _, skip := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s, skip schema %v", hname, skip), func(t *testing.T) {
						var extra []string
						if skip {
							extra = append(extra, "--skip-schema-validation")
						}
						objs, err := render(t, namespace, with(base, f.at, f.wrap(h)), extra...)
						if err != nil {
							for _, broken := range []string{"YAML parse error", "error converting YAML"} {
								assert.NotContains(t, err.Error(), broken, "the text broke the rendered YAML")
							}
							switch {
							case !skip && strings.Contains(err.Error(), "values don't meet the specifications of the schema"):
								assert.Contains(t, err.Error(), "at '/"+strings.ReplaceAll(f.at, ".", "/"), "refused at the value's place")
								assertNoRawRefusal(t, err)
							case f.refused != "":
								assert.Contains(t, err.Error(), f.refused, "the template's own refusal")
							default:
								t.Fatalf("refused other than by the schema or the template's own rule: %v", err)
							}
							return
						}
						require.Empty(t, f.refused, "the template renders a value it must refuse")
						assert.Equal(t, want, kinds(objs), "the same objects as the value's plain form: the text made none")
						if f.got == nil {
							// The text is a key: its map must hold it, with
							// its value.
							m, ok := podSpecMap(t, objs, f.at)
							require.True(t, ok, "the map %s is rendered", f.at)
							assert.Equal(t, "v", m[h], "the key is in the map whole: %v", m)
							return
						}
						assert.Equal(t, f.want(h), f.got(t, objs), "the text lands whole where %s belongs", f.at)
					})
				}
			}
		})
	}
}

// podSpecMap is the rendered map a map value's keys go into.
func podSpecMap(t *testing.T, objs []*unstructured.Unstructured, at string) (map[string]any, bool) {
	t.Helper()
	path := map[string][]string{
		"podLabels":      {"metadata", "labels"},
		"podAnnotations": {"metadata", "annotations"},
		"nodeSelector":   {"spec", "nodeSelector"},
	}[at]
	require.NotNil(t, path, "no map for %s", at)
	m, ok, err := unstructured.NestedMap(podTemplate(t, objs), path...)
	require.NoError(t, err)
	return m, ok
}

// The review's findings, as it made them: a tag that added a
// ClusterRoleBinding passes neither `helm lint --strict` nor `helm
// template`; with the schema skipped it is the image's tag and nothing
// more; and a Secret's name that added REAPER_DRY_RUN=false to the pod
// (with the schema skipped) is the Secret's name, the pod's only
// REAPER_DRY_RUN the ConfigMap's "true".
func TestReviewedInjectionsAreGone(t *testing.T) {
	tag := hostileStrings()["an object"]
	f := valuesFile(t, map[string]any{"image": map[string]any{"tag": tag}})
	stdout, stderr, err := helm(t, helmEnv(t), "lint", "--strict", chartDir(t), "--values", f)
	require.Error(t, err, "helm lint --strict passed the tag: %s", stdout)
	assert.Contains(t, stdout+stderr, "/image/tag")

	objs, err := render(t, namespace, map[string]any{"image": map[string]any{"tag": tag}}, "--skip-schema-validation")
	require.NoError(t, err)
	for _, o := range objs {
		assert.NotEqual(t, "ClusterRoleBinding", o.GetKind())
	}
	assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:"+tag, container(t, objs)["image"])

	secret := "x\n                - name: REAPER_DRY_RUN\n                  value: \"false\"\n                - name: Y\n" +
		"                  valueFrom:\n                    secretKeyRef:\n                      name: y"
	objs, err = render(t, namespace, map[string]any{"github": map[string]any{"existingSecret": secret}}, "--skip-schema-validation")
	require.NoError(t, err)
	vars, _, _ := unstructured.NestedSlice(container(t, objs), "env")
	require.Len(t, vars, 1, "one variable from the Secret, none added: %v", vars)
	name, _, _ := unstructured.NestedString(vars[0].(map[string]any), "valueFrom", "secretKeyRef", "name")
	assert.Equal(t, secret, name)
	env := podEnv(t, objs, tokenSecret())
	assert.Equal(t, "true", env["REAPER_DRY_RUN"], "still in dry-run")
}

// A user's labels never replace the chart's own: the schema refuses each
// key the chart sets on the object (its Helm labels, the pod's name and
// instance by which its logs are found, the label Grafana's sidecar looks
// for); with the schema skipped, the chart's value stays and the key is
// there once (decode reads strictly). A label of the user's own is added.
func TestUserLabelsNeverReplaceTheChartsOwn(t *testing.T) {
	rule := map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}
	dashboard := map[string]any{"monitoring": map[string]any{"dashboard": map[string]any{"enabled": true}}}
	scraped := map[string]any{"mode": "deployment", "monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}
	pod := func(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
		l, _, _ := unstructured.NestedStringMap(podTemplate(t, objs), "metadata", "labels")
		return l
	}
	byKind := func(kind, name string) func(*testing.T, []*unstructured.Unstructured) map[string]string {
		return func(_ *testing.T, objs []*unstructured.Unstructured) map[string]string {
			o := find(objs, kind, namespace, name)
			if o == nil {
				return nil
			}
			return o.GetLabels()
		}
	}
	chartLabels := map[string]string{
		"helm.sh/chart": "runner-reaper-0.0.0-dev", "app.kubernetes.io/name": "runner-reaper", "app.kubernetes.io/instance": release,
		"app.kubernetes.io/version": testTag, "app.kubernetes.io/managed-by": "Helm",
	}
	withGrafana := maps.Clone(chartLabels)
	withGrafana["grafana_dashboard"] = "1"
	for _, c := range []struct {
		name   string
		base   map[string]any
		at     string
		labels func(*testing.T, []*unstructured.Unstructured) map[string]string
		own    map[string]string
	}{
		{"podLabels", map[string]any{}, "podLabels", pod,
			map[string]string{"app.kubernetes.io/name": "runner-reaper", "app.kubernetes.io/instance": release}},
		{"prometheusRule labels", rule, "monitoring.prometheusRule.labels", byKind("PrometheusRule", release), chartLabels},
		{"dashboard labels", dashboard, "monitoring.dashboard.labels", byKind("ConfigMap", release+"-dashboard"), withGrafana},
		{"podLabels, mode deployment", map[string]any{"mode": "deployment"}, "podLabels", pod,
			map[string]string{"app.kubernetes.io/name": "runner-reaper", "app.kubernetes.io/instance": release}},
		{"serviceMonitor labels", scraped, "monitoring.serviceMonitor.labels", byKind("ServiceMonitor", release), chartLabels},
	} {
		for key, value := range c.own {
			t.Run(c.name+" "+key, func(t *testing.T) {
				t.Parallel()
				values := with(c.base, c.at, map[string]any{key: "users", "team": "platform"})
				_, err := render(t, namespace, values)
				require.Error(t, err, "the schema accepted %s in %s", key, c.at)
				assertRefusedAt(t, err, "/"+strings.ReplaceAll(c.at, ".", "/"), c.at)

				objs, err := render(t, namespace, values, "--skip-schema-validation")
				require.NoError(t, err)
				labels := c.labels(t, objs)
				assert.Equal(t, value, labels[key], "the chart's value stays")
				assert.Equal(t, "platform", labels["team"], "the user's own label is added")
			})
		}
	}
}
