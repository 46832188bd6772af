package cluster_test

// The shipped CronJob (with components/arc, and nothing more) beside ARC's
// real manager (v0.27.6, scale-set mode, built by `make arc-manager`), on
// the real cluster: ARC's EphemeralRunnerSets make EphemeralRunners, ARC
// registers them with the GitHub simulator's Actions service, makes their
// JIT Secrets and pods, and the kubelet runs each pod's `runner` container,
// the stand-in runner of test/testenv/pause (`pause runner /cues`), cued
// through a hostPath file per pod. GitHub sees a runner online once its
// container has logged "Listening for Jobs" (the simulator is told so: the
// stand-in does not talk to it).
//
// The leaks, each made the way it happens, and each left to the CronJob
// firing on its schedule:
//
//   - zombie: the registration goes offline while the pod runs, and the
//     runner hangs (it ignores SIGTERM, as on 2026-03-05);
//   - outage: GitHub drops the registration while the pod runs;
//   - failed EphemeralRunner: status phase Failed, its pod deleted, as ARC
//     leaves a runner whose pod failed six times (written by the test: see
//     there why ARC v0.27.6 cannot write it against these CRDs);
//   - terminal: the runner crashes while ARC's manager is down. With ARC up
//     there is no terminal leak to make: ARC deletes a pod whose runner
//     exited non-zero and makes another (and a pod that exited 0 with its
//     registration still there is deleted to restart it), so a terminal pod
//     stays only while ARC is not running. ARC is started again once the
//     CronJob has acted, as in test/e2e's envtest version of this test.
//
// The terminal case needs ARC down, so it has a namespace, a manager, a
// simulator and a CronJob of its own; the others share one. After the act,
// ARC must finish: the EphemeralRunner, its pod, its JIT Secret and the
// registration gone, and the set's replacement runner Running; and nothing
// may be left deleting, a runner ARC strands by itself included (see
// await). A busy runner beside them is left alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// arcConfig is the test's reaper configuration beside the overlay's: an
// EphemeralRunner may stay Failed 20 s, not 10 m, and stay deleting 20 s,
// not 30 m (see await: ARC itself can strand one); and one sweep may act
// on every leak of the namespace (the shipped quarter of the managed pods
// would queue these few cases one a minute; the bound is shown elsewhere).
var arcConfig = map[string]string{
	"REAPER_ARC_FAILED_AFTER":         "20s",
	"REAPER_ARC_STUCK_DELETING_AFTER": "20s",
	"REAPER_MAX_FRACTION":             "1",
}

// arcWorld is one namespace with ARC's manager watching it, a simulator
// and, once applied, the shipped CronJob.
type arcWorld struct {
	t    *testing.T
	ns   string
	sim  *ghsim.Sim
	url  string
	cfg  string
	cues string
	arc  *testenv.ARC

	mu sync.Mutex
	// seen are the registrations already told online, by id; offline,
	// the runners GitHub must not see online.
	seen    map[int64]bool
	offline map[string]bool
	// sweeps are the reaper's finished pods' log lines, by pod name.
	sweeps map[string][]map[string]any
	// mode is what differs between ARC's scale-set and legacy worlds.
	mode arcMode
}

// arcMode is what the shared waiting and checking need of one of ARC's
// modes.
type arcMode struct {
	// label starts each case's figures line.
	label string
	// runner is the resource of ARC's runner object.
	runner schema.GroupVersionResource
	// what names everything that must be gone.
	what string
	// gone reports whether the runner object, its pod, whatever else the
	// mode makes, and the registration are all gone.
	gone func(name string) bool
	// state describes the runner for a failure message.
	state func(t *testing.T, name string) string
	// runnersOf are the names of the set's runners not being deleted.
	runnersOf func(t *testing.T, set string) []string
}

