package cluster_test

// The shipped CronJob (with components/arc, and nothing more) beside ARC
// v0.27.6's manager running its legacy (actions.summerwind.dev) controllers
// on the real cluster: a RunnerDeployment per case makes a RunnerReplicaSet
// and a Runner, ARC's runner controller makes the runner pod, the kubelet
// runs its `runner` container (the stand-in runner of test/testenv/pause,
// `pause runner /cues`, cued through a hostPath file per pod), and the real
// garbage collector deletes a deleted Runner's pod. Nothing stands in for
// the kubelet or the garbage collector (test/e2e's PlayLegacyCluster is not
// used).
//
// What the test plays, because the stand-in is not GitHub's runner:
//
//   - the registration: the runner image's config.sh registers the runner
//     with GitHub under the Runner's name (ARC only hands it a registration
//     token: runner_controller.go:458 GetRegistrationToken, the env
//     RUNNER_TOKEN of mutatePod at :732). The test registers it on the
//     simulator (offline) as soon as the Runner exists, and marks it online
//     once the pod's runner has logged "Listening for Jobs";
//   - the host's network for the runner pod: a legacy Runner's spec has no
//     hostNetwork (apis/actions.summerwind.net/v1alpha1/runner_types.go),
//     and the cluster has no CNI, so a mutating webhook of the test's own
//     (not ARC's, whose webhooks are not installed) sets it on the runner
//     pods of the test's namespaces, as a cluster's policy engine would.
//
// The leaks, each made the way it happens, each left to the CronJob firing
// on its schedule:
//
//   - zombie: the registration goes offline while the pod runs, and the
//     runner hangs (it ignores SIGTERM);
//   - outage: GitHub drops the registration while the pod runs (ARC has
//     recorded its id on the pod);
//   - terminal: the runner crashes (exit 1) while ARC's manager is down.
//     With ARC up there is no terminal leak to make: the RunnerReplicaSet
//     controller counts a stopped runner pod as completed
//     (runner_pod_owner.go:174, runnerPodOrContainerIsStopped,
//     runner_controller.go:207) and deletes its Runner itself. ARC is
//     started again once the CronJob has acted.
//
// A busy runner beside them is left alone. After the act, ARC and the
// cluster must finish: the Runner, its pod and the registration gone, and
// the RunnerDeployment's replacement Runner's pod Running.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// legacyConfig is the reaper's configuration for a legacy fleet beside
// the overlay's: legacy pods carry none of the scale-set labels (ARC
// labels them actions-runner), and there are no EphemeralRunners; one
// sweep may act on every leak of the namespace.
var legacyConfig = map[string]string{
	"REAPER_POD_SELECTOR": "actions-runner",
	"REAPER_ARC_LEAKS":    "false",
	"REAPER_MAX_FRACTION": "1",
}

// legacyWorld is one namespace with ARC's legacy manager watching it, a
// simulator and, once applied, the shipped CronJob. It reuses arcWorld's
// sweep capture and cues.
type legacyWorld struct {
	*arcWorld
	legacy *testenv.ARC
	// registered are the registrations the test made, by Runner name.
	registered map[string]int64
}

