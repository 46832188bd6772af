package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ARCPod is a running runner pod of an ARC scale set in dind mode, with
// every field ARC's EphemeralRunner controller and a kubelet leave on it: the
// runner container with its environment (a JIT config of a few kilobytes
// among it), the init container that copies the runner's externals, the
// dind sidecar, their volumes, ARC's labels and annotations, the controller
// reference to its EphemeralRunner, and a full running status. Benchmarks
// build their fleets from it so that what they measure is paid per pod of
// the size a real one has (about 9 KB in JSON with managed fields), not per
// skeleton.
type ARCPod struct {
	// Name is the pod's name, as its EphemeralRunner's.
	Name string
	// Org is the organization the scale set registers in.
	Org string
	// ScaleSet is the scale set's name; empty is ScaleSet.
	ScaleSet string
	// Started is when the pod was scheduled and its containers started;
	// zero is now.
	Started time.Time
	// OwnerUID is the UID of the EphemeralRunner that controls it, for a
	// fleet that creates the EphemeralRunners too (see ARCRunner); empty
	// is one derived from the name, for a pod whose owner does not exist.
	OwnerUID types.UID
}

// jitConfigSize is the length of the encoded JIT config in the runner's
// environment: GitHub's are base64 JSON of 2.5 to 4 KB.
const jitConfigSize = 3200

// ApplyARCPod creates the pod with server-side apply, as field manager
// "manager" (ARC's controller), then applies its status on the status
// subresource as "kubelet", so that the stored object carries both managed
// field sets as a real one does. It returns the pod as last answered.
func ApplyARCPod(ctx context.Context, cs kubernetes.Interface, ns string, p ARCPod) (*corev1.Pod, error) {
	if p.ScaleSet == "" {
		p.ScaleSet = ScaleSet
	}
	if p.Started.IsZero() {
		p.Started = time.Now()
	}
	spec, status := p.pod(ns)
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s: %w", ns, p.Name, err)
	}
	force := true
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Patch(ctx, p.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "manager", Force: &force}); err != nil {
		return nil, fmt.Errorf("apply pod %s/%s: %w", ns, p.Name, err)
	}
	body, err = json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encode status of pod %s/%s: %w", ns, p.Name, err)
	}
	applied, err := pods.Patch(ctx, p.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kubelet", Force: &force}, "status")
	if err != nil {
		return nil, fmt.Errorf("apply status of pod %s/%s: %w", ns, p.Name, err)
	}
	return applied, nil
}

// Pod is the pod as a typed object, metadata, spec and status, for a
// fleet created with plain creates (and a status update) rather than
// applied: the same fields as ApplyARCPod's, sent in protobuf, which the
// API server decodes several times faster than an apply's JSON.
func (p ARCPod) Pod(ns string) (*corev1.Pod, error) {
	if p.ScaleSet == "" {
		p.ScaleSet = ScaleSet
	}
	if p.Started.IsZero() {
		p.Started = time.Now()
	}
	spec, status := p.pod(ns)
	var pod corev1.Pod
	for _, part := range []applied{spec, status} {
		b, err := json.Marshal(part)
		if err != nil {
			return nil, fmt.Errorf("encode pod %s/%s: %w", ns, p.Name, err)
		}
		// Into the same object: the status part adds its status to
		// the spec part's metadata and spec.
		if err := json.Unmarshal(b, &pod); err != nil {
			return nil, fmt.Errorf("decode pod %s/%s: %w", ns, p.Name, err)
		}
	}
	return &pod, nil
}

// applied is an apply configuration: only the fields set are sent, so no
// zero value (a null creationTimestamp, an empty status) is claimed.
type applied map[string]any

