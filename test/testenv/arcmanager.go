package testenv

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ARCManagerVersion is the actions-runner-controller release whose manager
// `make arc-manager` builds (tools/arc) and StartARC runs.
const ARCManagerVersion = "v0.27.6"

// EphemeralRunnerSets are ARC's EphemeralRunnerSets, as the CRDs Start
// installs serve them.
var EphemeralRunnerSets = schema.FromAPIVersionAndKind(fleet.EphemeralRunnerAPIVersion, "").GroupVersion().WithResource("ephemeralrunnersets")

// ARCGitHubSecret is the name of the Secret holding the GitHub token that
// EphemeralRunner (and ARCRunnerSet) name in spec.githubConfigSecret.
const ARCGitHubSecret = ScaleSet + "-gha-rs-github-secret"

// ARCOptions configure a run of ARC's manager.
type ARCOptions struct {
	// Namespace is the manager's own namespace
	// (CONTROLLER_MANAGER_POD_NAMESPACE, which scale-set mode requires);
	// empty creates one.
	Namespace string
	// WatchNamespace, when set, restricts the manager to that namespace
	// and its own (--watch-single-namespace); empty watches all.
	WatchNamespace string
	// LogLevel is --log-level; empty is debug, ARC's default, which logs
	// every reconcile step.
	LogLevel string
}

// ARC is a running actions-runner-controller manager.
type ARC struct {
	cmd       *exec.Cmd
	logPath   string
	log       *lockedBuffer
	exited    chan struct{}
	exitErr   error
	Namespace string
	// Started is when the process started; Ready, when its EphemeralRunner
	// controller's workers had started.
	Started, Ready time.Time
}

// lockedBuffer is the manager's combined output, written by the process
// and read by tests.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	f   *os.File
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	return b.f.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ARCManagerPath is where `make arc-manager` puts the manager binary.
func ARCManagerPath(root string) string { return filepath.Join(root, ".cache", "bin", "arc-manager") }

// ARCManagerCRDDir holds the stand-ins for the two kinds ARC's manager
// watches in scale-set mode but testdata/arc-crds does not vendor
// (AutoscalingRunnerSet, AutoscalingListener); see their files.
func ARCManagerCRDDir(root string) string {
	return filepath.Join(root, "test", "testenv", "testdata", "arc-manager-crds")
}

// StartARC runs ARC's manager (.cache/bin/arc-manager, built by `make
// arc-manager`) against the control plane as its administrator, in scale-set
// mode: --auto-scaling-runner-set-only, no metrics server (--metrics-addr=0),
// no leader election, debug text logs. It returns once the EphemeralRunner
// controller's workers run, and stops the manager (SIGTERM, then SIGKILL
// after ten seconds) when the test ends; a failed test gets the manager's
// log. Without the binary the test fails naming the make target, or skips
// under -short.
func (e *Env) StartARC(t testing.TB, opts ARCOptions) *ARC {
	t.Helper()
	ns := opts.Namespace
	if ns == "" {
		ns = e.Namespace(t, "arc-system")
	}
	return e.startManager(t, managerRun{
		crds:      ARCManagerCRDDir(e.Root),
		namespace: ns,
		level:     opts.LogLevel,
		command: func(string) ([]string, []string, error) {
			args := []string{"--auto-scaling-runner-set-only", "--update-strategy=immediate"}
			if opts.WatchNamespace != "" {
				args = append(args, "--watch-single-namespace="+opts.WatchNamespace)
			}
			return args, []string{
				"CONTROLLER_MANAGER_POD_NAMESPACE=" + ns,
				// The listener image, which scale-set mode requires; no
				// listener is ever started here.
				"CONTROLLER_MANAGER_CONTAINER_IMAGE=ghcr.io/actions/gha-runner-scale-set-controller:" + strings.TrimPrefix(ARCManagerVersion, "v"),
			}, nil
		},
		controllers: []string{"ephemeral-runner-controller"},
	})
}

// managerRun is what differs between the manager's two modes.
type managerRun struct {
	// crds is the directory of the CRDs the mode's controllers watch.
	crds      string
	namespace string
	// level is --log-level; empty is debug.
	level string
	// command gives the mode's own arguments and environment, given the
	// run's own directory.
	command func(dir string) (args, env []string, err error)
	// controllers are the controllers whose workers must have started.
	controllers []string
}

