package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// serviceMonitors is the resource the Prometheus Operator's CRD serves.
func serviceMonitors() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
}

// findKind is the one object of kind in a multi-document YAML stream, in
// the form the dynamic client sends.
func findKind(t *testing.T, stream []byte, kind string) map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	var found map[string]any
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if o["kind"] != kind {
			continue
		}
		require.Nil(t, found, "two of %s", kind)
		// Through JSON, so that every value is one unstructured takes.
		b, err := json.Marshal(o)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &found))
	}
	require.NotNil(t, found, "no %s rendered", kind)
	return found
}

// chartServiceMonitor is the Helm chart's ServiceMonitor, mode: deployment,
// as the helm `make helm` builds renders it.
func chartServiceMonitor(t *testing.T) map[string]any {
	t.Helper()
	l := files(t)
	helm := filepath.Join(l.root, ".cache", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		if testing.Short() {
			t.Skipf("helm is not built (%s); `make helm` builds it, `make test` runs this", helm)
		}
		t.Fatalf("helm is not built: run `make helm`: %v", err)
	}
	home := t.TempDir()
	cmd := exec.Command(helm, "template", "runner-reaper", filepath.Join(l.root, "charts", "runner-reaper"), "--namespace", "arc-runners",
		"--set", "scopes={org:acme},image.tag=v1.2.3,mode=deployment,monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.serviceMonitor.labels.release=kube-prometheus-stack")
	cmd.Env = []string{"HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home,
		"KUBECONFIG=" + filepath.Join(home, "kubeconfig")}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Run(), "helm template: %s", stderr.String())
	return findKind(t, out.Bytes(), "ServiceMonitor")
}

// componentServiceMonitor is components/servicemonitor's, rendered with
// components/deployment.
func componentServiceMonitor(t *testing.T) map[string]any {
	t.Helper()
	l := files(t)
	base := filepath.Join(l.root, "k8s-cronjob")
	out := testenv.Kustomize(t, testenv.Kustomization{Base: base, Components: []string{
		filepath.Join(base, "components", "deployment"), filepath.Join(base, "components", "servicemonitor"),
	}})
	return findKind(t, out, "ServiceMonitor")
}

// The Helm chart's ServiceMonitor and components/servicemonitor's are
// accepted by the Prometheus Operator's own CRD (vendored in
// testdata/crds) on the real API server, and stored as they were sent:
// no field the schema does not know is silently pruned, the relabelling
// that names the instance included. The broken cases show the check can
// fail both ways: an interval the schema's pattern refuses, and a
// misspelt field the server drops.
func TestServiceMonitorsFitTheOperatorsCRD(t *testing.T) {
	e := controlPlane.Env(t)
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(files(t).testdata, "crds")}, ErrorIfPathMissing: true,
	})
	require.NoError(t, err, "install the operator's CRDs")
	ns := e.Namespace(t, "monitoring")

	endpoint := func(o map[string]any) map[string]any {
		eps, ok := o["spec"].(map[string]any)["endpoints"].([]any)
		require.True(t, ok && len(eps) == 1, "one endpoint")
		return eps[0].(map[string]any)
	}
	i := 0
	for source, render := range map[string]func(*testing.T) map[string]any{
		"the chart": chartServiceMonitor, "components/servicemonitor": componentServiceMonitor,
	} {
		for _, tc := range []struct {
			name    string
			breakIt func(endpoint map[string]any)
			refused bool
			pruned  bool
		}{
			{name: "as shipped"},
			{name: "an interval that is not a duration", breakIt: func(ep map[string]any) { ep["interval"] = "30 seconds" }, refused: true},
			{name: "a misspelt field", breakIt: func(ep map[string]any) { ep["relabelling"] = ep["relabelings"] }, pruned: true},
		} {
			i++
			t.Run(source+", "+tc.name, func(t *testing.T) {
				obj := render(t)
				if tc.breakIt != nil {
					tc.breakIt(endpoint(obj))
				}
				u := &unstructured.Unstructured{Object: obj}
				u.SetNamespace(ns)
				u.SetName(fmt.Sprintf("runner-reaper-%d", i))
				sent, _, err := unstructured.NestedMap(obj, "spec")
				require.NoError(t, err)

				ctx := context.Background()
				_, err = e.Dynamic.Resource(serviceMonitors()).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Ignore"})
				if tc.refused {
					require.Error(t, err)
					assert.True(t, apierrors.IsInvalid(err), "refused as invalid: %v", err)
					return
				}
				require.NoError(t, err)
				got, err := e.Dynamic.Resource(serviceMonitors()).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				stored, _, err := unstructured.NestedMap(got.Object, "spec")
				require.NoError(t, err)
				if tc.pruned {
					assert.NotEqual(t, sent, stored, "the misspelt field was pruned")
					return
				}
				assert.Equal(t, sent, stored, "stored as sent")
				assert.NotEmpty(t, endpoint(got.Object)["relabelings"], "the relabelling that names the instance is kept")
			})
		}
	}
}