func newARCWorld(t *testing.T, namespace string) *arcWorld {
	t.Helper()
	ctx := context.Background()
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	w := &arcWorld{t: t, ns: namespace, seen: map[int64]bool{}, offline: map[string]bool{}, sweeps: map[string][]map[string]any{}}
	w.mode = arcMode{
		label:  "ARC-SCALE-SET",
		runner: testenv.EphemeralRunners,
		what:   "EphemeralRunner, pod, JIT Secret and registration",
		gone:   w.allGone,
		state:  func(t *testing.T, name string) string { return fmt.Sprintf("%+v", cluster.ARCRunner(t, w.ns, name)) },
		runnersOf: func(t *testing.T, set string) []string {
			return cluster.ARCRunnersOf(t, w.ns, set)
		},
	}
	w.sim = ghsim.New(ghsim.Options{Token: token})
	w.url, err = w.sim.Start()
	require.NoError(t, err)
	t.Cleanup(w.sim.Close)
	w.sim.AddScope(scope)
	w.cfg, err = ghsim.ConfigURL(w.url, scope)
	require.NoError(t, err)
	_, err = cluster.Client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "runner-reaper-github"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cluster.ARCGitHubTokenSecret(t, namespace, token)
	// The cue files: a hostPath the stand-in runners read as uid 65532.
	w.cues, err = os.MkdirTemp(cluster.Dir, "cues-"+namespace+"-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(w.cues, 0o755))
	w.startARC("")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w.github(ctx)
			w.pollSweeps(ctx)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *arcWorld) startARC(managerNS string) {
	w.arc = cluster.StartARC(w.t, testenv.ARCOptions{Namespace: managerNS, WatchNamespace: w.ns, LogLevel: "info"})
}

// github plays GitHub's side of a runner's connection: a registration
// whose pod's runner has logged "Listening for Jobs" is online, once.
func (w *arcWorld) github(ctx context.Context) {
	l, err := cluster.Dynamic.Resource(testenv.EphemeralRunners).Namespace(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, er := range l.Items {
		id, _, _ := unstructured.NestedInt64(er.Object, "status", "runnerId")
		w.mu.Lock()
		skip := id == 0 || w.seen[id] || w.offline[er.GetName()]
		w.mu.Unlock()
		if skip {
			continue
		}
		pod, err := cluster.Client.CoreV1().Pods(w.ns).Get(ctx, er.GetName(), metav1.GetOptions{})
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

// pollSweeps captures the log of every reaper pod that has finished.
func (w *arcWorld) pollSweeps(ctx context.Context) {
	pods, err := cluster.Client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: reaperLabel})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		w.mu.Lock()
		_, seen := w.sweeps[p.Name]
		w.mu.Unlock()
		if seen || p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			continue
		}
		log, err := cluster.ContainerLog(p, "reaper")
		if err != nil {
			continue
		}
		var lines []map[string]any
		for _, l := range strings.Split(log, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, m)
			}
		}
		w.mu.Lock()
		w.sweeps[p.Name] = lines
		w.mu.Unlock()
	}
}

// actions are the action lines of every captured sweep, oldest sweep
// first.
func (w *arcWorld) actions() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.sweeps))
	for n := range w.sweeps {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return sweepTime(w.sweeps[names[i]]) < sweepTime(w.sweeps[names[j]]) })
	var out []map[string]any
	for _, n := range names {
		for _, l := range w.sweeps[n] {
			if l["msg"] == "action" {
				out = append(out, l)
			}
		}
	}
	return out
}

func sweepTime(lines []map[string]any) string {
	if len(lines) == 0 {
		return ""
	}
	s, _ := lines[0]["time"].(string)
	return s
}

// actionOn is the first action line on the EphemeralRunner (or its pod)
// named name, nil when there is none yet.
func (w *arcWorld) actionOn(name string) map[string]any {
	for _, a := range w.actions() {
		if a["pod"] == name || a["object"] == "EphemeralRunner "+w.ns+"/"+name {
			return a
		}
	}
	return nil
}