// startManager runs ARC's manager with the flags both modes share (no
// metrics server, no leader election, text logs) and returns once the
// run's controllers' workers have started. The manager is stopped when the
// test ends; a failed test gets the end of its log.
func (e *Env) startManager(t testing.TB, run managerRun) *ARC {
	t.Helper()
	bin := ARCManagerPath(e.Root)
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("ARC's manager is not built (%s); `make arc-manager` builds it, `make test` runs this", bin)
		}
		t.Fatalf("ARC's manager is not built: run `make arc-manager` (builds %s from tools/arc): %v", bin, err)
	}
	e.arcCRDs.Lock()
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{run.crds}, ErrorIfPathMissing: true})
	e.arcCRDs.Unlock()
	if err != nil {
		t.Fatalf("install the CRDs ARC's manager watches (%s): %v", run.crds, err)
	}
	dir := t.TempDir()
	kubeconfig, err := e.Kubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	own, env, err := run.command(dir)
	if err != nil {
		t.Fatalf("prepare ARC's manager: %v", err)
	}
	args := append([]string{
		"--metrics-addr=0",
		"--enable-leader-election=false",
		"--log-level=" + cmp.Or(run.level, "debug"),
		"--log-format=text",
	}, own...)
	logPath := filepath.Join(dir, "arc-manager.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	a := &ARC{logPath: logPath, log: &lockedBuffer{f: f}, exited: make(chan struct{}), Namespace: run.namespace}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	a.cmd = cmd
	a.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start ARC's manager: %v", err)
	}
	go func() {
		a.exitErr = cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.Stop()
		_ = f.Close()
		if t.Failed() {
			// Short, and without stack traces: CI keeps only the end of
			// a failed test's output, which must still show the failure.
			t.Logf("ARC manager log (%s), its last lines without stack traces:\n%s", logPath, tail(withoutStacks(a.log.String()), 40))
		}
	})
	deadline := time.Now().Add(time.Minute)
	for !allWorkersStarted(a.log.String(), run.controllers) {
		select {
		case <-a.exited:
			t.Fatalf("ARC's manager exited while starting: %v\n%s", a.exitErr, tail(a.log.String(), 100))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ARC's manager did not start %v within a minute:\n%s", run.controllers, tail(a.log.String(), 100))
		}
	}
	a.Ready = time.Now()
	return a
}

// Stop stops the manager, SIGTERM then SIGKILL after ten seconds; it is
// safe to call more than once.
func (a *ARC) Stop() {
	select {
	case <-a.exited:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// Log is the manager's output so far.
func (a *ARC) Log() string { return a.log.String() }

// LogPath is the file the manager's output goes to, kept until the test's
// temporary directory is removed.
func (a *ARC) LogPath() string { return a.logPath }

// Exited reports whether the manager has exited, and how.
func (a *ARC) Exited() (bool, error) {
	select {
	case <-a.exited:
		return true, a.exitErr
	default:
		return false, nil
	}
}

// allWorkersStarted finds controller-runtime's "Starting workers" line for
// each named controller in the manager's log.
func allWorkersStarted(log string, controllers []string) bool {
	lines := strings.Split(log, "\n")
	for _, c := range controllers {
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, "Starting workers") && strings.Contains(l, `"controller": "`+c+`"`)
		}) {
			return false
		}
	}
	return true
}

// withoutStacks drops the stack traces controller-runtime prints after an
// error line (the lines that start with a tab).
func withoutStacks(log string) string {
	var kept []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.HasPrefix(l, "\t") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// ProvisionARCRunner creates an EphemeralRunner of configURL in ns and
// waits until ARC's manager has registered it, made its Secret and pod,
// and the runner id on its status is the one GitHub lists under its name
// (listed answers GitHub's id for a name). It returns the runner's name.
//
// Under load ARC v0.27.6 may reconcile on a cache that has not seen its
// own status write: it asks for a JIT config again, is told the runner
// exists, and removes it (ephemeralrunner_controller.go,
// AgentExistsException), leaving the EphemeralRunner with the id of a
// registration that went before its runner ran. That is ARC's own leak,
// not the case a test sets up: another runner (base-2, base-3) is made.
func (e *Env) ProvisionARCRunner(t testing.TB, ns, base, configURL string, listed func(name string) (int64, bool)) (string, ARCRunnerState) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		name := base
		if attempt > 1 {
			name = fmt.Sprintf("%s-%d", base, attempt)
		}
		e.EphemeralRunner(t, ns, EphemeralRunner{Name: name, ConfigURL: configURL})
		st, last, ok := e.settleARCRunner(t, ns, name, 30*time.Second, listed)
		if ok {
			return name, st
		}
		if attempt == 3 {
			t.Fatalf("%s/%s: not provisioned with GitHub's id in 3 attempts; last: %s", ns, name, last)
		}
		t.Logf("%s: %s; provisioning another", name, last)
	}
}

