package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	// The shipped base's namespace, scope and names.
	ns          = "arc-runners"
	org         = "example-org"
	scope       = "org:" + org
	ledgerName  = "runner-reaper-ledger"
	reaperSA    = "system:serviceaccount:" + ns + ":runner-reaper"
	token       = "ghp_real_cluster_test_token"
	arcZombie   = testenv.ScaleSet + "-x7k2p-runner-z0mb1"
	reaperLabel = "app.kubernetes.io/name=runner-reaper"
)

// sweepRun is one Job's pod as the kubelet ran it, captured when it ended
// (the CronJob keeps one successful Job, so earlier ones are deleted).
type sweepRun struct {
	pod   *corev1.Pod
	logs  []map[string]any
	spec  ociSpec
	start time.Time
	end   time.Time
}

// ociSpec is the part of the runtime spec runc was given that the test
// checks.
type ociSpec struct {
	Spec struct {
		Process struct {
			User struct {
				UID uint32 `json:"uid"`
				GID uint32 `json:"gid"`
			} `json:"user"`
			Args []string `json:"args"`
			Env  []string `json:"env"`
		} `json:"process"`
		Root struct {
			Readonly bool `json:"readonly"`
		} `json:"root"`
	} `json:"Spec"`
	Image string `json:"Image"`
}

// watcher follows the reaper's Jobs while the CronJob runs: it captures
// each finished pod, and records the most Jobs ever active at once.
type watcher struct {
	mu        sync.Mutex
	runs      map[string]*sweepRun
	maxActive int
	errs      []error
}

func (w *watcher) poll(ctx context.Context) {
	jobs, err := cluster.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		active := 0
		for _, j := range jobs.Items {
			if j.Status.Active > 0 {
				active++
			}
		}
		cj, err := cluster.Client.BatchV1().CronJobs(ns).Get(ctx, "runner-reaper", metav1.GetOptions{})
		if err == nil && len(cj.Status.Active) > active {
			active = len(cj.Status.Active)
		}
		w.mu.Lock()
		if active > w.maxActive {
			w.maxActive = active
		}
		w.mu.Unlock()
	}
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: reaperLabel})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			continue
		}
		w.mu.Lock()
		_, seen := w.runs[p.Name]
		w.mu.Unlock()
		if seen || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		run, err := capture(p)
		w.mu.Lock()
		if err != nil {
			w.errs = append(w.errs, err)
		} else {
			w.runs[p.Name] = run
		}
		w.mu.Unlock()
	}
}

func capture(p *corev1.Pod) (*sweepRun, error) {
	st := p.Status.ContainerStatuses[0]
	log, err := cluster.ContainerLog(p, "reaper")
	if err != nil {
		return nil, err
	}
	run := &sweepRun{pod: p.DeepCopy(), start: st.State.Terminated.StartedAt.Time, end: st.State.Terminated.FinishedAt.Time}
	for _, l := range strings.Split(log, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return nil, fmt.Errorf("pod %s: a log line that is not JSON: %q", p.Name, l)
		}
		run.logs = append(run.logs, m)
	}
	raw, err := cluster.ContainerSpec(st.ContainerID)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &run.spec); err != nil {
		return nil, fmt.Errorf("container %s spec: %w", st.ContainerID, err)
	}
	return run, nil
}

// ordered is the captured runs, oldest first.
func (w *watcher) ordered() []*sweepRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*sweepRun, 0, len(w.runs))
	for _, r := range w.runs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

func (r *sweepRun) msg(m string) []map[string]any {
	var out []map[string]any
	for _, l := range r.logs {
		if l["msg"] == m {
			out = append(out, l)
		}
	}
	return out
}

// actions are the run's action lines by pod (or by object, for a line with
// no pod).
func (r *sweepRun) actions() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, l := range r.msg("action") {
		key, _ := l["pod"].(string)
		if key == "" {
			key, _ = l["object"].(string)
		}
		out[key] = l
	}
	return out
}

func (r *sweepRun) summary(t *testing.T) map[string]any {
	t.Helper()
	s := r.msg("sweep")
	require.Len(t, s, 1, "one summary line: %v", r.logs)
	return s[0]
}