func newLegacyWorld(t *testing.T, namespace string) *legacyWorld {
	t.Helper()
	ctx := context.Background()
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	w := &legacyWorld{
		arcWorld:   &arcWorld{t: t, ns: namespace, seen: map[int64]bool{}, offline: map[string]bool{}, sweeps: map[string][]map[string]any{}},
		registered: map[string]int64{},
	}
	w.mode = arcMode{
		label:     "ARC-LEGACY",
		runner:    testenv.LegacyRunners,
		what:      "Runner, pod and registration",
		gone:      w.legacyGone,
		state:     func(t *testing.T, name string) string { return cluster.LegacyRunnerOf(t, w.ns, name).String() },
		runnersOf: func(_ *testing.T, set string) []string { return w.runnersOf(set) },
	}
	w.sim = ghsim.New(ghsim.Options{Token: token})
	w.url, err = w.sim.Start()
	require.NoError(t, err)
	t.Cleanup(w.sim.Close)
	w.sim.AddScope(scope)
	_, err = cluster.Client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "runner-reaper-github"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.cues, err = os.MkdirTemp(cluster.Dir, "cues-"+namespace+"-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(w.cues, 0o755))
	hostNetworkWebhook(t, namespace)
	w.startLegacy()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			w.register(ctx)
			if i%10 == 0 {
				w.listening(ctx)
				w.pollSweeps(ctx)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *legacyWorld) startLegacy() {
	w.legacy = cluster.StartARCLegacy(w.t, testenv.ARCLegacyOptions{GitHubURL: w.url, Token: token, WatchNamespace: w.ns, LogLevel: "info"})
}

// register plays config.sh: every Runner is registered, offline, under its
// name as soon as it exists (before ARC's runner pod controller first
// lists GitHub's runners, whose answer ARC caches for a minute).
func (w *legacyWorld) register(ctx context.Context) {
	l, err := cluster.Dynamic.Resource(testenv.LegacyRunners).Namespace(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, r := range l.Items {
		w.mu.Lock()
		_, done := w.registered[r.GetName()]
		w.mu.Unlock()
		if done || r.GetDeletionTimestamp() != nil {
			continue
		}
		reg := w.sim.AddRunner(scope, ghsim.Runner{Name: r.GetName(), Ephemeral: true, Status: "offline"})
		w.mu.Lock()
		w.registered[r.GetName()] = reg.ID
		w.mu.Unlock()
	}
}

// listening plays GitHub's side of the runner's connection: a
// registration whose pod's runner has logged "Listening for Jobs" is
// online, once.
func (w *legacyWorld) listening(ctx context.Context) {
	w.mu.Lock()
	regs := make(map[string]int64, len(w.registered))
	for n, id := range w.registered {
		if !w.seen[id] && !w.offline[n] {
			regs[n] = id
		}
	}
	w.mu.Unlock()
	for name, id := range regs {
		pod, err := cluster.Client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		if log, err := cluster.ContainerLog(pod, "runner"); err != nil || !strings.Contains(log, "Listening for Jobs") {
			continue
		}
		if w.sim.SetRunner(scope, id, func(r *ghsim.Runner) { r.Status = "online" }) {
			w.mu.Lock()
			w.seen[id] = true
			w.mu.Unlock()
		}
	}
}

// runnerDeployment creates a RunnerDeployment of one runner of the
// organization whose pods run the stand-in runner, and returns its Runner
// once ARC has made its pod, the pod runs, ARC has recorded the
// registration's id on it and GitHub sees it online.
func (w *legacyWorld) runnerDeployment(name string) (string, int64) {
	t := w.t
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.LegacyRunnerAPIVersion,
		"kind":       "RunnerDeployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": int64(1),
			"template": map[string]any{
				"spec": map[string]any{
					"organization":  org,
					"dockerEnabled": false,
					"image":         testenv.PauseImage,
					// ARC keeps a container named runner as given and adds
					// its env, the /runner volume and the registration
					// token (runner_controller.go:543-561, :886-935).
					"containers": []any{map[string]any{
						"name": "runner", "image": testenv.PauseImage, "imagePullPolicy": "Never",
						"args": []any{"runner", "/cues"},
						"env": []any{map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{
							"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}},
						"volumeMounts": []any{map[string]any{"name": "cues", "mountPath": "/cues", "readOnly": true}},
					}},
					"volumes":                       []any{map[string]any{"name": "cues", "hostPath": map[string]any{"path": w.cues, "type": "Directory"}}},
					"terminationGracePeriodSeconds": int64(2),
				},
			},
		},
	}}
	_, err := cluster.Dynamic.Resource(testenv.LegacyRunnerDeployments).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err, "create runnerdeployment %s", name)
	var runner string
	require.Eventually(t, func() bool {
		if rs := w.runnersOf(name); len(rs) == 1 {
			runner = rs[0]
		}
		return runner != ""
	}, time.Minute, 100*time.Millisecond, "ARC made no Runner for %s", name)
	return runner, w.online(runner)
}

// runnersOf are the names of the RunnerDeployment's Runners not being
// deleted.
func (w *legacyWorld) runnersOf(deployment string) []string {
	l, err := cluster.Dynamic.Resource(testenv.LegacyRunners).Namespace(w.ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: "runner-deployment-name=" + deployment})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range l.Items {
		if r.GetDeletionTimestamp() == nil {
			out = append(out, r.GetName())
		}
	}
	return out
}

// online waits until the Runner's pod runs, ARC's runner pod controller
// has recorded the registration's id on it, and GitHub sees it online.
func (w *legacyWorld) online(name string) int64 {
	w.t.Helper()
	st, _ := cluster.WaitLegacyRunner(w.t, w.ns, name, 2*time.Minute, "pod Running with the registration's id",
		func(s testenv.LegacyRunnerState) bool {
			return testenv.LegacyProvisioned(s) && s.Pod.Status.Phase == corev1.PodRunning && s.RunnerID != 0
		})
	require.Eventually(w.t, func() bool {
		r, ok := w.sim.RunnerByName(scope, name)
		return ok && r.Status == "online"
	}, 90*time.Second, 100*time.Millisecond, "%s: runner never online (listening)", name)
	return st.RunnerID
}

// legacyGone: the Runner, its pod and its registration are all gone.
func (w *legacyWorld) legacyGone(name string) bool {
	ctx := context.Background()
	_, err := cluster.Dynamic.Resource(testenv.LegacyRunners).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return false
	}
	if _, err := cluster.Client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false
	}
	_, registered := w.sim.RunnerByName(scope, name)
	return !registered
}

