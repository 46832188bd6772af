package testenv

// ARC v0.27.6's manager in legacy mode (actions.summerwind.dev:
// RunnerDeployment, RunnerReplicaSet, Runner, runner pod), on the test API
// server, against the GitHub simulator's REST API.
//
// What the manager needs there (ARC v0.27.6 main.go):
//   - no --auto-scaling-runner-set-only; a GitHub client (main.go builds it
//     from GITHUB_TOKEN and --github-url before anything else);
//   - the CRDs of every legacy controller it starts (RunnerDeployment,
//     RunnerReplicaSet, RunnerSet, HorizontalRunnerAutoscaler, Runner);
//   - a webhook server: disableAdmissionWebhook has no flag (main.go:84,
//     :398), so the Runner, RunnerDeployment and RunnerReplicaSet webhooks
//     and the PodRunnerTokenInjector are always registered and the manager
//     serves TLS on --port from os.TempDir()/k8s-webhook-server/serving-certs
//     (controller-runtime v0.14.4). A self-signed pair under a TMPDIR of the
//     test's own, and a free port, satisfy it; no webhook configuration is
//     installed, so the API server never calls it;
//   - --metrics-addr=0 and no leader election, as in scale-set mode.
//
// There is no garbage collector and no kubelet on the test API server:
// PlayLegacyCluster stands in for the two things of theirs the legacy
// controllers rely on (the pod of a deleted Runner is deleted; a deleted
// pod's runner container stops).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// Legacy ARC's kinds, as the CRDs StartARCLegacy installs serve them.
var (
	LegacyRunnerDeployments = schema.FromAPIVersionAndKind(fleet.LegacyRunnerAPIVersion, "").GroupVersion().WithResource("runnerdeployments")
	LegacyRunnerReplicaSets = schema.FromAPIVersionAndKind(fleet.LegacyRunnerAPIVersion, "").GroupVersion().WithResource("runnerreplicasets")
)

// The runner pod's finalizer in ARC v0.27.6 (constants.go:13); the
// Runner's is LegacyRunnerFinalizer (runner_controller.go:49).
const (
	// (LegacyRunnerFinalizer, arc.go, is the Runner's.)
	LegacyRunnerPodFinalizer = "actions.summerwind.dev/runner-pod"
	// LegacyRunnerIDAnnotation is where the runner pod controller keeps the
	// registration's id once it has seen it on GitHub.
	LegacyRunnerIDAnnotation = "actions-runner/id"
)

// ARCLegacyCRDDir holds ARC v0.27.6's legacy CRDs other than Runner, which
// testdata/arc-crds vendors.
func ARCLegacyCRDDir(root string) string {
	return filepath.Join(root, "test", "testenv", "testdata", "arc-legacy-crds")
}

// ARCLegacyOptions configure a run of ARC's manager in legacy mode.
type ARCLegacyOptions struct {
	// GitHubURL is the REST API's base URL (--github-url), Token the PAT.
	GitHubURL, Token string
	// WatchNamespace is --watch-namespace (legacy mode's; empty watches
	// all).
	WatchNamespace string
	// LogLevel is --log-level; empty is debug.
	LogLevel string
}

// StartARCLegacy runs ARC's manager (.cache/bin/arc-manager) in legacy
// mode against the control plane as its administrator and the GitHub
// simulator at opts.GitHubURL. It returns once the Runner and runner pod
// controllers' workers run; the manager is stopped when the test ends, and
// a failed test gets its log.
func (e *Env) StartARCLegacy(t testing.TB, opts ARCLegacyOptions) *ARC {
	t.Helper()
	return e.startManager(t, managerRun{
		crds:      ARCLegacyCRDDir(e.Root),
		namespace: opts.WatchNamespace,
		level:     opts.LogLevel,
		command: func(dir string) ([]string, []string, error) {
			tmp := filepath.Join(dir, "tmp")
			if err := writeWebhookCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
				return nil, nil, err
			}
			port, err := freePort()
			if err != nil {
				return nil, nil, err
			}
			args := []string{"--port=" + strconv.Itoa(port), "--github-url=" + opts.GitHubURL}
			if opts.WatchNamespace != "" {
				args = append(args, "--watch-namespace="+opts.WatchNamespace)
			}
			return args, []string{"TMPDIR=" + tmp, "GITHUB_TOKEN=" + opts.Token}, nil
		},
		controllers: []string{"runner-controller", "runnerpod-controller", "runnerreplicaset-controller", "runnerdeployment-controller"},
	})
}