// runnerPod creates a stand-in runner pod the kubelet really runs: the
// pause binary, waiting, or exiting at once with args "exit N".
func runnerPod(t *testing.T, name string, args []string, labels map[string]string, owner *metav1.OwnerReference) {
	t.Helper()
	l := map[string]string{"actions-ephemeral-runner": "True", "actions.github.com/organization": org}
	for k, v := range labels {
		l[k] = v
	}
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: corev1.PodSpec{
			HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "runner", Image: testenv.PauseImage,
				ImagePullPolicy: corev1.PullNever, Args: args}},
		},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	_, err := cluster.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

func waitPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	require.Eventually(t, func() bool {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == phase
	}, 90*time.Second, 250*time.Millisecond, "pod %s never %s", name, phase)
}

func podGone(name string) bool {
	_, err := cluster.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// applyOverlay renders the shipped base with the ARC component and the
// test's component, plus what is known only now, and applies it.
func applyOverlay(t *testing.T, ghURL string) { applyOverlayIn(t, ns, ghURL, nil) }

// applyOverlayIn is applyOverlay into namespace namespace (the base's
// namespace, REAPER_NAMESPACES and its RoleBinding's subject moved there),
// with config's keys added to the ConfigMap: the test's own settings.
func applyOverlayIn(t *testing.T, namespace, ghURL string, config map[string]string) {
	t.Helper()
	base, err := filepath.Abs("..")
	require.NoError(t, err)
	testComponent, err := filepath.Abs("testdata/real-kubelet")
	require.NoError(t, err)
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		return r
	}
	var extra strings.Builder
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&extra, "\n      - op: add\n        path: /data/%s\n        value: %q", k, config[k])
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - %s
components:
  - %s
  - %s
patches:
  - target: {kind: ConfigMap, name: runner-reaper-config}
    patch: |-
      - op: replace
        path: /data/REAPER_DRY_RUN
        value: "false"
      - op: replace
        path: /data/REAPER_SCOPES
        value: %q
      # The reaper finds its ledger by default from inside its pod.
      - op: remove
        path: /data/REAPER_LEDGER
      - op: add
        path: /data/REAPER_GITHUB_API_URL
        value: %q
      - op: add
        path: /data/REAPER_CONFIRM_AFTER
        value: "20s"
      - op: replace
        path: /data/REAPER_NAMESPACES
        value: %q%s
  - target: {kind: RoleBinding, name: runner-reaper}
    patch: |-
      - op: replace
        path: /subjects/0/namespace
        value: %q
  - target: {kind: RoleBinding, name: runner-reaper-runner-log}
    patch: |-
      - op: replace
        path: /subjects/0/namespace
        value: %q
  - target: {kind: CronJob, name: runner-reaper}
    patch: |-
      - op: add
        path: /spec/jobTemplate/spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: %q}
`, namespace, rel(base), rel(filepath.Join(base, "components", "arc")), rel(testComponent), scope, ghURL,
		namespace, extra.String(), namespace, namespace, cluster.APIServerPort)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600))

	kubectl := filepath.Join(testenv.AssetsDir(cluster.Root), "kubectl")
	rendered, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	require.NoError(t, err, "%s", rendered)
	kubeconfig, err := cluster.Kubeconfig(t.TempDir())
	require.NoError(t, err)
	apply := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(string(rendered))
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

type auditEvent struct {
	Verb string `json:"verb"`
	// RequestObject is a pod delete's DeleteOptions: dryRun All marks a
	// server-side dry run, which changes nothing (the reaper's checks).
	RequestObject struct {
		DryRun []string `json:"dryRun"`
	} `json:"requestObject"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