// runnerSet creates an EphemeralRunnerSet of one runner whose pods run
// the stand-in runner, and returns its first EphemeralRunner once ARC has
// registered it, its pod runs and GitHub sees it online.
func (w *arcWorld) runnerSet(set string) (string, int64) {
	t := w.t
	t.Helper()
	grace := int64(2)
	spec := map[string]any{
		"githubConfigUrl":    w.cfg,
		"githubConfigSecret": testenv.ARCGitHubSecret,
		"runnerScaleSetId":   int64(1),
		"metadata":           map[string]any{"labels": map[string]any{"actions.github.com/organization": org}},
		"spec": map[string]any{
			"restartPolicy": "Never",
			// No CNI here: the host's network, as the reaper's pods.
			"hostNetwork":                   true,
			"terminationGracePeriodSeconds": grace,
			"containers": []any{map[string]any{
				"name": "runner", "image": testenv.PauseImage, "imagePullPolicy": "Never",
				"args": []any{"runner", "/cues"},
				"env": []any{map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{
					"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}},
				"volumeMounts": []any{map[string]any{"name": "cues", "mountPath": "/cues", "readOnly": true}},
			}},
			"volumes": []any{map[string]any{"name": "cues", "hostPath": map[string]any{"path": w.cues, "type": "Directory"}}},
		},
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       "EphemeralRunnerSet",
		"metadata": map[string]any{
			"name": set,
			"labels": map[string]any{
				"actions.github.com/scale-set-name":      set,
				"actions.github.com/scale-set-namespace": w.ns,
				"actions.github.com/organization":        org,
				"app.kubernetes.io/component":            "runner-set",
				"app.kubernetes.io/part-of":              "gha-runner-scale-set",
			},
		},
		"spec": map[string]any{"replicas": int64(1), "patchID": int64(0), "ephemeralRunnerSpec": spec},
	}}
	_, err := cluster.Dynamic.Resource(testenv.EphemeralRunnerSets).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err, "create ephemeralrunnerset %s", set)
	name, _ := cluster.ProvisionARCSetRunner(t, w.ns, set, 90*time.Second, func(name string) (int64, bool) {
		r, ok := w.sim.RunnerByName(scope, name)
		return r.ID, ok
	})
	return name, w.online(name)
}

// online waits until ARC has provisioned the runner, its pod runs and
// GitHub sees it online; it returns the registration's id.
func (w *arcWorld) online(name string) int64 {
	w.t.Helper()
	st, _ := cluster.WaitARCRunner(w.t, w.ns, name, 90*time.Second, "registered, Secret and pod made", testenv.Provisioned)
	require.Eventually(w.t, func() bool {
		r, ok := w.sim.RunnerByName(scope, name)
		return ok && r.Status == "online"
	}, 90*time.Second, 100*time.Millisecond, "%s: runner never online (listening)", name)
	return st.RunnerID
}

// cue writes the stand-in runner's cue for the pods named name.
func (w *arcWorld) cue(name, cue string) {
	w.t.Helper()
	require.NoError(w.t, os.WriteFile(filepath.Join(w.cues, name), []byte(cue+"\n"), 0o644))
}

// goneWatch polls, every 100 ms, until the runner object, its pod (and in
// scale-set mode its JIT Secret) and its registration are all gone, and
// records when.
type goneWatch struct {
	name string
	done chan struct{}
	at   time.Time
}

