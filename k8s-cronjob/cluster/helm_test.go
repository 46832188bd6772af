package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// helmNS is the Helm release's namespace, apart from the kustomize tests'.
const helmNS = "helm-runners"

// helmRun runs the helm `make helm` builds against the cluster, with its
// own directories in the test's, and returns its output.
func helmRun(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(cluster.Root, ".cache", "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm is not built: run `make helm` (builds %s from tools/helm): %v", bin, err)
	}
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig,
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// clusterPostRenderer writes a Helm post-renderer that gives the chart's
// CronJob what only this cluster needs, through kustomize, as the
// kustomize tests' testdata/real-kubelet component does: the host's
// network (there is no CNI) and the API server's loopback address (there
// is no kube-proxy). The image is the chart's own values' business.
func clusterPostRenderer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [rendered.yaml]
patches:
  - target: {kind: CronJob}
    patch: |-
      - op: add
        path: /spec/jobTemplate/spec/template/spec/hostNetwork
        value: true
      - op: add
        path: /spec/jobTemplate/spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
      - op: add
        path: /spec/jobTemplate/spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: %q}
`, cluster.APIServerPort)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600))
	kubectl := filepath.Join(testenv.AssetsDir(cluster.Root), "kubectl")
	script := filepath.Join(dir, "post-render")
	require.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nset -e\ncat > %q\nexec %q kustomize %q\n",
		filepath.Join(dir, "rendered.yaml"), kubectl, dir)), 0o700))
	return script
}

// TestHelmInstallOnARealKubelet installs the chart with `helm install`
// (its scopes, and its image, tag and pull policy set by values to the
// image the test loaded, as a chart from a checkout needs), reading the
// token from a Secret in ARC's layout (github.secretLayout: arc, key
// github_token, as an ARC runner scale set's), and lets the real CronJob
// controller fire it: the kubelet resolves ARC's key, and its Job's pod
// sweeps with the chart's ServiceAccount and Role alone, reaps a dead
// runner, and ends with its summary line. A release whose values the
// schema or the template refuses installs nothing.
func TestHelmInstallOnARealKubelet(t *testing.T) {
	t.Parallel() // beside the kustomize tests, in a namespace of its own
	ctx := context.Background()
	_, url := githubFor(t, helmNS)

	// A runner that failed: the kubelet's word alone makes it terminal.
	grace := int64(1)
	_, err := cluster.Client.CoreV1().Pods(helmNS).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "helm-dead", Labels: map[string]string{
			"actions-ephemeral-runner": "True", "actions.github.com/organization": org}},
		Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "runner", Image: testenv.PauseImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"exit", "1"}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := cluster.Client.CoreV1().Pods(helmNS).Get(ctx, "helm-dead", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodFailed
	}, 90*time.Second, 250*time.Millisecond, "the dead runner never failed")

	kubeconfig, err := cluster.Kubeconfig(t.TempDir())
	require.NoError(t, err)
	chart := filepath.Join(cluster.Root, "charts", "runner-reaper")

	// Refused releases install nothing: one without scopes, one the schema
	// refuses, one that would bind a system group to the Role, and one that
	// would sweep kube-system with the schema skipped, which the template
	// refuses.
	named := []string{"--set", "scopes={" + scope + "}", "--set", "image.tag=" + testenv.BinaryVersion}
	for _, c := range []struct {
		release string
		args    []string
		want    string
	}{
		{"refused-scopes", []string{"--set", "image.tag=" + testenv.BinaryVersion},
			"at '/scopes': value must be 'at least one scope to sweep for scopes (REAPER_SCOPES)"},
		{"refused", append([]string{"--set", "limits.maxActions=0"}, named...),
			"at '/limits/maxActions': value must be 'a whole number from 1 to 9007199254740991 for limits.maxActions"},
		{"refused-group", append([]string{"--set", "lambdaAccess.enabled=true", "--set", "lambdaAccess.group=system:authenticated"}, named...),
			"at '/lambdaAccess/group': value must be 'a Kubernetes group for lambdaAccess.group"},
		{"refused-kube-system", append([]string{"--set", "namespaces={kube-system}", "--set", "deleteServiceAccounts=true", "--skip-schema-validation"}, named...),
			"namespaces: kube-system is one of the cluster's own"},
	} {
		out, err := helmRun(t, kubeconfig, append([]string{"install", c.release, chart, "--namespace", helmNS}, c.args...)...)
		require.Error(t, err, "helm install accepted %v: %s", c.args, out)
		assert.Contains(t, out, c.want)
		_, err = cluster.Client.BatchV1().CronJobs(helmNS).Get(ctx, c.release+"-runner-reaper", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the refused release %s installed nothing: %v", c.release, err)
		_, err = cluster.Client.RbacV1().RoleBindings("kube-system").Get(ctx, c.release+"-runner-reaper", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no RoleBinding of %s in kube-system: %v", c.release, err)
	}

	// ARC's Secret, as its gha-runner-scale-set chart writes it from
	// githubConfigSecret.github_token.
	const arcSecret = "arc-runner-set-gha-rs-github-secret"
	_, err = cluster.Client.CoreV1().Secrets(helmNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: arcSecret},
		Data:       map[string][]byte{"github_token": []byte(token)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	out, err := helmRun(t, kubeconfig, "install", "runner-reaper", chart, "--namespace", helmNS,
		"--set", "scopes={"+scope+"}", "--set", "image.tag="+testenv.BinaryVersion, "--set", "image.pullPolicy=Never",
		"--set", "dryRun=false", "--set", "github.apiURL="+url,
		"--set", "github.secretLayout=arc", "--set", "github.existingSecret="+arcSecret,
		"--post-renderer", clusterPostRenderer(t))
	require.NoError(t, err, out)
	assert.Contains(t, out, "runner-reaper sweeps "+helmNS, "the release's notes")
	assert.Contains(t, out, "It reads ARC's Secret "+arcSecret, "the notes name the Secret read")

	// The first fire waits for the minute's boundary.
	var run *sweepRun
	deadline := time.Now().Add(3 * time.Minute)
	for run == nil {
		pods, err := cluster.Client.CoreV1().Pods(helmNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=runner-reaper"})
		require.NoError(t, err)
		for i := range pods.Items {
			p := &pods.Items[i]
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				continue
			}
			run, err = capture(p)
			require.NoError(t, err)
			break
		}
		if run == nil && time.Now().After(deadline) {
			t.Fatalf("the release's CronJob ran no sweep in time (cluster logs in %s)", cluster.Dir)
		}
		time.Sleep(500 * time.Millisecond)
	}

	owner := metav1.GetControllerOf(run.pod)
	require.NotNil(t, owner, "the pod belongs to a Job")
	job, err := cluster.Client.BatchV1().Jobs(helmNS).Get(ctx, owner.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "runner-reaper", metav1.GetControllerOf(job).Name, "a Job of the release's CronJob")
	assert.EqualValues(t, 0, run.pod.Status.ContainerStatuses[0].State.Terminated.ExitCode, "the sweep exited 0: %v", run.logs)
	assert.Equal(t, testenv.ImageRef, run.spec.Image, "the image the values named")
	assert.EqualValues(t, 65532, run.spec.Spec.Process.User.UID)
	assert.True(t, run.spec.Spec.Root.Readonly, "a read-only root filesystem")
	summary := run.summary(t)
	assert.Equal(t, testenv.BinaryVersion, summary["version"])
	assert.Equal(t, 0, toInt(summary["status"]))
	a := run.actions()
	require.Contains(t, a, "helm-dead", "%v", run.logs)
	assert.Equal(t, "terminal", a["helm-dead"]["verdict"])
	assert.Equal(t, "deleted", a["helm-dead"]["result"])
	_, err = cluster.Client.CoreV1().Pods(helmNS).Get(ctx, "helm-dead", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the dead runner is gone: %v", err)

	// The chart's Role was enough, and nothing else was asked for.
	sa := "system:serviceaccount:" + helmNS + ":runner-reaper"
	var asked int
	for _, e := range audit(t) {
		if e.User.Username != sa {
			continue
		}
		asked++
		assert.Less(t, e.ResponseStatus.Code, 400, "nothing the sweep asked was refused: %+v", e)
	}
	assert.NotZero(t, asked, "the sweep authenticated as the release's ServiceAccount")
	led, err := cluster.Client.CoreV1().ConfigMaps(helmNS).Get(ctx, "runner-reaper-ledger", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Helm", led.Labels["app.kubernetes.io/managed-by"], "the sweep saved into the release's ledger")
	assert.NotEmpty(t, led.Data, "the sweep saved into the release's ledger")
}
