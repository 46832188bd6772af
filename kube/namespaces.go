package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// UnobservedNamespaces returns the named namespaces that pods, the result of
// ListPods over namespaces, cannot vouch for. A pod list of a namespace that
// does not exist is an empty list, not an error, so an empty namespace is
// checked: a misspelt name would otherwise pass for one without runners and
// make every registration look like a ghost. A namespace that listed a pod
// evidently exists and costs nothing more; all namespaces (an empty list)
// need no check.
//
// The check is a server-side dry-run create of an Event there, which the
// reaper's Role already allows (it records Events) and which stores nothing:
// the API server's NamespaceLifecycle admission answers 404 for a namespace
// that does not exist and refuses one that is being terminated. Whatever
// refuses the check (RBAC, a webhook, a timeout) leaves the namespace
// unobserved too, with the reason.
func (c *Client) UnobservedNamespaces(ctx context.Context, namespaces []string, pods []fleet.Pod) []fleet.UnobservedNamespace {
	seen := make(map[string]bool, len(namespaces))
	for _, p := range pods {
		seen[p.Namespace] = true
	}
	var out []fleet.UnobservedNamespace
	for _, ns := range namespaces {
		if ns == metav1.NamespaceAll || seen[ns] {
			continue
		}
		seen[ns] = true
		if err := c.namespaceExists(ctx, ns); err != nil {
			out = append(out, fleet.UnobservedNamespace{Namespace: ns, Reason: err.Error()})
		}
	}
	return out
}

// namespaceExists proves that ns exists (and accepts new objects) with one
// dry-run Event create. The Event names a pod in ns only because an Event
// must point at an object of its own namespace; being a dry run, it is
// never stored and the pod need not exist.
func (c *Client) namespaceExists(ctx context.Context, ns string) error {
	obj := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: c.component + "-namespace-check"}
	ev := c.event(obj, corev1.EventTypeNormal, "NamespaceCheck", "dry run: does the namespace exist")
	_, err := c.cs.events(ns).Create(ctx, ev, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("namespace %s does not exist: %w", ns, err)
	default:
		return fmt.Errorf("check that namespace %s exists (dry-run create of an event): %w", ns, err)
	}
}