func (w *arcWorld) watchGone(name string) *goneWatch {
	g := &goneWatch{name: name, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		deadline := time.Now().Add(6 * time.Minute)
		for time.Now().Before(deadline) {
			if w.mode.gone(name) {
				g.at = time.Now()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return g
}

func (w *arcWorld) allGone(name string) bool {
	ctx := context.Background()
	_, err := cluster.Dynamic.Resource(testenv.EphemeralRunners).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return false
	}
	if _, err := cluster.Client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false
	}
	if _, err := cluster.Client.CoreV1().Secrets(w.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false
	}
	_, registered := w.sim.RunnerByName(scope, name)
	return !registered
}

// arcCase is a leak and what the act on it must be.
type arcCase struct {
	label, set, name string
	id               int64
	verdict, action  string
	gone             *goneWatch
}

// await waits for the CronJob's act on each case and for all to be gone,
// then checks the act, the replacement, and that nothing is left deleting,
// and logs one line per case: the time from the act to all gone.
func (w *arcWorld) await(t *testing.T, cases []*arcCase, afterAct func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	acted := map[string]map[string]any{}
	for len(acted) < len(cases) {
		for _, c := range cases {
			if a := w.actionOn(c.name); a != nil && acted[c.name] == nil {
				acted[c.name] = a
				t.Logf("%s: acted: %v", c.label, a)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the CronJob did not act on every case within 5 minutes; acted %v; all actions %v (cluster logs in %s)",
				w.ns, acted, w.actions(), cluster.Dir)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if afterAct != nil {
		afterAct()
	}
	for _, c := range cases {
		a := acted[c.name]
		t.Run(c.label, func(t *testing.T) {
			assert.Equal(t, c.verdict, a["verdict"], "%v", a)
			assert.Equal(t, c.action, a["action"], "%v", a)
			assert.Equal(t, "deleted", a["result"], "%v", a)
			assert.EqualValues(t, c.id, a["runner_id"], "%v", a)
			<-c.gone.done
			require.False(t, c.gone.at.IsZero(), "%s: %s not all gone within 6 minutes: %s, registered %v",
				c.name, w.mode.what, w.mode.state(t, c.name), !w.mode.gone(c.name))
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["time"]))
			require.NoError(t, err, "the action line's time: %v", a)
			// ARC's replacement: a new runner of the set runs. Not "the
			// set's one runner": legacy ARC's RunnerReplicaSet may make
			// more than it needs while a Runner is deleted, and scales the
			// surplus down only once GitHub lists its runner (its list is
			// cached for a minute), which is ARC's affair.
			var repl string
			require.Eventually(t, func() bool {
				for _, r := range w.mode.runnersOf(t, c.set) {
					if r == c.name {
						continue
					}
					p, err := cluster.Client.CoreV1().Pods(w.ns).Get(context.Background(), r, metav1.GetOptions{})
					if err == nil && p.Status.Phase == corev1.PodRunning {
						repl = r
						return true
					}
				}
				return false
			}, 2*time.Minute, 200*time.Millisecond, "ARC's replacement for %s never ran; %s's runners now %v", c.name, c.set, w.mode.runnersOf(t, c.set))
			t.Logf("%s %s: act (%s, %s) to all gone (%s) %v; replacement %s Running; finalizer_result %v, exit %v",
				w.mode.label, c.label, c.verdict, c.action, w.mode.what, c.gone.at.Sub(at).Round(10*time.Millisecond), repl, a["finalizer_result"], a["exit_class"])
		})
	}
	// Nothing left deleting in the namespace. ARC v0.27.6 can strand a
	// runner of its own here: its EphemeralRunnerSet, reading its cache
	// before the replacement it has just made shows up there, makes a
	// second, then scales the surplus down by removing its registration
	// (204) and deleting it, and that runner's own controller asks the
	// Actions service to remove it again, meets 404 and retries for ever
	// (test/testenv's TestARCManagerEphemeralRunner shows the scale-down
	// half). The CronJob releases such a runner as arc-stuck-deleting once
	// it has been deleting REAPER_ARC_STUCK_DELETING_AFTER and the verdict
	// is confirmed over a later sweep: hence the wait of several sweeps,
	// and each runner seen so stranded must have been released by it.
	var deleting []string
	stranded := map[string]bool{}
	require.Eventually(t, func() bool {
		deleting = nil
		rs, err := cluster.Dynamic.Resource(w.mode.runner).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, r := range rs.Items {
			if r.GetDeletionTimestamp() == nil {
				continue
			}
			deleting = append(deleting, r.GetKind()+" "+r.GetName()+" "+fmt.Sprint(r.GetFinalizers()))
			if _, registered := w.sim.RunnerByName(scope, r.GetName()); !registered && slices.Contains(r.GetFinalizers(), fleet.ARCRegistrationFinalizer) {
				stranded[r.GetName()] = true
			}
		}
		pods, err := cluster.Client.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				deleting = append(deleting, "pod "+p.Name+" "+fmt.Sprint(p.Finalizers))
			}
		}
		return len(deleting) == 0
	}, 5*time.Minute, 250*time.Millisecond, "%s: something is left deleting: %v", w.ns, &deleting)
	for name := range stranded {
		// The acting sweep's log is read once its pod has finished,
		// which may be after ARC has finished the runner.
		var a map[string]any
		assert.Eventually(t, func() bool {
			a = w.actionOn(name)
			return a != nil
		}, 2*time.Minute, 250*time.Millisecond)
		require.NotNil(t, a, "%s: %s was left deleting on a registration already gone, and no sweep acted on it; all actions %v", w.ns, name, w.actions())
		assert.Equal(t, "arc-stuck-deleting", a["verdict"], "%v", a)
		assert.Equal(t, "release-registration", a["action"], "%v", a)
		assert.Equal(t, "deleted", a["result"], "%v", a)
		t.Logf("%s: %s was stranded by ARC deleting, its registration gone; the CronJob released it: %v", w.mode.label, name, a["evidence"])
	}
}