// pod returns the two apply configurations of the pod: the controller's
// (metadata and spec) and the kubelet's (status).
func (p ARCPod) pod(ns string) (applied, applied) {
	sum := sha256.Sum256([]byte(p.Name))
	id := hex.EncodeToString(sum[:])
	ownerUID := fmt.Sprintf("%s-%s-%s-%s-%s", id[0:8], id[8:12], id[12:16], id[16:20], id[20:32])
	if p.OwnerUID != "" {
		ownerUID = string(p.OwnerUID)
	}
	started := p.Started.UTC().Format(time.RFC3339)
	node := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", sum[0], sum[1])
	podIP := fmt.Sprintf("10.1.%d.%d", sum[2], sum[3])

	externals := applied{"name": "dind-externals", "mountPath": "/home/runner/externals"}
	work := applied{"name": "work", "mountPath": "/home/runner/_work"}
	sock := applied{"name": "dind-sock", "mountPath": "/var/run"}
	token := applied{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
	runnerImage := "ghcr.io/actions/actions-runner:2.321.0"
	dindImage := "docker:27.3.1-dind"

	spec := applied{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": applied{
			"name":      p.Name,
			"namespace": ns,
			"labels": applied{
				"actions-ephemeral-runner":               "True",
				"actions.github.com/organization":        p.Org,
				"actions.github.com/scale-set-name":      p.ScaleSet,
				"actions.github.com/scale-set-namespace": ns,
				"app.kubernetes.io/component":            "runner",
				"app.kubernetes.io/part-of":              "gha-runner-scale-set",
				"app.kubernetes.io/managed-by":           "Helm",
				"app.kubernetes.io/name":                 p.ScaleSet,
				"app.kubernetes.io/instance":             p.ScaleSet,
				"app.kubernetes.io/version":              "0.10.1",
				"helm.sh/chart":                          "gha-rs-0.10.1",
				"pod-template-hash":                      id[32:42],
			},
			"annotations": applied{
				"actions.github.com/patch-id":              "2",
				"actions.github.com/runner-group-name":     "Default",
				"actions.github.com/runner-scale-set-name": p.ScaleSet,
				"actions.github.com/runner-spec-hash":      id[42:54],
				"actions.github.com/values-hash":           id[:40],
			},
			"ownerReferences": []applied{{
				"apiVersion":         "actions.github.com/v1alpha1",
				"kind":               "EphemeralRunner",
				"name":               p.Name,
				"uid":                ownerUID,
				"controller":         true,
				"blockOwnerDeletion": true,
			}},
		},
		"spec": applied{
			"restartPolicy":                 "Never",
			"serviceAccountName":            p.ScaleSet + "-gha-rs-no-permission",
			"nodeName":                      node,
			"terminationGracePeriodSeconds": 30,
			"securityContext":               applied{"fsGroup": 123},
			"initContainers": []applied{
				{
					"name":         "init-dind-externals",
					"image":        runnerImage,
					"command":      []string{"cp"},
					"args":         []string{"-r", "/home/runner/externals/.", "/home/runner/tmpDir/"},
					"volumeMounts": []applied{{"name": "dind-externals", "mountPath": "/home/runner/tmpDir"}, token},
				},
			},
			"containers": []applied{
				{
					"name":    "runner",
					"image":   runnerImage,
					"command": []string{"/home/runner/run.sh"},
					"env": []applied{
						{"name": "ACTIONS_RUNNER_INPUT_JITCONFIG", "value": jitConfig(p.Name)},
						{"name": "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT", "value": "actions-runner-controller/0.10.1"},
						{"name": "DOCKER_HOST", "value": "unix:///var/run/docker.sock"},
						{"name": "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "value": "120"},
						{"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": ""},
					},
					"resources": applied{
						"requests": applied{"cpu": "2", "memory": "4Gi"},
						"limits":   applied{"memory": "8Gi"},
					},
					"securityContext": applied{"allowPrivilegeEscalation": false, "runAsUser": 1001, "runAsGroup": 123},
					"volumeMounts":    []applied{work, sock, token},
				},
				{
					"name":  "dind",
					"image": dindImage,
					"args":  []string{"dockerd", "--host=unix:///var/run/docker.sock", "--group=$(DOCKER_GROUP_GID)"},
					"env": []applied{
						{"name": "DOCKER_GROUP_GID", "value": "123"},
					},
					"securityContext": applied{"privileged": true},
					"volumeMounts":    []applied{work, sock, externals, token},
				},
			},
			"volumes": []applied{
				{"name": "dind-sock", "emptyDir": applied{}},
				{"name": "dind-externals", "emptyDir": applied{}},
				{"name": "work", "emptyDir": applied{}},
				{"name": "kube-api-access", "projected": applied{
					"defaultMode": 420,
					"sources": []applied{
						{"serviceAccountToken": applied{"expirationSeconds": 3607, "path": "token"}},
						{"configMap": applied{"name": "kube-root-ca.crt", "items": []applied{{"key": "ca.crt", "path": "ca.crt"}}}},
						{"downwardAPI": applied{"items": []applied{{"path": "namespace", "fieldRef": applied{"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}}},
					},
				}},
			},
			"tolerations": []applied{
				{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
				{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
			},
		},
	}

	condition := func(kind string) applied {
		return applied{"type": kind, "status": "True", "lastTransitionTime": started}
	}
	running := func(name, image, digest string) applied {
		return applied{
			"name": name, "image": image, "imageID": image + "@sha256:" + digest,
			"containerID": "containerd://" + id[:16] + name,
			"ready":       true, "started": true, "restartCount": 0,
			"state": applied{"running": applied{"startedAt": started}},
		}
	}
	status := applied{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   applied{"name": p.Name, "namespace": ns},
		"status": applied{
			"phase":     "Running",
			"qosClass":  "Burstable",
			"hostIP":    "10.0.12.34",
			"hostIPs":   []applied{{"ip": "10.0.12.34"}},
			"podIP":     podIP,
			"podIPs":    []applied{{"ip": podIP}},
			"startTime": started,
			"conditions": []applied{
				condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
				condition("ContainersReady"), condition("PodScheduled"),
			},
			"initContainerStatuses": []applied{{
				"name": "init-dind-externals", "image": runnerImage, "imageID": runnerImage + "@sha256:" + id,
				"containerID": "containerd://" + id[:16] + "init", "ready": true, "restartCount": 0, "started": false,
				"state": applied{"terminated": applied{"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started,
					"containerID": "containerd://" + id[:16] + "init"}},
			}},
			"containerStatuses": []applied{
				running("dind", dindImage, id),
				running("runner", runnerImage, id),
			},
		},
	}
	return spec, status
}

// jitConfig is an encoded JIT config of jitConfigSize characters, distinct
// per runner as GitHub's are (they hold the runner's own credentials), so
// the API server stores and sends it as it would a real one.
func jitConfig(name string) string {
	raw := make([]byte, 0, jitConfigSize*3/4)
	seed := sha256.Sum256([]byte("jit/" + name))
	for len(raw) < cap(raw) {
		raw = append(raw, seed[:]...)
		seed = sha256.Sum256(seed[:])
	}
	return base64.StdEncoding.EncodeToString(raw[:jitConfigSize*3/4])
}
