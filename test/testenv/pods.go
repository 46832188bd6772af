package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RunnerImage is the image of the runner container in ARC's runner pods.
const RunnerImage = "ghcr.io/actions/actions-runner:latest"

// RunnerPod is a runner pod as ARC creates it and as a kubelet has left it.
// Nothing runs in the test control plane: a pod is created, then its status
// is written through the status subresource, as a kubelet would (a create
// drops status). It has no node, so a delete removes it at once.
type RunnerPod struct {
	// Name is the pod's name; empty takes the owner's name, as ARC names a
	// runner's pod after its EphemeralRunner or Runner.
	Name string
	// Org, when set, labels the pod as ARC labels a runner of that
	// organization: actions-ephemeral-runner=True and
	// actions.github.com/organization=Org.
	Org string
	// ScaleSet, when set, adds the labels ARC gives the runner pods of that
	// scale set: its name and namespace (the pod's), and the
	// gha-runner-scale-set component labels.
	ScaleSet string
	// Labels are added last, over the ones above: a stamp label, say, or
	// the whole label set of a pod labelled some other way.
	Labels map[string]string
	// Annotations are the pod's: a pool's job reference, say.
	Annotations map[string]string
	// Owner, when set, is the pod's owner reference (see ControllerRef).
	Owner *metav1.OwnerReference
	// RestartPolicy is the pod's; empty is Never, as ARC's runner pods have.
	RestartPolicy corev1.RestartPolicy
	// Sidecar adds a docker:dind container beside the runner.
	Sidecar bool
	// ServiceAccount is the pod's spec.serviceAccountName; empty leaves
	// it unset.
	ServiceAccount string
	// Env is the runner container's environment (see LegacyScopeEnv).
	Env []corev1.EnvVar
	// Containers, when set, replace the runner container (and the
	// sidecar): a pod that the selector matches but that is no runner,
	// say. PodState then describes the first of them.
	Containers []corev1.Container
	// InitContainers are the pod's init containers, which a Status may
	// then report on.
	InitContainers []corev1.Container

	// PodState is how the kubelet has left the pod.
	PodState
	// Status, when set, is written as it is instead of the one PodState
	// describes, for a test that needs exact container statuses.
	Status *corev1.PodStatus
	// Unscheduled writes no status at all: the pod stays as the API server
	// created it, Pending, as before any kubelet has seen it.
	Unscheduled bool
}

// PodState is how a kubelet has left a runner pod: its phase and its runner
// container's status.
type PodState struct {
	// Phase is the pod's phase; empty is Running.
	Phase corev1.PodPhase
	// Running: the runner container is running (unless Terminated is
	// set) and ready.
	Running bool
	// Terminated is the runner container's current state, when it has
	// terminated.
	Terminated *corev1.ContainerStateTerminated
	// LastTerminated is its previous run's end, as after a restart.
	LastTerminated *corev1.ContainerStateTerminated
	// Waiting is the waiting reason of a runner container neither running
	// nor terminated; empty is ContainerCreating.
	Waiting string
	// NoStatus leaves out the runner container's status: the pod has a
	// phase but the kubelet never reported the container.
	NoStatus bool
	// StartedAt, when set, is the running runner container's
	// state.running.startedAt; zero is the pod's creation, as is the pod's
	// status.startTime either way.
	StartedAt time.Time
}

// Running is the state of a healthy runner pod: Running, its runner
// container running and ready.
func Running() PodState { return PodState{Running: true} }

// Terminated is a container's end, started and finished now.
func Terminated(code, signal int32, reason string) *corev1.ContainerStateTerminated {
	now := metav1.Now()
	return &corev1.ContainerStateTerminated{ExitCode: code, Signal: signal, Reason: reason, StartedAt: now, FinishedAt: now}
}

// LegacyScopeEnv is the environment through which ARC v0.27.6's legacy
// runner controller tells a runner container its scope
// (runner_controller.go: RUNNER_ORG, RUNNER_REPO as OWNER/NAME and
// RUNNER_ENTERPRISE, all three set, the unused ones empty).
func LegacyScopeEnv(org, repo, enterprise string) []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "RUNNER_ORG", Value: org}, {Name: "RUNNER_REPO", Value: repo}, {Name: "RUNNER_ENTERPRISE", Value: enterprise}}
}