func audit(t *testing.T) []auditEvent {
	t.Helper()
	f, err := os.Open(cluster.AuditLog)
	require.NoError(t, err)
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestShippedCronJobOnARealKubelet applies the shipped base (with the ARC
// component) through the test overlay, onto a fleet of leaks the kubelet
// really runs, and lets the real CronJob controller fire it twice.
func TestShippedCronJobOnARealKubelet(t *testing.T) { //nolint:gocyclo // one story on one cluster, told in the order it happens
	t.Parallel() // beside TestShippedCronJobCleansUpAfterARC, in a namespace of its own
	ctx := context.Background()
	sim, url := githubFor(t, ns)

	// The fleet: a runner that failed (the kubelet records it), a zombie
	// whose registration is offline, a healthy busy runner, and an ARC
	// zombie owned by its EphemeralRunner.
	runnerPod(t, "example-dead", []string{"exit", "1"}, nil, nil)
	runnerPod(t, "example-zombie", nil, nil, nil)
	zombieReg := sim.AddRunner(scope, ghsim.Runner{Name: "example-zombie", Status: "offline"})
	// Three healthy runners, so that the shipped bound (a quarter of the
	// managed pods, rounded up) lets one sweep confirm both zombies.
	healthy := []string{"example-healthy-0", "example-healthy-1", "example-healthy-2"}
	for _, n := range healthy {
		runnerPod(t, n, nil, nil, nil)
		sim.AddRunner(scope, ghsim.Runner{Name: n, Status: "online", Busy: true})
	}
	arcReg := sim.AddRunner(scope, ghsim.Runner{Name: arcZombie, Status: "offline"})
	er := cluster.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: arcZombie, ConfigURL: strings.TrimSuffix(url, "/") + "/" + org,
		Status: &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: arcReg.ID}})
	runnerPod(t, arcZombie, nil, map[string]string{
		"actions.github.com/scale-set-name": testenv.ScaleSet, "actions.github.com/scale-set-namespace": ns,
		"app.kubernetes.io/component": "runner", "app.kubernetes.io/part-of": "gha-runner-scale-set",
	}, testenv.ControllerRef(er))
	waitPhase(t, "example-dead", corev1.PodFailed)
	for _, n := range append([]string{"example-zombie", arcZombie}, healthy...) {
		waitPhase(t, n, corev1.PodRunning)
	}

	applyOverlay(t, url)
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "runner-reaper-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, cm.Data, "REAPER_LEDGER", "the ledger is the in-pod default")

	// Watch until the second sweep is done: the zombies are gone, and two
	// Jobs have been captured. Cron fires wait for the minute boundary.
	w := &watcher{runs: map[string]*sweepRun{}}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		w.poll(ctx)
		if len(w.ordered()) >= 2 && podGone("example-zombie") && podGone(arcZombie) {
			break
		}
		if time.Now().After(deadline) {
			var last []map[string]any
			if runs := w.ordered(); len(runs) > 0 {
				last = runs[len(runs)-1].logs
			}
			t.Fatalf("the CronJob did not finish two sweeps in time: %d captured, errors %v, the last one's log %v (cluster logs in %s)",
				len(w.ordered()), w.errs, last, cluster.Dir)
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.Empty(t, w.errs)
	runs := w.ordered()
	first, second := runs[0], runs[1]

	t.Run("a Job ran the image as uid 65532 with a read-only root filesystem", func(t *testing.T) {
		for _, r := range runs[:2] {
			owner := metav1.GetControllerOf(r.pod)
			require.NotNil(t, owner, "the pod belongs to a Job")
			assert.Equal(t, "Job", owner.Kind)
			job, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, owner.Name, metav1.GetOptions{})
			if err == nil { // the CronJob deletes all but the latest
				assert.Equal(t, "runner-reaper", metav1.GetControllerOf(job).Name)
			}
			st := r.pod.Status.ContainerStatuses[0]
			assert.EqualValues(t, 0, st.State.Terminated.ExitCode, "the sweep exited 0: %v", r.logs)
			assert.Equal(t, testenv.ImageRef, r.spec.Image, "the image make image built")
			assert.EqualValues(t, 65532, r.spec.Spec.Process.User.UID)
			assert.EqualValues(t, 65532, r.spec.Spec.Process.User.GID)
			assert.True(t, r.spec.Spec.Root.Readonly, "runc mounted the root filesystem read-only")
			assert.Equal(t, []string{"/runner-reaper", "sweep"}, r.spec.Spec.Process.Args)
			assert.Equal(t, testenv.BinaryVersion, r.summary(t)["version"])
			assert.Equal(t, testenv.BinaryRevision, r.summary(t)["revision"])
		}
	})

	t.Run("in-cluster auth from its projected token and the manifest's Role alone", func(t *testing.T) {
		for _, r := range runs[:2] {
			var projected bool
			for _, v := range r.pod.Spec.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, s := range v.Projected.Sources {
					projected = projected || s.ServiceAccountToken != nil
				}
			}
			assert.True(t, projected, "the ServiceAccount admission gave the pod a projected token")
			for _, e := range r.spec.Spec.Process.Env {
				assert.False(t, strings.HasPrefix(e, "KUBECONFIG="), "no kubeconfig: in-cluster config only")
			}
		}
		byPod := map[string][]auditEvent{}
		for _, e := range audit(t) {
			if e.User.Username != reaperSA {
				continue
			}
			pods := e.User.Extra["authentication.kubernetes.io/pod-name"]
			require.Len(t, pods, 1, "every request carries a bound token's pod: %+v", e)
			byPod[pods[0]] = append(byPod[pods[0]], e)
			assert.Less(t, e.ResponseStatus.Code, 400, "nothing the sweep asked was refused: %+v", e)
		}
		for _, r := range runs[:2] {
			assert.NotEmpty(t, byPod[r.pod.Name], "the pod %s's own token authenticated its requests", r.pod.Name)
		}
		// Nothing grants the ServiceAccount anything but the manifest's
		// RoleBindings: the base's, and components/runner-log's.
		var grants []string
		rbs, err := cluster.Client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, b := range rbs.Items {
			for _, s := range b.Subjects {
				// This namespace's ServiceAccount: the ARC test deploys the
				// base into namespaces of its own, alongside.
				if s.Kind == "ServiceAccount" && s.Name == "runner-reaper" && s.Namespace == ns || s.Kind == "Group" && strings.HasPrefix(s.Name, "system:serviceaccounts") {
					grants = append(grants, b.Namespace+"/"+b.Name+" -> "+b.RoleRef.Kind+"/"+b.RoleRef.Name)
				}
			}
		}
		crbs, err := cluster.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, b := range crbs.Items {
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == "runner-reaper" && s.Namespace == ns || s.Kind == "Group" && strings.HasPrefix(s.Name, "system:serviceaccounts") {
					grants = append(grants, "cluster "+b.Name+" -> "+b.RoleRef.Kind+"/"+b.RoleRef.Name)
				}
			}
		}
		// Kubernetes' own default lets every ServiceAccount read the
		// issuer's OIDC discovery documents (non-resource URLs only).
		assert.ElementsMatch(t, []string{
			ns + "/runner-reaper -> Role/runner-reaper",
			ns + "/runner-reaper-runner-log -> Role/runner-reaper-runner-log",
			"cluster system:service-account-issuer-discovery -> ClusterRole/system:service-account-issuer-discovery",
		}, grants)
	})

	t.Run("it found its default ledger ConfigMap", func(t *testing.T) {
		assert.Greater(t, toInt(first.summary(t)["marks"]), 0, "the first sweep marked the zombies")
		led, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, ledgerName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, led.Data["marks.json"], "the marks are in the shipped ConfigMap")
		cms, err := cluster.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, c := range cms.Items {
			names = append(names, c.Name)
		}
		assert.ElementsMatch(t, []string{"kube-root-ca.crt", "runner-reaper-config", ledgerName}, names, "no other ledger was made")
	})

	t.Run("it reaped the leaks and wrote Events", func(t *testing.T) {
		a := first.actions()
		require.Contains(t, a, "example-dead", "%v", first.logs)
		assert.Equal(t, "terminal", a["example-dead"]["verdict"])
		assert.Equal(t, "deleted", a["example-dead"]["result"])
		assert.True(t, podGone("example-dead"))
		assert.Equal(t, 0, toInt(first.summary(t)["status"]))

		evs, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		reaped := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == "RunnerReaped" {
				reaped[e.InvolvedObject.Name] = true
			}
		}
		assert.True(t, reaped["example-dead"], "an Event on the reaped pod")
		assert.True(t, reaped["example-zombie"], "an Event on the confirmed zombie")

		for _, n := range healthy {
			p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			require.NoError(t, err, "the healthy runner %s is left alone", n)
			assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		}
	})

	t.Run("the next minute's Job saw the marks and confirmed", func(t *testing.T) {
		assert.Empty(t, first.actions()["example-zombie"], "the first sweep only marks a zombie")
		a := second.actions()
		require.Contains(t, a, "example-zombie", "%v", second.logs)
		assert.Equal(t, "zombie", a["example-zombie"]["verdict"])
		assert.Equal(t, "deleted", a["example-zombie"]["result"])
		assert.GreaterOrEqual(t, second.start.Sub(first.start), 50*time.Second, "a later minute's fire")
		var left []int64
		for _, r := range sim.Runners(scope) {
			left = append(left, r.ID)
		}
		assert.NotContains(t, left, zombieReg.ID, "the zombie's registration is deleted")
		assert.NotContains(t, left, arcReg.ID, "the ARC zombie's registration is deleted")
	})

	t.Run("concurrencyPolicy Forbid held", func(t *testing.T) {
		w.mu.Lock()
		defer w.mu.Unlock()
		assert.Equal(t, 1, w.maxActive, "never two sweeps at once")
		for i := 1; i < len(runs); i++ {
			assert.False(t, runs[i].start.Before(runs[i-1].end), "sweep %d started before sweep %d ended", i, i-1)
		}
		cj, err := cluster.Client.BatchV1().CronJobs(ns).Get(ctx, "runner-reaper", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	})

	t.Run("the garbage collector removed the ARC zombie's pod", func(t *testing.T) {
		a := second.actions()
		require.Contains(t, a, arcZombie, "%v", second.logs)
		assert.Equal(t, "EphemeralRunner "+ns+"/"+arcZombie, a[arcZombie]["object"])
		assert.Equal(t, "delete-registration-then-ephemeralrunner", a[arcZombie]["action"])
		assert.Equal(t, "deleted", a[arcZombie]["result"])
		_, err := cluster.Dynamic.Resource(testenv.EphemeralRunners).Namespace(ns).Get(ctx, arcZombie, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the EphemeralRunner is gone: %v", err)
		assert.True(t, podGone(arcZombie))
		// The garbage collector's delete starts the pod's graceful end;
		// the kubelet's own final delete follows once its containers
		// stopped. The reaper never deleted it: it only checked, with
		// server-side dry runs, that the pod was still the one judged.
		var deleters, checks []string
		for _, e := range audit(t) {
			if e.Verb != "delete" || e.ObjectRef.Resource != "pods" || e.ObjectRef.Name != arcZombie || e.ResponseStatus.Code >= 300 {
				continue
			}
			if slices.Contains(e.RequestObject.DryRun, metav1.DryRunAll) {
				checks = append(checks, e.User.Username)
				continue
			}
			assert.NotEqual(t, reaperSA, e.User.Username, "the reaper deleted the EphemeralRunner, not its pod")
			deleters = append(deleters, e.UserAgent)
		}
		require.NotEmpty(t, deleters, "the pod was deleted")
		assert.Contains(t, deleters[0], "generic-garbage-collector", "by ownerReference cascade: %v", deleters)
		assert.Contains(t, checks, reaperSA, "the reaper checked the pod it judged before deleting its owner")
	})
}

func toInt(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// githubFor creates namespace ns holding the Secret the shipped CronJob
// reads, and a GitHub simulator of its own with the test's scope, for one
// test of an install.
func githubFor(t *testing.T, ns string) (*ghsim.Sim, string) {
	t.Helper()
	ctx := context.Background()
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sim := ghsim.New(ghsim.Options{Token: token})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope(scope)
	_, err = cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "runner-reaper-github"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return sim, url
}
