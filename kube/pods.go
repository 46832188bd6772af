package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ListPods lists the pods matching selector in each namespace (all
// namespaces, in one list, when namespaces is empty) and returns their views.
// Each namespace is read as one watch-list (see streamPods); where the API
// server gives none, that namespace and the rest of this call are read in
// pages of Options.PageSize, with a warning. The next call tries the
// watch-list again: a Lambda keeps its Client from sweep to sweep, and one
// stream cut short must not cost it the watch-list until its next cold
// start. Either way each pod is reduced to its view as it arrives and then
// dropped, so memory follows one pod or one page, not the fleet. The result
// is all or nothing: a partial pod list would make the registrations of the
// missing pods look like ghosts, so any failed page, an expired continue
// token included, fails the whole call.
func (c *Client) ListPods(ctx context.Context, namespaces []string, selector string, m Mapping) ([]fleet.Pod, error) {
	if readThroughWatch {
		return c.listPodsThroughWatch(ctx, namespaces, selector, m)
	}
	opts := metav1.ListOptions{LabelSelector: selector, Limit: c.pageSize}
	watchList := !c.pagesOnly
	var vs views
	// The views go to vs, not through listNamespaces' slice, which stays
	// empty: see views.
	_, err := listNamespaces(ctx, "pods", namespaces, opts,
		func(ctx context.Context, ns string, opts metav1.ListOptions, _ []struct{}) ([]struct{}, string, error) {
			if opts.Continue == "" && watchList {
				err := c.streamPods(ctx, ns, selector, m, &vs)
				if !errors.Is(err, errNoWatchList) {
					return nil, "", err
				}
				watchList = false
				c.log.Warn("pods listed in pages: the API server gave no watch-list",
					slog.String("namespace", ns), slog.String("error", err.Error()))
			}
			list, err := c.cs.listPods(ctx, ns, opts)
			if err != nil {
				return nil, "", err
			}
			for i := range list.Items {
				vs.add(m.View(&list.Items[i]))
			}
			return nil, list.Continue, nil
		}, nil)
	if err != nil {
		return nil, err
	}
	pods := vs.all()
	// The blocks are garbage now, and a collection may have run while they
	// and their copy were both live: the collector would then pace the
	// rest of the sweep (the EphemeralRunners' 0.9 GB of JSON at 100,000
	// runners) from a heap twice the views' size above what is live. One
	// collection here, of what is live, paces it from the truth.
	runtime.GC()
	return pods, nil
}

// DeletePod deletes the pod only if it is still the object that was judged:
// same UID (not a new pod under the old name) and same resourceVersion (not
// stamped, relabelled or otherwise changed since). A failed precondition is
// Changed, a skip for this sweep, not an error.
func (c *Client) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	what := verb("delete", c.dryRun) + " pod"
	pre, err := judged(what, p.Namespace, p.Name, p.UID, p.ResourceVersion)
	if err != nil {
		return "", err
	}
	err = c.cs.pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: pre, DryRun: dryRunOption(c.dryRun)})
	res, err := result(err)
	if err != nil {
		return "", fmt.Errorf("%s %s/%s: %w", what, p.Namespace, p.Name, err)
	}
	return res, nil
}

// DeleteServiceAccount deletes the ServiceAccount a bare runner pod was
// given, once the pod is gone. It is deleted by name alone: it carries no
// state the reaper judged.
func (c *Client) DeleteServiceAccount(ctx context.Context, namespace, name string) (fleet.Result, error) {
	err := c.cs.serviceAccounts(namespace).Delete(ctx, name, metav1.DeleteOptions{DryRun: dryRunOption(c.dryRun)})
	res, err := result(err)
	if err != nil {
		return "", fmt.Errorf("%s service account %s/%s: %w", verb("delete", c.dryRun), namespace, name, err)
	}
	return res, nil
}

// judged holds a delete to the object as it was judged, its UID and
// resourceVersion, and refuses a delete that could not be held to them:
// an unconditional delete could take an object nobody judged.
func judged(what, namespace, name, uid, resourceVersion string) (*metav1.Preconditions, error) {
	if uid == "" || resourceVersion == "" {
		return nil, fmt.Errorf("%s %s/%s: the view has no UID or resourceVersion to hold the delete to, refusing an unconditional delete", what, namespace, name)
	}
	u := types.UID(uid)
	return &metav1.Preconditions{UID: &u, ResourceVersion: &resourceVersion}, nil
}