// settleARCRunner waits up to settle for EphemeralRunner ns/name to be
// provisioned with the id GitHub lists under its name (listed), and
// reports its state, and when it did not settle, what was last seen.
func (e *Env) settleARCRunner(t testing.TB, ns, name string, settle time.Duration, listed func(name string) (int64, bool)) (ARCRunnerState, string, bool) {
	t.Helper()
	for deadline := time.Now().Add(settle); ; time.Sleep(50 * time.Millisecond) {
		st := e.ARCRunner(t, ns, name)
		id, ok := listed(name)
		if Provisioned(st) && ok && id == st.RunnerID {
			return st, "", true
		}
		if time.Now().After(deadline) {
			return st, fmt.Sprintf("ARC's runner id %d, GitHub's %d (listed %v), pod %v, secret %v",
				st.RunnerID, id, ok, st.Pod != nil, st.Secret != nil), false
		}
	}
}

// ProvisionARCSetRunner waits for the one EphemeralRunner of the
// EphemeralRunnerSet named set in ns to be provisioned with GitHub's id,
// as ProvisionARCRunner does for one the test makes, and returns its name.
// A runner left by ARC v0.27.6's race (see ProvisionARCRunner) with the id
// of a registration it removed itself is not the case a test sets up: it
// is removed outright (finalizers, pod and Secret too), and the set makes
// another, up to three times. settle bounds each wait.
func (e *Env) ProvisionARCSetRunner(t testing.TB, ns, set string, settle time.Duration, listed func(name string) (int64, bool)) (string, ARCRunnerState) {
	t.Helper()
	tried := map[string]bool{}
	for attempt := 1; ; attempt++ {
		var name string
		for deadline := time.Now().Add(settle); name == ""; time.Sleep(50 * time.Millisecond) {
			for _, n := range e.ARCRunnersOf(t, ns, set) {
				if !tried[n] {
					name = n
				}
			}
			if name == "" && time.Now().After(deadline) {
				t.Fatalf("ARC's EphemeralRunnerSet %s/%s made no EphemeralRunner within %v", ns, set, settle)
			}
		}
		tried[name] = true
		st, last, ok := e.settleARCRunner(t, ns, name, settle, listed)
		if ok {
			return name, st
		}
		if attempt == 3 {
			t.Fatalf("%s/%s of set %s: not provisioned with GitHub's id in 3 attempts; last: %s", ns, name, set, last)
		}
		t.Logf("%s: %s; removing it for the set to make another", name, last)
		e.removeARCRunner(t, ns, name)
	}
}

// removeARCRunner removes EphemeralRunner ns/name, its finalizers, pod and
// Secret, whatever ARC would make of it.
func (e *Env) removeARCRunner(t testing.TB, ns, name string) {
	t.Helper()
	ctx := context.Background()
	res := e.Dynamic.Resource(EphemeralRunners).Namespace(ns)
	if _, err := res.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("remove the finalizers of ephemeralrunner %s/%s: %v", ns, name, err)
	}
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete ephemeralrunner %s/%s: %v", ns, name, err)
	}
	if err := e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	if err := e.Client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete secret %s/%s: %v", ns, name, err)
	}
}

// ARCGitHubTokenSecret creates the Secret ARC reads its GitHub credential
// from (key github_token), named ARCGitHubSecret, in ns.
func (e *Env) ARCGitHubTokenSecret(t testing.TB, ns, token string) {
	t.Helper()
	_, err := e.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ARCGitHubSecret},
		Data:       map[string][]byte{"github_token": []byte(token)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create secret %s/%s: %v", ns, ARCGitHubSecret, err)
	}
}

// ARCRunnerSet creates an EphemeralRunnerSet in ns, as ARC's
// AutoscalingRunnerSet controller would: ScaleSet's labels, replicas, and
// the EphemeralRunner spec of EphemeralRunner (configURL, the Secret
// ARCGitHubSecret, scale set 1, the runner pod template). ARC's
// EphemeralRunnerSet controller then makes that many EphemeralRunners,
// named NAME-runner-XXXXX.
func (e *Env) ARCRunnerSet(t testing.TB, ns, name, configURL string, replicas int) *unstructured.Unstructured {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(EphemeralRunner{Name: name, ConfigURL: configURL}.object(ns).Object, "spec")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       "EphemeralRunnerSet",
		"metadata": map[string]any{
			"name": name,
			"labels": map[string]any{
				"actions.github.com/scale-set-name":      ScaleSet,
				"actions.github.com/scale-set-namespace": ns,
				"app.kubernetes.io/component":            "runner-set",
				"app.kubernetes.io/part-of":              "gha-runner-scale-set",
			},
		},
		"spec": map[string]any{"replicas": int64(replicas), "patchID": int64(0), "ephemeralRunnerSpec": spec},
	}}
	created, err := e.Dynamic.Resource(EphemeralRunnerSets).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ephemeralrunnerset %s/%s: %v", ns, name, err)
	}
	return created
}

