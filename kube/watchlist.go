package kube

import (
	"context"
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// errNoWatchList is wrapped by streamPods' error when the API server did
// not give a complete watch-list (it refused the request, the reaper may
// not watch pods, or the stream ended or broke the contract before its
// end bookmark). The caller lists the pods in pages instead; nothing the
// stream delivered is kept.
var errNoWatchList = errors.New("pod watch-list unavailable")

// streamPods reads one namespace's pods (all namespaces' for "") as a
// watch-list (KEP-3157): one watch request with sendInitialEvents and
// resourceVersionMatch=NotOlderThan and no resourceVersion, which the API
// contract makes a consistent read, answered from the API server's watch
// cache once that cache has caught up with etcd. The pods arrive one
// event at a time and each is reduced to its view and dropped, so neither
// side holds the whole fleet: over 10,000 ARC runner pods it took half the
// time of 40 consistent pages, each of which the API server reads from
// etcd and decodes again.
//
// The stream counts as complete only at the bookmark annotated
// k8s.io/initial-events-end. Anything else before it (an ERROR event, a
// change event, an object that is not a pod, the stream closing) discards
// what arrived and returns errNoWatchList, so a server that does not keep
// the contract costs a page list, never a partial one.
func (c *Client) streamPods(ctx context.Context, ns, selector string, m Mapping, out []reconcile.Pod) ([]reconcile.Pod, error) {
	start := len(out)
	send := true
	opts := metav1.ListOptions{
		LabelSelector:        selector,
		SendInitialEvents:    &send,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		// The server ends the watch no later than the client would.
		TimeoutSeconds: ptr.To(int64(math.Ceil(c.timeout.Seconds()))),
	}
	w, err := c.cs.pods(ns).Watch(ctx, opts)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrTimeout) {
			return out[:start], err
		}
		return out[:start], fmt.Errorf("%w: %w", errNoWatchList, err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return out[:start], ctx.Err()
		case ev, open = <-w.ResultChan():
		}
		if !open {
			if ctx.Err() != nil {
				return out[:start], ctx.Err()
			}
			return out[:start], fmt.Errorf("%w: the stream ended before its initial-events-end bookmark", errNoWatchList)
		}
		switch ev.Type {
		case watch.Added:
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return out[:start], fmt.Errorf("%w: an ADDED event held a %T, not a pod", errNoWatchList, ev.Object)
			}
			out = append(out, m.View(p))
		case watch.Bookmark:
			p, ok := ev.Object.(*corev1.Pod)
			if ok && p.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				return out, nil
			}
		case watch.Error:
			return out[:start], fmt.Errorf("%w: %w", errNoWatchList, apierrors.FromObject(ev.Object))
		default:
			// Before its end bookmark a watch-list sends only the
			// current objects, as ADDED events.
			return out[:start], fmt.Errorf("%w: a %s event before the initial-events-end bookmark", errNoWatchList, ev.Type)
		}
	}
}
