package helm

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// option is one of the kustomize base's components and the chart's values
// that stand for it.
type option struct {
	name       string
	values     map[string]any
	components []string
	// secret is what the pod's Secret holds (nil: tokenSecret).
	secret func(testing.TB) secretData
}

// arcAppSecret is an App's Secret as ARC's chart writes it.
func arcAppSecret(t testing.TB) secretData {
	return secretData{"github_app_id": "123456", "github_app_installation_id": "7890123", "github_app_private_key": appSecret(t)["private-key"]}
}

func options() []option {
	arc := map[string]any{"arc": map[string]any{"enabled": true}}
	return []option{
		{name: "the base", values: map[string]any{}},
		{name: "arc", values: arc, components: []string{"components/arc"}},
		{name: "arc and arc-finalizers", values: map[string]any{"arc": map[string]any{"enabled": true, "removeFinalizers": true}},
			components: []string{"components/arc", "components/arc-finalizers"}},
		{name: "delete-serviceaccounts", values: map[string]any{"deleteServiceAccounts": true},
			components: []string{"components/delete-serviceaccounts"}},
		{name: "runner-log-off", values: map[string]any{"runnerLog": map[string]any{"enabled": false}},
			components: []string{"components/runner-log-off"}},
		{name: "lambda-access", values: map[string]any{"lambdaAccess": map[string]any{"enabled": true}},
			components: []string{"components/lambda-access"}},
		{name: "every option", values: map[string]any{"arc": map[string]any{"enabled": true, "removeFinalizers": true},
			"deleteServiceAccounts": true, "lambdaAccess": map[string]any{"enabled": true}},
			components: []string{"components/arc", "components/arc-finalizers", "components/delete-serviceaccounts", "components/lambda-access"}},
		{name: "arc-secret", values: map[string]any{"github": map[string]any{"secretLayout": "arc"}},
			components: []string{"components/arc-secret"},
			secret:     func(testing.TB) secretData { return secretData{"github_token": "ghp_arc_layout_token"} }},
		{name: "arc-secret-app", values: map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}},
			components: []string{"components/arc-secret-app"}, secret: arcAppSecret},
	}
}

// kustomize renders the base in k8s-cronjob with components.
func kustomize(t *testing.T, components []string) []*unstructured.Unstructured {
	t.Helper()
	base := filepath.Join(root(t), "k8s-cronjob")
	return decode(t, string(testenv.Kustomize(t, testenv.Kustomization{Base: base, Components: components})))
}

// ids are the objects' kinds, namespaces and names.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