// ScaleARCRunnerSet sets an EphemeralRunnerSet's replicas, as ARC's
// listener does.
func (e *Env) ScaleARCRunnerSet(t testing.TB, ns, name string, replicas int) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := e.Dynamic.Resource(EphemeralRunnerSets).Namespace(ns).Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale ephemeralrunnerset %s/%s: %v", ns, name, err)
	}
}

// ARCRunnersOf lists the names of the EphemeralRunners in ns whose
// controller is the EphemeralRunnerSet named set, sorted.
func (e *Env) ARCRunnersOf(t testing.TB, ns, set string) []string {
	t.Helper()
	l, err := e.Dynamic.Resource(EphemeralRunners).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ephemeralrunners in %s: %v", ns, err)
	}
	var out []string
	for _, u := range l.Items {
		if ref := metav1.GetControllerOf(&u); ref != nil && ref.Kind == "EphemeralRunnerSet" && ref.Name == set {
			out = append(out, u.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// ARCRunnerState is what ARC has made of an EphemeralRunner so far.
type ARCRunnerState struct {
	// Runner is the EphemeralRunner, nil when gone.
	Runner *unstructured.Unstructured
	// RunnerID is status.runnerId, the registration's id on GitHub.
	RunnerID int64
	// Finalizers are the EphemeralRunner's.
	Finalizers []string
	// Deleting: a delete was accepted and finalizers hold it.
	Deleting bool
	// Pod and Secret are the runner pod and the JIT config Secret, both
	// named after the EphemeralRunner; nil when absent.
	Pod    *corev1.Pod
	Secret *corev1.Secret
}

// Gone is true when the EphemeralRunner, its pod and its Secret are all
// gone.
func (s ARCRunnerState) Gone() bool { return s.Runner == nil && s.Pod == nil && s.Secret == nil }

// ARCRunner reads what ARC has made of EphemeralRunner ns/name.
func (e *Env) ARCRunner(t testing.TB, ns, name string) ARCRunnerState {
	t.Helper()
	ctx := context.Background()
	var st ARCRunnerState
	st.Runner = e.ARCObject(t, EphemeralRunners, ns, name)
	if st.Runner != nil {
		st.RunnerID, _, _ = unstructured.NestedInt64(st.Runner.Object, "status", "runnerId")
		st.Finalizers = st.Runner.GetFinalizers()
		st.Deleting = st.Runner.GetDeletionTimestamp() != nil
	}
	pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if e.exists(t, err, "pod", ns, name) {
		st.Pod = pod
	}
	sec, err := e.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if e.exists(t, err, "secret", ns, name) {
		st.Secret = sec
	}
	return st
}

// WaitARCRunner polls ARCRunner every 50 ms until done holds, and returns
// the state it held for and how long that took; it fails the test, with
// the last state, after timeout.
func (e *Env) WaitARCRunner(t testing.TB, ns, name string, timeout time.Duration, what string, done func(ARCRunnerState) bool) (ARCRunnerState, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		st := e.ARCRunner(t, ns, name)
		if done(st) {
			return st, time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s/%s: %s: not within %v; last: runner id %d, finalizers %v, deleting %v, pod %v, secret %v",
				ns, name, what, timeout, st.RunnerID, st.Finalizers, st.Deleting, st.Pod != nil, st.Secret != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Provisioned holds once ARC has registered the runner (status.runnerId),
// made its JIT config Secret and created its pod.
func Provisioned(s ARCRunnerState) bool {
	return s.Runner != nil && s.RunnerID != 0 && s.Secret != nil && s.Pod != nil
}

// ARCRunnerPhase is an EphemeralRunner's status.phase.
func ARCRunnerPhase(s ARCRunnerState) string {
	if s.Runner == nil {
		return ""
	}
	p, _, _ := unstructured.NestedString(s.Runner.Object, "status", "phase")
	return p
}