// Owner is an object that can own a pod, such as the
// *unstructured.Unstructured of an EphemeralRunner or Runner.
type Owner interface {
	GetAPIVersion() string
	GetKind() string
	GetName() string
	GetUID() types.UID
}

// ControllerRef is the owner reference ARC's controllers give a runner's pod:
// the EphemeralRunner or Runner as its controller, blocking owner deletion.
func ControllerRef(owner Owner) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{
		APIVersion:         owner.GetAPIVersion(),
		Kind:               owner.GetKind(),
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// pod is the pod to create, in namespace ns.
func (p RunnerPod) pod(ns string) *corev1.Pod {
	name := p.Name
	if name == "" && p.Owner != nil {
		name = p.Owner.Name
	}
	labels := map[string]string{}
	if p.Org != "" {
		labels["actions-ephemeral-runner"] = "True"
		labels["actions.github.com/organization"] = p.Org
	}
	if p.ScaleSet != "" {
		labels["actions.github.com/scale-set-name"] = p.ScaleSet
		labels["actions.github.com/scale-set-namespace"] = ns
		labels["app.kubernetes.io/component"] = "runner"
		labels["app.kubernetes.io/part-of"] = "gha-runner-scale-set"
	}
	for k, v := range p.Labels {
		labels[k] = v
	}
	if len(labels) == 0 {
		labels = nil
	}
	restart := p.RestartPolicy
	if restart == "" {
		restart = corev1.RestartPolicyNever
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: p.Annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName: p.ServiceAccount,
			RestartPolicy:      restart,
			Containers:         []corev1.Container{{Name: "runner", Image: RunnerImage, Command: []string{"/home/runner/run.sh"}, Env: p.Env}},
		},
	}
	if p.Sidecar {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "dind", Image: "docker:dind"})
	}
	if len(p.Containers) > 0 {
		pod.Spec.Containers = p.Containers
	}
	pod.Spec.InitContainers = p.InitContainers
	if p.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*p.Owner}
	}
	return pod
}

// status is the status a kubelet would have written for the created pod.
func (s PodState) status(created *corev1.Pod) corev1.PodStatus {
	st := corev1.PodStatus{Phase: s.Phase, StartTime: &created.CreationTimestamp}
	if st.Phase == "" {
		st.Phase = corev1.PodRunning
	}
	if s.NoStatus {
		return st
	}
	first := created.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: first.Name, Image: first.Image, Ready: s.Running}
	switch {
	case s.Terminated != nil:
		cs.State.Terminated = s.Terminated
	case s.Running:
		started := created.CreationTimestamp
		if !s.StartedAt.IsZero() {
			started = metav1.NewTime(s.StartedAt)
		}
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
	default:
		reason := s.Waiting
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
	}
	if s.LastTerminated != nil {
		cs.LastTerminationState.Terminated = s.LastTerminated
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	return st
}

// CreateRunnerPod creates the pod in ns with cs, then writes its status as
// a kubelet would, and returns it as the API server last answered. It is
// for programs and goroutines; a test calls Env.RunnerPod.
func CreateRunnerPod(ctx context.Context, cs kubernetes.Interface, ns string, p RunnerPod) (*corev1.Pod, error) {
	pod := p.pod(ns)
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
	}
	if p.Unscheduled {
		return created, nil
	}
	if p.Status != nil {
		created.Status = *p.Status
	} else {
		created.Status = p.PodState.status(created)
	}
	updated, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("write status of pod %s/%s: %w", ns, pod.Name, err)
	}
	return updated, nil
}

// RunnerPod creates the runner pod in ns as the administrator (see
// CreateRunnerPod), failing the test if it cannot.
func (e *Env) RunnerPod(t testing.TB, ns string, p RunnerPod) *corev1.Pod {
	t.Helper()
	created, err := CreateRunnerPod(context.Background(), e.Client, ns, p)
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// WritePodState writes a new status on an existing pod, as a kubelet would
// when the pod moves on (a container that was being created starts, say),
// and returns the pod as the API server answered.
func (e *Env) WritePodState(t testing.TB, ns, name string, s PodState) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	pod.Status = s.status(pod)
	updated, err := e.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write status of pod %s/%s: %v", ns, name, err)
	}
	return updated
}

// PodExists says whether the pod is there; any error but NotFound fails the
// test.
func (e *Env) PodExists(t testing.TB, ns, name string) bool {
	t.Helper()
	_, err := e.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return e.exists(t, err, "pod", ns, name)
}