// rules are a Role's rules, each in one canonical form (its lists
// sorted), as a set.
func rules(t *testing.T, role *unstructured.Unstructured) []string {
	t.Helper()
	require.NotNil(t, role)
	raw, _, err := unstructured.NestedSlice(role.Object, "rules")
	require.NoError(t, err)
	var out []string
	for _, r := range raw {
		m := r.(map[string]any)
		canon := map[string][]string{}
		for k, v := range m {
			var l []string
			for _, s := range v.([]any) {
				l = append(l, s.(string))
			}
			sort.Strings(l)
			canon[k] = l
		}
		b, err := json.Marshal(canon)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// binding is a RoleBinding's roleRef and subjects.
func binding(t *testing.T, rb *unstructured.Unstructured) map[string]any {
	t.Helper()
	require.NotNil(t, rb)
	return map[string]any{"roleRef": rb.Object["roleRef"], "subjects": rb.Object["subjects"]}
}

// The chart, for each option, renders the objects the kustomize base
// renders with the option's component (a release named runner-reaper in
// the base's namespace gives the base's names; another release prefixes
// them), grants exactly the same rights (the Role's rules as sets), binds
// them to the same subjects, and configures the binary the same.
func TestChartGrantsWhatTheKustomizeBaseGrants(t *testing.T) {
	for _, o := range options() {
		t.Run(o.name, func(t *testing.T) {
			// The base pins latest (its kustomization's images); the chart
			// runs it only when told so.
			chart := mustRender(t, namespace, with(o.values, "image.tag", "latest"))
			kust := kustomize(t, o.components)
			require.Equal(t, ids(kust), ids(chart), "the same objects")

			for _, k := range kust {
				c := find(chart, k.GetKind(), k.GetNamespace(), k.GetName())
				switch k.GetKind() {
				case "Role", "ClusterRole":
					assert.Equal(t, rules(t, k), rules(t, c), "%s %s grants what the base grants, and no more", k.GetKind(), k.GetName())
				case "RoleBinding", "ClusterRoleBinding":
					assert.Equal(t, binding(t, k), binding(t, c), "%s %s binds the same", k.GetKind(), k.GetName())
				case "CronJob":
					assert.Equal(t, cronJobSpec(t, k), cronJobSpec(t, c), "the same CronJob, but for the values the chart spells out")
				}
			}

			// The binary's configuration is the same, but for the metrics
			// instance the chart names after the release and its namespace.
			secret := tokenSecret()
			if o.secret != nil {
				secret = o.secret(t)
			}
			fromKust, err := load(t, namespace, podEnv(t, kust, secret))
			require.NoError(t, err)
			fromChart, err := load(t, namespace, podEnv(t, chart, secret))
			require.NoError(t, err)
			assert.Equal(t, namespace+"."+release, fromChart.Push.Instance)
			fromKust.Push.Instance, fromChart.Push.Instance = "", ""
			assert.Equal(t, fromKust, fromChart, "the same configuration")
		})
	}
}

// cronJobSpec is a CronJob's spec without what the chart spells out and
// the base leaves to Kubernetes: suspend (false), and the pod's instance
// label. Nothing else is taken away: the image's pull policy, say, is
// compared, as a policy the base leaves to Kubernetes and the chart sets
// pulls differently.
func cronJobSpec(t *testing.T, cj *unstructured.Unstructured) map[string]any {
	t.Helper()
	require.NotNil(t, cj)
	spec := deepCopy(cj.Object["spec"].(map[string]any))
	if s, ok := spec["suspend"]; ok && s == false {
		delete(spec, "suspend")
	}
	unstructured.RemoveNestedField(spec, "jobTemplate", "spec", "template", "metadata", "labels", "app.kubernetes.io/instance")
	return spec
}

// With runner pods in several namespaces, each gets a Role with the
// base's runner rights and no ledger rights, and the ledger's rights stay
// in the release's namespace alone: with the release beside the runners,
// its Role is the base's; with the release apart from them, its Role holds
// only the ledger's.
func TestChartGrantsRunnerRightsInEachNamespace(t *testing.T) {
	arc := kustomize(t, []string{"components/arc"})
	full := rules(t, find(arc, "Role", namespace, release))
	var runner, ledger []string
	for _, r := range full {
		if strings.Contains(r, `"configmaps"`) {
			ledger = append(ledger, r)
		} else {
			runner = append(runner, r)
		}
	}
	require.NotEmpty(t, runner)
	require.NotEmpty(t, ledger)
	subject := func(ns string) []any {
		return []any{map[string]any{"kind": "ServiceAccount", "name": release, "namespace": ns}}
	}
	logRole := release + "-runner-log"
	logRules := rules(t, find(arc, "Role", namespace, logRole))
	require.NotEmpty(t, logRules, "the base's components/runner-log Role")

	for _, c := range []struct {
		name       string
		release    string
		namespaces []string
		want       map[string][]string
	}{
		{name: "beside the runners", release: namespace, namespaces: []string{namespace, "arc-runners-gpu"},
			want: map[string][]string{namespace: full, "arc-runners-gpu": runner}},
		{name: "apart from them", release: "ops", namespaces: []string{namespace, "arc-runners-gpu"},
			want: map[string][]string{"ops": ledger, namespace: runner, "arc-runners-gpu": runner}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := mustRender(t, c.release, map[string]any{"arc": map[string]any{"enabled": true}, "namespaces": c.namespaces})
			var roles, logRoles []string
			for _, o := range objs {
				switch {
				case o.GetKind() == "Role" && o.GetName() == release:
					roles = append(roles, o.GetNamespace())
				case o.GetKind() == "Role" && o.GetName() == logRole:
					logRoles = append(logRoles, o.GetNamespace())
				case o.GetKind() == "Role":
					t.Errorf("a Role the base has not: %s/%s", o.GetNamespace(), o.GetName())
				}
			}
			assert.ElementsMatch(t, c.namespaces, logRoles, "the runner-log Role in each namespace swept, and only there")
			for _, ns := range c.namespaces {
				assert.Equal(t, logRules, rules(t, find(objs, "Role", ns, logRole)), "the runner-log Role in %s", ns)
				rb := find(objs, "RoleBinding", ns, logRole)
				require.NotNil(t, rb, "the runner-log RoleBinding in %s", ns)
				assert.Equal(t, subject(c.release), rb.Object["subjects"], "bound to the release's ServiceAccount")
			}
			var want []string
			for ns := range c.want {
				want = append(want, ns)
			}
			assert.ElementsMatch(t, want, roles, "a Role in each namespace swept and in the release's")
			for ns, rs := range c.want {
				assert.Equal(t, rs, rules(t, find(objs, "Role", ns, release)), "the Role in %s", ns)
				rb := find(objs, "RoleBinding", ns, release)
				require.NotNil(t, rb, "a RoleBinding in %s", ns)
				assert.Equal(t, subject(c.release), rb.Object["subjects"], "bound to the release's ServiceAccount")
			}
			env := podEnv(t, objs, tokenSecret())
			assert.Equal(t, strings.Join(c.namespaces, ","), env["REAPER_NAMESPACES"])
			assert.Equal(t, "configmap:"+c.release+"/"+release+"-ledger", env["REAPER_LEDGER"])
		})
	}
}
