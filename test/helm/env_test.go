package helm

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/test/configtest"
)

// secretData is what the test's Secret holds, by key: what the rendered
// pod would read through secretKeyRef.
type secretData map[string]string

// tokenSecret holds a token under the chart's default key.
func tokenSecret() secretData { return secretData{"token": "ghp_chart_test_token"} }

// appSecret holds a fresh App private key under the chart's default key.
func appSecret(t testing.TB) secretData {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return secretData{"private-key": string(pemKey)}
}

// podEnv is the environment the rendered workload's (the CronJob's, or
// with mode: deployment the Deployment's) reaper container would start
// with: its ConfigMap's keys (envFrom), then its env, each secretKeyRef
// read from secret and each fieldRef from the pod (podName). It fails the
// test on a reference it cannot follow, so nothing the pod would see is
// left out.
func podEnv(t testing.TB, objs []*unstructured.Unstructured, secret secretData) map[string]string {
	t.Helper()
	w := theWorkload(t, objs)
	c := container(t, objs)
	env := map[string]string{}
	from, _, _ := unstructured.NestedSlice(c, "envFrom")
	for _, f := range from {
		name, ok, _ := unstructured.NestedString(f.(map[string]any), "configMapRef", "name")
		require.True(t, ok, "envFrom holds only ConfigMaps: %v", f)
		cm := find(objs, "ConfigMap", w.GetNamespace(), name)
		require.NotNil(t, cm, "the ConfigMap %s the pod reads is rendered", name)
		data, _, err := unstructured.NestedStringMap(cm.Object, "data")
		require.NoError(t, err)
		for k, v := range data {
			env[k] = v
		}
	}
	pod := map[string]string{"metadata.namespace": w.GetNamespace(), "metadata.name": podName(w)}
	vars, _, _ := unstructured.NestedSlice(c, "env")
	for _, raw := range vars {
		v := raw.(map[string]any)
		name := v["name"].(string)
		if value, ok := v["value"].(string); ok {
			env[name] = value
			continue
		}
		if field, ok, _ := unstructured.NestedString(v, "valueFrom", "fieldRef", "fieldPath"); ok {
			val, ok := pod[field]
			require.True(t, ok, "env %s reads the pod's %s, which the test does not know", name, field)
			env[name] = val
			continue
		}
		key, ok, _ := unstructured.NestedString(v, "valueFrom", "secretKeyRef", "key")
		require.True(t, ok, "env %s is a value, a fieldRef or a secretKeyRef: %v", name, v)
		val, ok := secret[key]
		require.True(t, ok, "env %s reads the Secret's key %q, which the test's Secret does not hold", name, key)
		env[name] = val
	}
	return env
}

// podName is the name a pod of the workload w gets, as its controllers
// name it.
func podName(w *unstructured.Unstructured) string {
	if w.GetKind() == "Deployment" {
		return w.GetName() + "-7c9d8b6f5d-x2k4q"
	}
	return w.GetName() + "-29000000-x2k4q"
}

// theCronJob is the rendered CronJob, of which there is one.
func theCronJob(t testing.TB, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return theOne(t, objs, "CronJob")
}

// theDeployment is the rendered Deployment, of which there is one.
func theDeployment(t testing.TB, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return theOne(t, objs, "Deployment")
}

// theOne is the rendered object of kind, of which there is one.
func theOne(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			require.Nil(t, found, "one %s", kind)
			found = o
		}
	}
	require.NotNil(t, found, "the chart renders a %s", kind)
	return found
}

// theWorkload is the rendered CronJob or Deployment: exactly one of the
// two, whichever the mode.
func theWorkload(t testing.TB, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CronJob" || o.GetKind() == "Deployment" {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "one CronJob or Deployment: %v", ids(found))
	return found[0]
}

// podTemplatePath is where the workload w holds its pod template.
func podTemplatePath(w *unstructured.Unstructured) []string {
	if w.GetKind() == "Deployment" {
		return []string{"spec", "template"}
	}
	return []string{"spec", "jobTemplate", "spec", "template"}
}

// podTemplate is the rendered workload's pod template.
func podTemplate(t testing.TB, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	w := theWorkload(t, objs)
	tmpl, ok, err := unstructured.NestedMap(w.Object, podTemplatePath(w)...)
	require.NoError(t, err)
	require.True(t, ok, "%s %s has a pod template", w.GetKind(), w.GetName())
	return tmpl
}

// container is the rendered workload's one container.
func container(t testing.TB, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(podTemplate(t, objs), "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1, "one container")
	return containers[0].(map[string]any)
}

// load runs the binary's own start-up check, config.Load as in a pod in
// namespace ns, over exactly the variables of env it reads: the REAPER_
// ones, and the OpenTelemetry SDK's OTEL_ ones, which it checks too.
func load(t *testing.T, ns string, env map[string]string) (config.Config, error) {
	t.Helper()
	reaper := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, config.Prefix+"_") {
			reaper[k] = v
		}
	}
	configtest.Setenv(t, reaper)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "") // restored when the test ends
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range env {
		if strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, v)
		}
	}
	return config.Load(true, ns)
}