// TestShippedCronJobCleansUpAfterARCLegacy: the shipped CronJob, firing on
// its schedule, cleans up each kind of legacy leak while ARC's legacy
// controllers run, and ARC and the cluster finish and replace the runner;
// a busy runner is left alone.
func TestShippedCronJobCleansUpAfterARCLegacy(t *testing.T) {
	t.Parallel()

	t.Run("ARC running", func(t *testing.T) {
		t.Parallel()
		w := newLegacyWorld(t, "arc-legacy")
		zombie := &arcCase{label: "zombie", set: "zombie", verdict: "zombie", action: "delete-registration-then-runner"}
		// The id ARC recorded on the pod (actions-runner/id) is what
		// makes a dropped registration a zombie rather than a runner
		// that never registered.
		outage := &arcCase{label: "outage", set: "outage", verdict: "zombie", action: "delete-runner"}
		cases := []*arcCase{zombie, outage}
		var wg sync.WaitGroup
		for _, c := range cases {
			wg.Add(1)
			go func() { defer wg.Done(); c.name, c.id = w.runnerDeployment(c.set) }()
		}
		busy, busyID := w.runnerDeployment("busy")
		wg.Wait()

		w.cue(zombie.name, "hang")
		w.mu.Lock()
		w.offline[zombie.name] = true
		w.mu.Unlock()
		require.True(t, w.sim.SetRunner(scope, zombie.id, func(r *ghsim.Runner) { r.Status = "offline" }))
		require.True(t, w.sim.RemoveRunner(scope, outage.id), "GitHub drops the registration")
		require.True(t, w.sim.SetRunner(scope, busyID, func(r *ghsim.Runner) { r.Busy = true }))
		for _, c := range cases {
			c.gone = w.watchGone(c.name)
		}

		applyOverlayIn(t, w.ns, w.url, legacyConfig)
		w.await(t, cases, nil)

		t.Run("busy runner left alone while its job runs", func(t *testing.T) {
			for _, a := range w.actions() {
				assert.NotEqual(t, busy, a["pod"], "an action on the busy runner: %v", a)
			}
			st := cluster.LegacyRunnerOf(t, w.ns, busy)
			require.NotNil(t, st.Runner, "the busy Runner is there")
			assert.False(t, st.Deleting)
			require.NotNil(t, st.Pod)
			assert.Equal(t, corev1.PodRunning, st.Pod.Status.Phase)
			r, ok := w.sim.RunnerByName(scope, busy)
			assert.True(t, ok && r.Busy, "its registration is there, busy")
			w.mu.Lock()
			n := len(w.sweeps)
			w.mu.Unlock()
			t.Logf("ARC-LEGACY case=busy untouched runner=%s sweeps=%d", busy, n)
		})
	})

	t.Run("ARC down when the runner died", func(t *testing.T) {
		t.Parallel()
		w := newLegacyWorld(t, "arc-legacy-down")
		terminal := &arcCase{label: "terminal", set: "terminal", verdict: "terminal", action: "delete-registration-then-runner"}
		terminal.name, terminal.id = w.runnerDeployment(terminal.set)
		w.legacy.Stop()
		w.cue(terminal.name, "exit 1")
		require.Eventually(t, func() bool {
			p, err := cluster.Client.CoreV1().Pods(w.ns).Get(context.Background(), terminal.name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodFailed
		}, time.Minute, 100*time.Millisecond, "the runner's pod never Failed")
		terminal.gone = w.watchGone(terminal.name)
		applyOverlayIn(t, w.ns, w.url, legacyConfig)
		w.await(t, []*arcCase{terminal}, w.startLegacy)
	})
}

// hostNetworkWebhook serves, for the test's life, a mutating admission
// webhook that puts legacy ARC's runner pods (label actions-runner) of
// namespace on the host's network.
func hostNetworkWebhook(t *testing.T, namespace string) {
	t.Helper()
	cert, caPEM := selfSigned(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(rw, "bad review", http.StatusBadRequest)
				return
			}
			pt := admissionv1.PatchTypeJSONPatch
			review.Response = &admissionv1.AdmissionResponse{
				UID: review.Request.UID, Allowed: true, PatchType: &pt,
				Patch: []byte(`[{"op":"add","path":"/spec/hostNetwork","value":true}]`),
			}
			review.Request = nil
			_ = json.NewEncoder(rw).Encode(review)
		}),
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + l.Addr().String() + "/mutate"
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-hostnetwork-" + namespace},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "hostnetwork.runner-reaper.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "actions-runner", Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	_, err = cluster.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cluster.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// selfSigned is a key pair for 127.0.0.1 and its certificate in PEM.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	certPEM, keyPEM, err := testenv.SelfSignedCert()
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return pair, certPEM
}
