package cluster_test

// The runner's own word, against a real kubelet: pods/log goes through the
// API server to the kubelet, which reads the container's log from the
// runtime, so only a cluster with a kubelet can show it. A bare runner pod
// (no ARC, no job annotation: nothing records a job for it) runs the
// stand-in runner; GitHub (the simulator) lists its registration offline,
// so by GitHub's word it is a zombie. While its log says it runs a job,
// the reaper's binary, run with the shipped Role's rights, leaves it
// alone; once the log says the job completed, it is reaped as any zombie.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

func TestRunnerLogKeepsABareRunnersJob(t *testing.T) {
	ctx := context.Background()
	bin, err := testenv.BuildBinary(t.TempDir())
	require.NoError(t, err)
	namespace := "runner-log"
	sim, url := githubFor(t, namespace)
	const name = "bare-runner-1"
	reg := sim.AddRunner(scope, ghsim.Runner{Name: name, Status: "offline"})

	// The reaper's identity, with the rights the shipped Role grants.
	user := "reaper-" + namespace
	cluster.Grant(t, namespace, "runner-reaper", user, testenv.LeastPrivilege()...)
	kubeconfig, err := cluster.UserKubeconfig(t.TempDir(), user)
	require.NoError(t, err)

	cues, err := os.MkdirTemp(cluster.Dir, "cues-"+namespace+"-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(cues, 0o755))
	cue := func(c string) {
		require.NoError(t, os.WriteFile(filepath.Join(cues, name), []byte(c+"\n"), 0o644))
	}
	grace := int64(1)
	_, err = cluster.Client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool.example.com/runner": "true"}},
		Spec: corev1.PodSpec{
			HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "runner", Image: testenv.PauseImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"runner", "/cues"},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "cues", MountPath: "/cues", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "cues", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: cues, Type: ptr(corev1.HostPathDirectory)}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	logSays := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			p, err := cluster.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false
			}
			log, err := cluster.ContainerLog(p, "runner")
			return err == nil && strings.Contains(log, what)
		}, 90*time.Second, 100*time.Millisecond, "the runner never logged %q", what)
	}
	logSays(": Listening for Jobs")
	cue("job build")
	logSays(": Running job: build")

	env := map[string]string{
		"KUBECONFIG":            kubeconfig,
		"REAPER_SCOPES":         scope,
		"REAPER_NAMESPACES":     namespace,
		"REAPER_POD_SELECTOR":   "pool.example.com/runner=true",
		"REAPER_LEDGER":         "configmap:" + namespace + "/" + ledgerName,
		"REAPER_DRY_RUN":        "false",
		"REAPER_GITHUB_API_URL": url,
		"REAPER_GITHUB_TOKEN":   token,
		"REAPER_CONFIRM_AFTER":  "1s",
		"REAPER_MAX_FRACTION":   "1",
	}
	sweep := func() testenv.Run {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		run, err := testenv.RunBinary(sctx, bin, env, "sweep")
		require.NoError(t, err)
		require.Equal(t, 0, run.Code, "exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
		return run
	}
	registered := func() bool {
		for _, r := range sim.Runners(scope) {
			if r.ID == reg.ID {
				return true
			}
		}
		return false
	}
	// confirmed is two sweeps: the first marks the zombie, the second,
	// once confirm-after has passed, acts on it.
	confirmed := func() testenv.Run {
		t.Helper()
		first := sweep()
		assert.Empty(t, first.Lines(`"msg":"action"`), "a first sighting only marks: %s", first.Stdout)
		time.Sleep(1500 * time.Millisecond)
		return sweep()
	}

	busy := confirmed()
	require.Len(t, busy.Lines(`"msg":"action"`, `"verdict":"zombie"`, `"pod":"`+name+`"`), 1, busy.Stdout)
	assert.Len(t, busy.Lines(`"msg":"action"`, `"result":"protected-job"`, `"runner_log":"running"`, `"job_name":"build"`), 1, busy.Stdout)
	assert.True(t, cluster.PodExists(t, namespace, name), "a runner whose log says it runs a job is never deleted")
	assert.True(t, registered(), "nor its registration")

	cue("done build Succeeded")
	logSays(": Job build completed with result: Succeeded")
	done := confirmed()
	assert.Len(t, done.Lines(`"msg":"action"`, `"pod":"`+name+`"`, `"result":"deleted"`, `"runner_log":"completed"`, `"action":"delete-registration-then-pod"`), 1, done.Stdout)
	assert.False(t, registered(), "the registration goes first")
	require.Eventually(t, func() bool { return !cluster.PodExists(t, namespace, name) }, 30*time.Second, 100*time.Millisecond,
		"once the job is over the zombie's pod goes")
}

func ptr[T any](v T) *T { return &v }