// TestShippedCronJobCleansUpAfterARC: the shipped CronJob, firing on its
// schedule, cleans up each kind of scale-set leak while ARC's manager
// runs, and ARC finishes and replaces the runner; a busy runner is left
// alone.
func TestShippedCronJobCleansUpAfterARC(t *testing.T) {
	t.Parallel()

	t.Run("ARC running", func(t *testing.T) {
		t.Parallel()
		w := newARCWorld(t, "arc-scale-set")
		zombie := &arcCase{label: "zombie", set: "zombie", verdict: "zombie", action: "delete-registration-then-ephemeralrunner"}
		outage := &arcCase{label: "outage", set: "outage", verdict: "zombie", action: "delete-ephemeralrunner"}
		failed := &arcCase{label: "failed-ephemeralrunner", set: "failed", verdict: "arc-failed", action: "delete-registration-then-ephemeralrunner"}
		cases := []*arcCase{zombie, outage, failed}
		var busy string
		var busyID int64
		var wg sync.WaitGroup
		for _, c := range cases {
			wg.Add(1)
			go func() { defer wg.Done(); c.name, c.id = w.runnerSet(c.set) }()
		}
		busy, busyID = w.runnerSet("busy")
		wg.Wait()

		// The leaks.
		w.cue(zombie.name, "hang")
		w.mu.Lock()
		w.offline[zombie.name] = true
		w.mu.Unlock()
		require.True(t, w.sim.SetRunner(scope, zombie.id, func(r *ghsim.Runner) { r.Status = "offline" }))
		require.True(t, w.sim.RemoveRunner(scope, outage.id), "GitHub drops the registration")
		// ARC v0.27.6 marks a runner Failed after its pod's sixth failure,
		// having deleted each failed pod. It cannot here: the cluster's
		// vendored CRDs (testdata/arc-crds, ARC of 2026-06-30) type
		// status.failures as a map of date-times, and v0.27.6 writes
		// booleans, so its failure count is refused and it retries the
		// same failed pod for ever. The test writes what v0.27.6 would
		// have written, then deletes the pod as ARC does; ARC, running,
		// then leaves the Failed runner to its set.
		cluster.WriteEphemeralRunnerStatus(t, w.ns, failed.name, testenv.EphemeralRunnerStatus{Phase: "Failed", RunnerID: failed.id,
			Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"})
		require.NoError(t, cluster.Client.CoreV1().Pods(w.ns).Delete(context.Background(), failed.name, metav1.DeleteOptions{}))
		cluster.WaitARCRunner(t, w.ns, failed.name, time.Minute, "Failed, pod gone", func(s testenv.ARCRunnerState) bool {
			return testenv.ARCRunnerPhase(s) == "Failed" && s.Pod == nil
		})
		// A job runs on the busy runner: online and busy.
		require.True(t, w.sim.SetRunner(scope, busyID, func(r *ghsim.Runner) { r.Busy = true }))
		for _, c := range cases {
			c.gone = w.watchGone(c.name)
		}

		applyOverlayIn(t, w.ns, w.url, arcConfig)
		w.await(t, cases, nil)

		t.Run("busy runner left alone while its job runs", func(t *testing.T) {
			for _, a := range w.actions() {
				assert.NotEqual(t, busy, a["pod"], "an action on the busy runner: %v", a)
				assert.NotEqual(t, "EphemeralRunner "+w.ns+"/"+busy, a["object"], "an action on the busy runner: %v", a)
			}
			st := cluster.ARCRunner(t, w.ns, busy)
			require.NotNil(t, st.Runner, "the busy EphemeralRunner is there")
			assert.False(t, st.Deleting)
			require.NotNil(t, st.Pod)
			assert.Equal(t, corev1.PodRunning, st.Pod.Status.Phase)
			r, ok := w.sim.RunnerByName(scope, busy)
			assert.True(t, ok && r.Busy, "its registration is there, busy")
			w.mu.Lock()
			n := len(w.sweeps)
			w.mu.Unlock()
			t.Logf("ARC-SCALE-SET busy: %s untouched across %d sweeps", busy, n)
		})
	})

	t.Run("ARC down when the runner died", func(t *testing.T) {
		t.Parallel()
		w := newARCWorld(t, "arc-scale-set-down")
		terminal := &arcCase{label: "terminal", set: "terminal", verdict: "terminal", action: "delete-registration-then-ephemeralrunner"}
		terminal.name, terminal.id = w.runnerSet(terminal.set)
		managerNS := w.arc.Namespace
		w.arc.Stop()
		w.cue(terminal.name, "exit 1")
		require.Eventually(t, func() bool {
			p, err := cluster.Client.CoreV1().Pods(w.ns).Get(context.Background(), terminal.name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodFailed
		}, time.Minute, 100*time.Millisecond, "the runner's pod never Failed")
		terminal.gone = w.watchGone(terminal.name)
		applyOverlayIn(t, w.ns, w.url, arcConfig)
		w.await(t, []*arcCase{terminal}, func() {
			// ARC comes back after the act.
			w.startARC(managerNS)
		})
	})
}