// writeWebhookCert writes a self-signed tls.crt and tls.key for localhost
// into dir.
func writeWebhookCert(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cert, key, err := SelfSignedCert()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)
}

// SelfSignedCert is a serving certificate for localhost and 127.0.0.1,
// valid for a day, that is its own CA (so it can be a webhook's caBundle),
// and its key, both PEM.
func SelfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LegacyRunnerDeployment creates a RunnerDeployment in ns: replicas
// Runners of organization org, dockerEnabled false (no dind image can be
// pulled here), ephemeral by default.
func (e *Env) LegacyRunnerDeployment(t testing.TB, ns, name, org string, replicas int) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.LegacyRunnerAPIVersion,
		"kind":       "RunnerDeployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": int64(replicas),
			"template": map[string]any{
				"spec": map[string]any{
					"organization":  org,
					"dockerEnabled": false,
				},
			},
		},
	}}
	created, err := e.Dynamic.Resource(LegacyRunnerDeployments).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create runnerdeployment %s/%s: %v", ns, name, err)
	}
	return created
}

// LegacyRunners lists the names of the Runners in ns, sorted; with
// deleting false, only those not being deleted.
func (e *Env) LegacyRunners(t testing.TB, ns string, deleting bool) []string {
	t.Helper()
	l, err := e.Dynamic.Resource(LegacyRunners).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list runners in %s: %v", ns, err)
	}
	var out []string
	for _, u := range l.Items {
		if deleting || u.GetDeletionTimestamp() == nil {
			out = append(out, u.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// LegacyRunnerState is what legacy ARC has made of a Runner so far.
type LegacyRunnerState struct {
	// Runner is the Runner, nil when gone.
	Runner *unstructured.Unstructured
	// Finalizers and Deleting are the Runner's.
	Finalizers []string
	Deleting   bool
	// Pod is the runner pod, named after the Runner; nil when absent.
	Pod *corev1.Pod
	// RunnerID is the pod's actions-runner/id annotation, set by the
	// runner pod controller once GitHub lists the runner; 0 before.
	RunnerID int64
}

// Gone: the Runner and its pod are both gone.
func (s LegacyRunnerState) Gone() bool { return s.Runner == nil && s.Pod == nil }

// LegacyProvisioned: the Runner holds ARC's finalizer and its pod exists.
func LegacyProvisioned(s LegacyRunnerState) bool {
	return s.Runner != nil && slices.Contains(s.Finalizers, LegacyRunnerFinalizer) && s.Pod != nil
}

// LegacyRunnerOf reads what ARC has made of Runner ns/name.
func (e *Env) LegacyRunnerOf(t testing.TB, ns, name string) LegacyRunnerState {
	t.Helper()
	var st LegacyRunnerState
	st.Runner = e.ARCObject(t, LegacyRunners, ns, name)
	if st.Runner != nil {
		st.Finalizers = st.Runner.GetFinalizers()
		st.Deleting = st.Runner.GetDeletionTimestamp() != nil
	}
	pod, err := e.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if e.exists(t, err, "pod", ns, name) {
		st.Pod = pod
		st.RunnerID, _ = strconv.ParseInt(pod.Annotations[LegacyRunnerIDAnnotation], 10, 64)
	}
	return st
}

// WaitLegacyRunner polls LegacyRunnerOf every 50 ms until done holds, and
// returns that state and how long it took; it fails the test after timeout.
func (e *Env) WaitLegacyRunner(t testing.TB, ns, name string, timeout time.Duration, what string, done func(LegacyRunnerState) bool) (LegacyRunnerState, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		st := e.LegacyRunnerOf(t, ns, name)
		if done(st) {
			return st, time.Since(start)
		}
		if time.Since(start) > timeout {
			var podFin []string
			if st.Pod != nil {
				podFin = st.Pod.Finalizers
			}
			t.Fatalf("%s/%s: %s: not within %v; last: runner %v (finalizers %v, deleting %v), pod %v (finalizers %v), runner id %d",
				ns, name, what, timeout, st.Runner != nil, st.Finalizers, st.Deleting, st.Pod != nil, podFin, st.RunnerID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LegacyCluster plays, in one namespace, the parts of a cluster the test
// API server lacks and the legacy controllers rely on.
type LegacyCluster struct {
	// GC: the garbage collector deletes (background) a pod whose
	// controller, a Runner, is gone or is another object of that name.
	GC bool
	// Kubelet: a deleted pod whose runner container runs is stopped, as
	// the kubelet does within the grace period: the container terminates
	// (exit 0, as the runner does on SIGTERM when idle) and the pod
	// succeeds.
	Kubelet bool
}

// PlayLegacyCluster runs c in ns every 50 ms until the test ends.
func (e *Env) PlayLegacyCluster(t testing.TB, ns string, c LegacyCluster) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			e.legacyClusterTick(ctx, ns, c)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func (e *Env) legacyClusterTick(ctx context.Context, ns string, c LegacyCluster) {
	pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		ref := metav1.GetControllerOf(p)
		if c.GC && p.DeletionTimestamp == nil && ref != nil && ref.Kind == fleet.LegacyRunnerKind {
			owner, err := e.Dynamic.Resource(LegacyRunners).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && owner.GetUID() != ref.UID) {
				bg := metav1.DeletePropagationBackground
				_ = e.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
			}
		}
		if c.Kubelet && p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodRunning {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "runner" && cs.State.Running != nil {
					p.Status.Phase = corev1.PodSucceeded
					for j := range p.Status.ContainerStatuses {
						now := metav1.Now()
						p.Status.ContainerStatuses[j].Ready = false
						p.Status.ContainerStatuses[j].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
							ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}
					}
					_, _ = e.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
					break
				}
			}
		}
	}
}

// String describes a state for a log line.
func (s LegacyRunnerState) String() string {
	podFin := []string(nil)
	if s.Pod != nil {
		podFin = s.Pod.Finalizers
	}
	return fmt.Sprintf("runner %v (finalizers %v, deleting %v), pod %v (finalizers %v), runner id %d",
		s.Runner != nil, s.Finalizers, s.Deleting, s.Pod != nil, podFin, s.RunnerID)
}

// WriteLegacyPodState is WritePodState retried on a conflict: legacy ARC's
// runner pod controller annotates and patches the pod while the test plays
// its kubelet.
func (e *Env) WriteLegacyPodState(t testing.TB, ns, name string, s PodState) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s/%s: %v", ns, name, err)
		}
		pod.Status = s.status(pod)
		updated, err := e.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			return updated
		}
		if !apierrors.IsConflict(err) || i == 20 {
			t.Fatalf("write status of pod %s/%s: %v", ns, name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ProvisionLegacy waits for a Runner in ns other than not, has register
// register it on GitHub as the runner binary's config.sh would (online,
// idle, ephemeral, name = the Runner's), plays the kubelet (the pod runs),
// and waits for ARC's runner pod controller to record the registration's
// id. register is a function, not the simulator, because the simulator's
// own tests import this package.
func ProvisionLegacy(t testing.TB, env *Env, register func(name string), ns, not string) (string, LegacyRunnerState) {
	t.Helper()
	name := waitNewLegacyRunner(t, env, ns, not)
	// Registered before ARC's first list of runners: ARC's GitHub client
	// caches a list for its max-age (60 s, as GitHub's), so a runner
	// registered after that list would be seen a minute late.
	register(name)
	env.WaitLegacyRunner(t, ns, name, 30*time.Second, "finalizer and pod", LegacyProvisioned)
	env.WriteLegacyPodState(t, ns, name, Running())
	// Longer than the list's max-age: when ARC's runner pod controller
	// listed the runners between the Runner's creation and register (a
	// race the test cannot close from outside), it sees the registration
	// only once its cached list has expired, 60 s later.
	st, _ := env.WaitLegacyRunner(t, ns, name, 90*time.Second, "runner id on the pod", func(s LegacyRunnerState) bool { return s.RunnerID != 0 })
	return name, st
}

// waitNewLegacyRunner waits for a Runner in ns, not being deleted, other
// than not.
func waitNewLegacyRunner(t testing.TB, env *Env, ns, not string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, n := range env.LegacyRunners(t, ns, false) {
			if n != not {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ARC made no Runner in %s within 30s", ns)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
