package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// controlPlane is started by the first test that needs it.
var controlPlane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &controlPlane) }

// prometheusRules is the resource the Prometheus Operator's CRD serves.
func prometheusRules() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
}

// renderedRule is the component's PrometheusRule as kustomize renders it,
// in the form the dynamic client sends.
func renderedRule(t *testing.T) map[string]any {
	t.Helper()
	l := files(t)
	out := testenv.Kustomize(t, testenv.Kustomization{Base: filepath.Join(l.root, "k8s-cronjob"), Components: []string{l.component}})
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			t.Fatal("no PrometheusRule rendered")
		}
		require.NoError(t, err)
		if o["kind"] != "PrometheusRule" {
			continue
		}
		// Through JSON, so that every value is one unstructured takes.
		b, err := json.Marshal(o)
		require.NoError(t, err)
		var u map[string]any
		require.NoError(t, json.Unmarshal(b, &u))
		return u
	}
}

// firstRule is the first rule of the first group of a PrometheusRule,
// itself, not a copy, so that a change to it is sent.
func firstRule(t *testing.T, o map[string]any) map[string]any {
	t.Helper()
	spec, ok := o["spec"].(map[string]any)
	require.True(t, ok, "spec")
	groups, ok := spec["groups"].([]any)
	require.True(t, ok && len(groups) > 0, "spec.groups")
	rules, ok := groups[0].(map[string]any)["rules"].([]any)
	require.True(t, ok && len(rules) > 0, "spec.groups[0].rules")
	rule, ok := rules[0].(map[string]any)
	require.True(t, ok, "spec.groups[0].rules[0]")
	return rule
}

// The component's PrometheusRule is accepted by the Prometheus Operator's
// own CRD (vendored in testdata/crds) on the real API server, and stored
// as it was sent: no field the schema does not know is silently pruned.
// The two broken cases show the check can fail both ways: a `for` the
// schema's pattern refuses, and a misspelt field the server drops.
func TestPrometheusRuleFitsTheOperatorsCRD(t *testing.T) {
	e := controlPlane.Env(t)
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(files(t).testdata, "crds")}, ErrorIfPathMissing: true,
	})
	require.NoError(t, err, "install the PrometheusRule CRD")
	ns := e.Namespace(t, "monitoring")

	for i, tc := range []struct {
		name    string
		breakIt func(rule map[string]any)
		refused bool
		pruned  bool
	}{
		{name: "as shipped"},
		{name: "a for that is not a duration", breakIt: func(r map[string]any) { r["for"] = "2 minutes" }, refused: true},
		{name: "a misspelt field", breakIt: func(r map[string]any) { r["annotation"] = map[string]any{"summary": "x"} }, pruned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := renderedRule(t)
			if tc.breakIt != nil {
				tc.breakIt(firstRule(t, obj))
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetNamespace(ns)
			u.SetName(fmt.Sprintf("runner-reaper-%d", i))
			sent, _, err := unstructured.NestedMap(obj, "spec")
			require.NoError(t, err)

			ctx := context.Background()
			_, err = e.Dynamic.Resource(prometheusRules()).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Ignore"})
			if tc.refused {
				require.Error(t, err)
				assert.True(t, apierrors.IsInvalid(err), "refused as invalid: %v", err)
				return
			}
			require.NoError(t, err)
			got, err := e.Dynamic.Resource(prometheusRules()).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
			require.NoError(t, err)
			stored, _, err := unstructured.NestedMap(got.Object, "spec")
			require.NoError(t, err)
			if tc.pruned {
				assert.NotEqual(t, sent, stored, "the misspelt field was pruned")
				return
			}
			assert.Equal(t, sent, stored, "stored as sent")
		})
	}
}
