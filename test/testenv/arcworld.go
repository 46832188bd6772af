package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ARCRunner is one online runner of an ARC scale set as the cluster holds
// it: its EphemeralRunner, as ARC's EphemeralRunnerSet controller creates
// it (ARC's labels, annotations, finalizers and controller reference, and
// the scale set's pod template as its spec) and as its EphemeralRunner
// controller then writes its status (Running, registered, ready), and its
// pod (ARCPod), controlled by it. Scale benchmarks build fleets of them,
// so that the EphemeralRunner list the reaper reads with ARC leaks on is
// paid per object of a real one's size, not per skeleton.
type ARCRunner struct {
	ARCPod
	// ConfigURL is spec.githubConfigUrl: the scope's URL on the GitHub
	// the reaper is pointed at (ghsim.ConfigURL for the simulator), or
	// the reaper takes the runner for another GitHub's.
	ConfigURL string
	// RunnerID is the registration's id, status.runnerId.
	RunnerID int64
	// ScaleSetID is spec.runnerScaleSetId; 0 is 1.
	ScaleSetID int64
}

// CreateARCRunner creates the runner's EphemeralRunner and writes its
// status, then creates its pod, controlled by the EphemeralRunner's real
// UID, and writes the pod's status: four writes, each the plain create or
// status update ARC's controllers and the kubelet send. cs may use
// protobuf; the EphemeralRunner, a custom resource, goes as JSON.
//
// A write the API server answers with a transient error (etcd's "request
// timed out" under the load of building a large world, a throttle) is
// sent again, and a create or status write that had in fact gone through
// is taken from the server as it is, so that one slow etcd commit does
// not fail a world of 100,000 runners half built.
func CreateARCRunner(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string, r ARCRunner) error {
	ers := dyn.Resource(EphemeralRunners).Namespace(ns)
	var er *unstructured.Unstructured
	err := retryTransient(ctx, transientPause, func() (err error) {
		er, err = ers.Create(ctx, r.EphemeralRunner(ns), metav1.CreateOptions{FieldManager: "manager"})
		if apierrors.IsAlreadyExists(err) {
			er, err = ers.Get(ctx, r.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create ephemeralrunner %s/%s: %w", ns, r.Name, err)
	}
	err = writeStatus(ctx, transientPause, er,
		func() (*unstructured.Unstructured, error) { return ers.Get(ctx, r.Name, metav1.GetOptions{}) },
		func(er *unstructured.Unstructured) bool {
			phase, _, _ := unstructured.NestedString(er.Object, "status", "phase")
			return phase == "Running"
		},
		func(er *unstructured.Unstructured) error {
			if err := unstructured.SetNestedMap(er.Object, r.EphemeralRunnerStatus(), "status"); err != nil {
				return err
			}
			_, err := ers.UpdateStatus(ctx, er, metav1.UpdateOptions{FieldManager: "manager"})
			return err
		})
	if err != nil {
		return fmt.Errorf("write status of ephemeralrunner %s/%s: %w", ns, r.Name, err)
	}
	p := r.ARCPod
	p.OwnerUID = er.GetUID()
	pod, err := p.Pod(ns)
	if err != nil {
		return err
	}
	status := pod.Status
	pods := cs.CoreV1().Pods(ns)
	var created *corev1.Pod
	err = retryTransient(ctx, transientPause, func() (err error) {
		created, err = pods.Create(ctx, pod, metav1.CreateOptions{FieldManager: "manager"})
		if apierrors.IsAlreadyExists(err) {
			created, err = pods.Get(ctx, r.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, r.Name, err)
	}
	err = writeStatus(ctx, transientPause, created,
		func() (*corev1.Pod, error) { return pods.Get(ctx, r.Name, metav1.GetOptions{}) },
		func(p *corev1.Pod) bool { return p.Status.Phase == status.Phase },
		func(p *corev1.Pod) error {
			p.Status = status
			_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "kubelet"})
			return err
		})
	if err != nil {
		return fmt.Errorf("write status of pod %s/%s: %w", ns, r.Name, err)
	}
	return nil
}

// DeleteARCRunner retires a runner as ARC does once its job is done: its
// pod goes at once (a grace period of 0, the kubelet's confirmation that
// it stopped, which the test control plane has no kubelet to give), then
// its EphemeralRunner, and ARC's finalizers are dropped from it, as ARC's
// controller drops them once the runner has deregistered, so that it is
// gone rather than left deleting. Either may be gone already (the reaper
// deleted it); a transient error is retried as CreateARCRunner's are.
func DeleteARCRunner(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns, name string) error {
	now := int64(0)
	err := retryTransient(ctx, transientPause, func() error {
		return ignoreNotFound(cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &now}))
	})
	if err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	ers := dyn.Resource(EphemeralRunners).Namespace(ns)
	err = retryTransient(ctx, transientPause, func() error {
		return ignoreNotFound(ers.Delete(ctx, name, metav1.DeleteOptions{}))
	})
	if err != nil {
		return fmt.Errorf("delete ephemeralrunner %s/%s: %w", ns, name, err)
	}
	err = retryTransient(ctx, transientPause, func() error {
		_, err := ers.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{FieldManager: "manager"})
		return ignoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("drop the finalizers of ephemeralrunner %s/%s: %w", ns, name, err)
	}
	return nil
}

// ignoreNotFound is err, or nil when it says the object is gone.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// transientPause is the pause between two attempts of a write the API
// server answered with a transient error.
const transientPause = time.Second

// retryTransient runs write until it succeeds, fails for good, or has
// failed transiently five times, pause apart. A conflict is transient
// here: the write's object is read again before the next attempt.
func retryTransient(ctx context.Context, pause time.Duration, write func() error) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(pause):
			}
		}
		if err = write(); err == nil || !transient(err) {
			return err
		}
	}
	return err
}

