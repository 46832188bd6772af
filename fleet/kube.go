package fleet

import (
	"errors"
	"time"
)

// Pod is the little the classifier needs of a Kubernetes pod. The kube
// adapter builds it page by page so a sweep never holds the fleet's full Pod
// objects.
type Pod struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// RunnerName is the name the pod's runner registers with on GitHub.
	RunnerName string
	// ScopeKey is the Scope.Key of the pod's GitHub scope; empty when the
	// pod says nothing the configuration can map to a scope.
	ScopeKey string
	// Phase is the pod's status.phase: Pending, Running, Succeeded, Failed
	// or Unknown.
	Phase     string
	CreatedAt Stamp
	// StartedAt is when the runner began: its container's
	// state.running.startedAt, else the pod's status.startTime, else its
	// creation. The registration deadline counts from here, because a pod
	// may wait Pending for minutes (node scale-up, a large image) before
	// its runner can even try to register.
	StartedAt Stamp
	// ServiceAccount is the pod's spec.serviceAccountName: the same-named
	// ServiceAccount is deleted with a bare pod only when the pod ran as
	// it, so that no other ServiceAccount that merely shares the name goes.
	ServiceAccount string
	// HasRunner is true when the pod's spec has a container named as the
	// configured runner container. A pod without one is not a runner, only
	// something the label selector happened to match, and is never judged.
	// (The three flags stand together: 8 bytes a view, not 16.)
	HasRunner bool
	// Deleting is true once the pod has a deletion timestamp: someone else
	// is already removing it.
	Deleting bool
	// Stamped is true when the pod carries the pool's owner-stamp label.
	Stamped bool
	Runner  Container
	// Owner is the pod's controller owner reference, if any.
	Owner *Owner
	// RunnerID is a registration id known from Kubernetes (for example an
	// ARC EphemeralRunner's status.runnerId); zero when unknown.
	RunnerID int64
	// Job is the job the pool's own label or annotation says the runner
	// took (REAPER_JOB_FROM); nil when it says none.
	Job *Job
	// StartWait is why the runner container has not started yet; nil once
	// it has started, or while nothing says why. A pointer: nearly every
	// pod of a fleet has started, and its view should not pay for two
	// strings it never holds.
	StartWait *StartWait
	// Group is what made the pod (see Group); zero when nothing says.
	Group Group
}

// StartWait is what holds a runner pod back from starting its runner, as
// the kube adapter reads it from the pod's status, most telling first: the
// scheduler's Unschedulable (or SchedulingGated), an init container that
// has not finished (waiting with a reason, ended with a non-zero code, or
// still running while the runner waits for it), the runner container's own
// waiting reason (ErrImagePull, ImagePullBackOff, InvalidImageName,
// CreateContainerConfigError, CreateContainerError, or any other). The
// runner's ContainerCreating and PodInitializing are a start's normal
// progress: they name the wait only where nothing more telling does, since
// a pod still creating its container past the start deadline is as stuck
// as any (a volume that never mounts, a network that never comes). Reason
// and Message are the cluster's words, outside text to be made safe before
// they are shown.
type StartWait struct {
	// Reason is the waiting reason, the scheduling condition's reason, an
	// ended init container's reason, or Running for an init container
	// that has not finished.
	Reason  string
	Message string
	// Container is the container that waits (the runner's own, or an init
	// container's name); empty for a pod not scheduled.
	Container string
	// Init is true when Container is an init container.
	Init bool
	// ScheduledAt is when the pod was placed on a node: the time its
	// PodScheduled condition turned True. Zero when the status does not
	// say, and for a pod that waits for room. The start deadline of every
	// wait but the scheduler's counts from here, so that a pod that waited
	// long for a node is not judged, once it has one, by the time it
	// waited.
	ScheduledAt Stamp
}

// Unschedulable reports whether the pod waits for room in the cluster, not
// for anything wrong with itself: the scheduler found no node for it, or a
// scheduling gate (a queue's quota) holds it back. Deleting it frees
// nothing, and its controller would make another at once.
func (w *StartWait) Unschedulable() bool {
	return w != nil && (w.Reason == "Unschedulable" || w.Reason == "SchedulingGated")
}

// Owner kinds the reaper deletes instead of the pod, because their
// controllers would otherwise recreate the pod from a dead runner config.
const (
	EphemeralRunnerAPIVersion = "actions.github.com/v1alpha1"
	EphemeralRunnerKind       = "EphemeralRunner"
	LegacyRunnerAPIVersion    = "actions.summerwind.dev/v1alpha1"
	LegacyRunnerKind          = "Runner"
)

