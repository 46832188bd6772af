package kube

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// podItem is a pod's view as the stores hold it. It is a runtime.Object
// whose metadata (through meta.Accessor) is the view's namespace, name,
// UID and resourceVersion, because the reflector's own code reads items
// so: its temporary store of a watch-list holds them, and its data
// consistency check, when asked for (KUBE_WATCHLIST_INCONSISTENCY_DETECTOR),
// compares them with a list's, transformed, by that metadata. A copy is
// shallow: a view is never written once made.
type podItem struct{ fleet.Pod }

func (i *podItem) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: i.Namespace, Name: i.Name, UID: types.UID(i.UID), ResourceVersion: i.ResourceVersion}
}
func (i *podItem) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (i *podItem) DeepCopyObject() runtime.Object   { c := *i; return &c }

// erItem is podItem for an EphemeralRunner's view.
type erItem struct{ fleet.EphemeralRunner }

func (i *erItem) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: i.Namespace, Name: i.Name, UID: types.UID(i.UID), ResourceVersion: i.ResourceVersion}
}
func (i *erItem) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (i *erItem) DeepCopyObject() runtime.Object   { c := *i; return &c }

// podKind keeps each pod as m's view of it (Mapping.View, as ListPods).
func podKind(m Mapping) kind[fleet.Pod] {
	return kind[fleet.Pod]{
		transform: func(obj any) (any, error) {
			switch o := obj.(type) {
			case *podItem:
				return o, nil
			case *corev1.Pod:
				return &podItem{m.View(o)}, nil
			default:
				return nil, fmt.Errorf("a %T where a pod was expected", obj)
			}
		},
		view: func(it any) (*fleet.Pod, bool) {
			p, ok := it.(*podItem)
			if !ok {
				return nil, false
			}
			return &p.Pod, true
		},
		key: func(p *fleet.Pod) objKey { return objKey{p.Namespace, p.Name} },
	}
}

// erKind keeps each EphemeralRunner as the view ListEphemeralRunners
// makes of it (erObject.view). The watch's decoder hands over the item
// already made (erWatchDecoder); a list, where the API server gives no
// watch-list, comes through the dynamic client as Unstructured, read by
// readUnstructuredER. Its memo (scope keys and finalizer lists, shared by
// the views) is the feed's, the decoder's too, kept for as long as it
// runs; it holds no pods.
func erKind(memo *erMemo) kind[fleet.EphemeralRunner] {
	var mu sync.Mutex
	var o erObject
	return kind[fleet.EphemeralRunner]{
		transform: func(obj any) (any, error) {
			switch u := obj.(type) {
			case *erItem:
				return u, nil
			case *unstructured.Unstructured:
				mu.Lock()
				defer mu.Unlock()
				readUnstructuredER(u, &o)
				return &erItem{memo.view(&o)}, nil
			default:
				return nil, fmt.Errorf("a %T where an EphemeralRunner was expected", obj)
			}
		},
		view: func(it any) (*fleet.EphemeralRunner, bool) {
			e, ok := it.(*erItem)
			if !ok {
				return nil, false
			}
			return &e.EphemeralRunner, true
		},
		key: func(e *fleet.EphemeralRunner) objKey { return objKey{e.Namespace, e.Name} },
	}
}

// readUnstructuredER reads an EphemeralRunner into o as readER reads its
// JSON: each field by Unstructured's getters, a field of the wrong type
// zero. o's finalizers' array is not reused: GetFinalizers makes one.
func readUnstructuredER(u *unstructured.Unstructured, o *erObject) {
	obj := u.Object
	*o = erObject{
		APIVersion:        u.GetAPIVersion(),
		Kind:              u.GetKind(),
		Name:              u.GetName(),
		Namespace:         u.GetNamespace(),
		UID:               string(u.GetUID()),
		ResourceVersion:   u.GetResourceVersion(),
		CreationTimestamp: u.GetCreationTimestamp().Time,
		Finalizers:        u.GetFinalizers(),
		GitHubConfigURL:   nestedString(obj, "spec", "githubConfigUrl"),
		Status: erStatus{
			Phase:             nestedString(obj, "status", "phase"),
			Reason:            nestedString(obj, "status", "reason"),
			Message:           nestedString(obj, "status", "message"),
			RunnerID:          nestedInt64(obj, "status", "runnerId"),
			JobRequestID:      nestedInt64(obj, "status", "jobRequestId"),
			JobRepositoryName: nestedString(obj, "status", "jobRepositoryName"),
			JobDisplayName:    nestedString(obj, "status", "jobDisplayName"),
			WorkflowRunID:     nestedInt64(obj, "status", "workflowRunId"),
			JobID:             nestedString(obj, "status", "jobId"),
		},
	}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		o.DeletionTimestamp = ts.Time
	}
}

// nestedString reads a string field, "" when it is missing or not a
// string.
func nestedString(obj map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj, fields...)
	return s
}
