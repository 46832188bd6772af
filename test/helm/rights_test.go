package helm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// No values widen the chart's rights past the runners' namespaces and the
// reaper's (and the Lambda's) own identity. The review bound every
// authenticated identity to pod and ServiceAccount deletes in kube-system
// with lambdaAccess.group=system:authenticated, deleteServiceAccounts and
// namespaces={arc-runners,kube-system}. The schema refuses a system: group
// and the cluster's own namespaces (kube-system, kube-public,
// kube-node-lease) at the value's place; the template refuses them again,
// so that --skip-schema-validation renders nothing either; and a release
// installed into one of those namespaces, whose Role holds the ledger's
// rights there (and the runners' when it sweeps its own), is refused by
// the template, which alone sees the namespace.
func TestValuesNeverGrantRightsInTheClustersOwnNamespacesOrToSystemGroups(t *testing.T) {
	lambda := func(group string) map[string]any {
		return map[string]any{"lambdaAccess": map[string]any{"enabled": true, "group": group}}
	}
	for _, c := range []struct {
		name     string
		ns       string
		values   map[string]any
		schemaAt string // "": the schema cannot see it
		template string
	}{
		{name: "the review's", ns: namespace, values: map[string]any{
			"lambdaAccess": map[string]any{"enabled": true, "group": "system:authenticated"}, "deleteServiceAccounts": true,
			"namespaces": []any{namespace, "kube-system"}}, schemaAt: "/namespaces/1", template: "namespaces: kube-system is one of the cluster's own"},
		{name: "kube-system swept", ns: namespace, values: map[string]any{"namespaces": []any{namespace, "kube-system"}},
			schemaAt: "/namespaces/1", template: "namespaces: kube-system is one of the cluster's own"},
		{name: "kube-public swept", ns: namespace, values: map[string]any{"namespaces": []any{"kube-public"}},
			schemaAt: "/namespaces/0", template: "namespaces: kube-public is one of the cluster's own"},
		{name: "kube-node-lease swept", ns: namespace, values: map[string]any{"namespaces": []any{"kube-node-lease"}},
			schemaAt: "/namespaces/0", template: "namespaces: kube-node-lease is one of the cluster's own"},
		{name: "system:authenticated", ns: namespace, values: lambda("system:authenticated"),
			schemaAt: "/lambdaAccess/group", template: "is a Kubernetes system group"},
		{name: "system:masters", ns: namespace, values: lambda("system:masters"),
			schemaAt: "/lambdaAccess/group", template: "is a Kubernetes system group"},
		{name: "system:nodes", ns: namespace, values: lambda("system:nodes"),
			schemaAt: "/lambdaAccess/group", template: "is a Kubernetes system group"},
		{name: "system:serviceaccounts", ns: namespace, values: lambda("system:serviceaccounts"),
			schemaAt: "/lambdaAccess/group", template: "is a Kubernetes system group"},
		{name: "released into kube-system", ns: "kube-system", values: map[string]any{},
			template: "the release's namespace is kube-system, one of the cluster's own"},
		{name: "released into kube-system, sweeping elsewhere", ns: "kube-system", values: map[string]any{"namespaces": []any{namespace}},
			template: "the release's namespace is kube-system, one of the cluster's own"},
		{name: "released into kube-node-lease", ns: "kube-node-lease", values: map[string]any{},
			template: "the release's namespace is kube-node-lease, one of the cluster's own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, c.ns, c.values)
			require.Error(t, err, "rendered with the schema")
			if c.schemaAt != "" {
				assertRefusedAt(t, err, c.schemaAt, dotted(c.schemaAt))
			} else {
				assert.Contains(t, err.Error(), c.template)
			}
			_, err = render(t, c.ns, c.values, "--skip-schema-validation")
			require.Error(t, err, "rendered with the schema skipped")
			assert.Contains(t, err.Error(), c.template)
		})
	}
}

// The lambda group and the namespaces the chart does accept: a group of
// the user's own, and `default`, where the chart grants what it grants in
// any runners' namespace: `default` holds no component of the cluster's
// (only the kubernetes Service, which no rule names), and runners there,
// if untidy, are a real setup.
func TestValuesMayNameDefaultAndGroupsOfTheirOwn(t *testing.T) {
	objs := mustRender(t, namespace, map[string]any{"namespaces": []any{namespace, "default"},
		"lambdaAccess": map[string]any{"enabled": true, "group": "fleet-a-lambda"}})
	require.NotNil(t, find(objs, "Role", "default", release), "a Role in default")
	rb := find(objs, "RoleBinding", "default", release+"-lambda")
	require.NotNil(t, rb)
	assert.Equal(t, "fleet-a-lambda", rb.Object["subjects"].([]any)[0].(map[string]any)["name"])
	for _, o := range objs {
		assert.False(t, strings.HasPrefix(o.GetNamespace(), "kube-"), "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// A switch that decides a right is a boolean, checked in the template too:
// with --skip-schema-validation, arc.enabled: "false" once rendered every
// ARC rule (EphemeralRunner delete and patch) while REAPER_ARC_LEAKS said
// false, and deleteServiceAccounts and lambdaAccess.enabled granted theirs,
// the templates testing truthiness and the configuration writing the
// string. Now each is refused, with and without the schema, and the Role
// and the configuration cannot disagree.
func TestSwitchesThatDecideRightsAreBooleans(t *testing.T) {
	for _, c := range []struct {
		at     string
		values map[string]any
	}{
		{"arc.enabled", map[string]any{"arc": map[string]any{"enabled": "false"}}},
		{"arc.removeFinalizers", map[string]any{"arc": map[string]any{"enabled": true, "removeFinalizers": "false"}}},
		{"deleteServiceAccounts", map[string]any{"deleteServiceAccounts": "false"}},
		{"runnerLog.enabled", map[string]any{"runnerLog": map[string]any{"enabled": "false"}}},
		{"lambdaAccess.enabled", map[string]any{"lambdaAccess": map[string]any{"enabled": "false"}}},
		{"dryRun", map[string]any{"dryRun": "true"}},
		{"suspend", map[string]any{"suspend": 0}},
		{"monitoring.prometheusRule.enabled", map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": "no"}}}},
		{"monitoring.serviceMonitor.enabled", map[string]any{"mode": "deployment", "monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": "false"}}}},
		{"deployment.pdb.enabled", map[string]any{"mode": "deployment", "deployment": map[string]any{"pdb": map[string]any{"enabled": "false"}}}},
	} {
		t.Run(c.at, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, namespace, c.values)
			require.Error(t, err, "rendered with the schema")
			_, err = render(t, namespace, c.values, "--skip-schema-validation")
			require.Error(t, err, "rendered with the schema skipped")
			assert.Contains(t, err.Error(), c.at+" must be true or false, without quotes")
		})
	}
	// The booleans themselves render, and the Role follows the value.
	on := mustRender(t, namespace, map[string]any{"arc": map[string]any{"enabled": true}})
	off := mustRender(t, namespace, map[string]any{"arc": map[string]any{"enabled": false}})
	assert.Contains(t, roleText(t, on), "ephemeralrunners")
	assert.NotContains(t, roleText(t, off), "ephemeralrunners")
}

// roleText is the rules of every Role rendered, as YAML.
func roleText(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		if o.GetKind() == "Role" {
			out, err := yaml.Marshal(o.Object["rules"])
			require.NoError(t, err)
			b.Write(out)
		}
	}
	return b.String()
}
