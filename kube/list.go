package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// result maps a write's answer to what the act protocol needs: 404 means
// someone else finished the job, a 409 means a precondition failed (the
// object is not the one that was judged). Any other error is returned as
// it is, for the caller to wrap.
func result(err error) (fleet.Result, error) {
	switch {
	case err == nil:
		return fleet.Deleted, nil
	case apierrors.IsNotFound(err):
		return fleet.AlreadyGone, nil
	case apierrors.IsConflict(err):
		return fleet.Changed, nil
	default:
		return "", err
	}
}

// page fetches one page of a list and converts its items as they arrive,
// so that the full objects of a page are dropped before the next is read.
type page[T any] func(ctx context.Context, ns string, opts metav1.ListOptions, out []T) ([]T, string, error)

// listNamespaces reads what (a resource's plural, for messages) in every
// namespace with one list, or in each distinct named namespace. An empty
// name beside named ones is refused before any request: it means all
// namespaces to the API and would return their objects twice. The items
// are appended to out, which may come with room for them.
func listNamespaces[T any](ctx context.Context, what string, namespaces []string, opts metav1.ListOptions, fetch page[T], out []T) ([]T, error) {
	if len(namespaces) == 0 {
		return listPages(ctx, what, metav1.NamespaceAll, opts, fetch, out)
	}
	for _, ns := range namespaces {
		if ns == "" {
			return nil, fmt.Errorf("list %s: empty namespace name in %q (leave the list empty for all namespaces)", what, namespaces)
		}
	}
	seen := make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		var err error
		if out, err = listPages(ctx, what, ns, opts, fetch, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listPages appends one namespace's (or, for "", the cluster's) items to
// out, page by page. A page that fails fails the whole list: a partial list
// would make the missing objects look absent. ResourceVersion stays unset,
// so each list is a consistent read, never a possibly stale cache.
func listPages[T any](ctx context.Context, what, ns string, opts metav1.ListOptions, fetch page[T], out []T) ([]T, error) {
	where := ns
	if ns == metav1.NamespaceAll {
		where = "all namespaces"
	}
	for n := 1; ; n++ {
		var cont string
		var err error
		out, cont, err = fetch(ctx, ns, opts, out)
		if err != nil {
			if opts.Continue != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
				return nil, fmt.Errorf("list %s in %s: continue token of page %d expired, refusing a partial list: %w", what, where, n, err)
			}
			return nil, fmt.Errorf("list %s in %s: %w", what, where, err)
		}
		if cont == "" {
			return out, nil
		}
		opts.Continue = cont
	}
}

// dryRunOption is the DryRun field of a write's options: every stage of
// the request runs, nothing is persisted.
func dryRunOption(dryRun bool) []string {
	if dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// verb names a write in error messages, saying when it was only a dry run,
// so that a refused pre-flight is not read as a refused delete.
func verb(v string, dryRun bool) string {
	if dryRun {
		return "dry-run " + v
	}
	return v
}