// ARCRegistrationFinalizer is the finalizer with which ARC's controller
// holds an EphemeralRunner being deleted until the Actions service has
// removed its runner. ARC v0.27.6 takes the service's 404 (the runner is
// already gone) for a failure and retries for ever, so an EphemeralRunner
// whose registration went first stays deleting, its pod and JIT secret
// with it. The reaper removes this one finalizer, and only once it has
// proof that the registration is gone: its own 204 or 404, or a complete
// list without it. ARC's other finalizer, which deletes the pod and the
// secret, is left for ARC to finish.
const ARCRegistrationFinalizer = "ephemeralrunner.actions.github.com/runner-registration-finalizer"

// ARCFinalizer is ARC's controller's other finalizer on an EphemeralRunner:
// it holds the object until ARC has deleted its pod and JIT secret.
const ARCFinalizer = "ephemeralrunner.actions.github.com/finalizer"

// IsARCFinalizer reports whether a finalizer is one of ARC's own on an
// EphemeralRunner: the only ones the reaper ever removes. Any other is
// another controller's, guarding that controller's own cleanup.
func IsARCFinalizer(name string) bool {
	return name == ARCRegistrationFinalizer || name == ARCFinalizer
}

// ForeignFinalizers is the finalizers of the list that are not ARC's.
func ForeignFinalizers(finalizers []string) []string {
	var out []string
	for _, f := range finalizers {
		if !IsARCFinalizer(f) {
			out = append(out, f)
		}
	}
	return out
}

// ARCOwned reports whether the owner is an ARC runner object whose deletion
// is the right way to remove its pod.
func (o *Owner) ARCOwned() bool {
	return o != nil && ((o.APIVersion == EphemeralRunnerAPIVersion && o.Kind == EphemeralRunnerKind) ||
		(o.APIVersion == LegacyRunnerAPIVersion && o.Kind == LegacyRunnerKind))
}

// Owner is a controller owner reference.
type Owner struct {
	APIVersion string
	Kind       string
	Name       string
	UID        string
}

// Container is what the runner container's status says.
type Container struct {
	// Found is false when the pod has no status for the runner container.
	Found   bool
	Running bool
	// Terminated is state.terminated; LastTerminated is
	// lastState.terminated, the fallback of the exit fingerprint.
	Terminated     *Termination
	LastTerminated *Termination
}

// Termination is a container's terminated state.
type Termination struct {
	ExitCode   int32
	Signal     int32
	Reason     string
	FinishedAt time.Time
}

// EphemeralRunner is what the classifier needs of an ARC
// actions.github.com/v1alpha1 EphemeralRunner.
type EphemeralRunner struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// ScopeKey is the Scope.Key of spec.githubConfigUrl; empty when the URL
	// names no scope.
	ScopeKey string
	Phase    string
	// Note is status.reason and status.message; nil when both are empty,
	// as on nearly every runner. Held apart, they cost a runner's view a
	// pointer, not two strings' 32 bytes. Read only: a copy of the view
	// shares it.
	Note      *StatusNote
	RunnerID  int64
	CreatedAt Stamp
	// DeletingSince is the deletion timestamp; zero when not deleting.
	DeletingSince Stamp
	// Finalizers are read only: the kube adapter gives every runner with
	// the same finalizers one slice (a fleet's runners carry the same
	// two), so a write through one view would change them all.
	Finalizers []string
	// Job is the job ARC's listener recorded on the status when it started
	// on this runner; nil when none is recorded.
	Job *Job
}

// StatusNote is an EphemeralRunner's status.reason and status.message: why
// ARC's controller put it in its phase (TooManyPodFailures, say).
type StatusNote struct {
	Reason  string
	Message string
}

// Reason is the status's reason; empty when none.
func (e EphemeralRunner) Reason() string {
	if e.Note == nil {
		return ""
	}
	return e.Note.Reason
}

// Message is the status's message; empty when none.
func (e EphemeralRunner) Message() string {
	if e.Note == nil {
		return ""
	}
	return e.Note.Message
}

// UnobservedNamespace is a configured namespace that listed no pod and could
// not be shown to exist. An empty list from it proves nothing (a misspelt
// name lists nothing too), and a pod there could back any registration, so
// while there is one no registration is judged a ghost.
type UnobservedNamespace struct {
	Namespace string
	Reason    string
}

// ErrNoLogRight marks a read of a runner's log that the API server refused
// (403): the reaper's role lacks `get` on `pods/log`. It is no evidence
// either way, like any read that fails, and the sweep says once what right
// is missing rather than once per runner.
var ErrNoLogRight = errors.New("forbidden: the reaper may not get pods/log")