// writeStatus sends a status write (update, which sets the status on the
// object and sends it) until one lands, unless the object already has it
// (written): an earlier attempt may have gone through though its answer
// was an error. After a failed attempt the object is read afresh before
// it is judged written, since update set the status on the local copy
// whether or not the server took it.
func writeStatus[T any](ctx context.Context, pause time.Duration, obj T, get func() (T, error), written func(T) bool, update func(T) error) error {
	fresh := true
	return retryTransient(ctx, pause, func() error {
		if !fresh {
			got, err := get()
			if err != nil {
				return err
			}
			obj, fresh = got, true
		}
		if written(obj) {
			return nil
		}
		fresh = false
		return update(obj)
	})
}

// transient reports whether the API server may take the same write a
// moment later.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err) ||
		strings.Contains(err.Error(), "request timed out")
}

// EphemeralRunnerStatus is the status ARC's EphemeralRunner controller
// writes once the runner has registered and its pod runs.
func (r ARCRunner) EphemeralRunnerStatus() map[string]any {
	return map[string]any{
		"phase":      "Running",
		"runnerId":   r.RunnerID,
		"runnerName": r.Name,
		"ready":      true,
	}
}

// EphemeralRunner is the EphemeralRunner to create in ns, as ARC v0.27.6's
// EphemeralRunnerSet controller builds it (newEphemeralRunner): the scale
// set's labels and annotations, both of ARC's finalizers, a controller
// reference to the EphemeralRunnerSet, and the EphemeralRunnerSet's spec,
// whose pod template is the pod's spec as the scale set's chart renders it
// in dind mode, before ARC adds the JIT config and the API server its
// defaults.
func (r ARCRunner) EphemeralRunner(ns string) *unstructured.Unstructured {
	if r.ScaleSet == "" {
		r.ScaleSet = ScaleSet
	}
	scaleSetID := r.ScaleSetID
	if scaleSetID == 0 {
		scaleSetID = 1
	}
	pod, _ := r.pod(ns)
	meta := pod["metadata"].(applied)
	labels := meta["labels"].(applied)
	// The pod's own: ARC adds them to the pod, not the EphemeralRunner.
	delete(labels, "actions-ephemeral-runner")
	delete(labels, "pod-template-hash")
	sum := sha256.Sum256([]byte(ns + "/" + r.ScaleSet))
	set := hex.EncodeToString(sum[:])
	setUID := fmt.Sprintf("%s-%s-%s-%s-%s", set[0:8], set[8:12], set[12:16], set[16:20], set[20:32])

	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       fleet.EphemeralRunnerKind,
		"metadata": map[string]any{
			"name":        r.Name,
			"namespace":   ns,
			"labels":      map[string]any(labels),
			"annotations": map[string]any(meta["annotations"].(applied)),
			"ownerReferences": []any{map[string]any{
				"apiVersion":         fleet.EphemeralRunnerAPIVersion,
				"kind":               "EphemeralRunnerSet",
				"name":               r.ScaleSet + "-" + set[:5],
				"uid":                setUID,
				"controller":         true,
				"blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"githubConfigUrl":    r.ConfigURL,
			"githubConfigSecret": r.ScaleSet + "-gha-rs-github-secret",
			"runnerScaleSetId":   scaleSetID,
			"metadata":           map[string]any{},
			"spec":               toPlain(podTemplate(pod["spec"].(applied))),
		},
	}}
	u.SetFinalizers(ARCFinalizers())
	return u
}

// podTemplate reduces a running pod's spec to the template it was made
// from: without what the scheduler (nodeName) and the API server's
// admission (the service account token's volume and mounts, the default
// tolerations) add, and without the JIT config ARC puts in the runner's
// environment from the runner's own secret.
func podTemplate(spec applied) applied {
	delete(spec, "nodeName")
	delete(spec, "tolerations")
	noToken := func(mounts any) []applied {
		return slices.DeleteFunc(slices.Clone(mounts.([]applied)), func(m applied) bool { return m["name"] == "kube-api-access" })
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range spec[list].([]applied) {
			c["volumeMounts"] = noToken(c["volumeMounts"])
			if env, ok := c["env"].([]applied); ok {
				c["env"] = slices.DeleteFunc(slices.Clone(env), func(e applied) bool { return e["name"] == "ACTIONS_RUNNER_INPUT_JITCONFIG" })
			}
		}
	}
	spec["volumes"] = noToken(spec["volumes"])
	return spec
}

// toPlain converts an apply configuration to the plain maps, slices and
// scalars an unstructured object holds (its deep copy panics on others),
// integers as int64.
func toPlain(v any) any {
	switch x := v.(type) {
	case applied:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = toPlain(e)
		}
		return out
	case []applied:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toPlain(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case int:
		return int64(x)
	default:
		return v
	}
}
