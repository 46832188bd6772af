package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The resources of ARC's runner objects; their group versions are the
// owner API versions fleet.Owner.ARCOwned accepts.
var (
	ephemeralRunners = resourceOf(fleet.EphemeralRunnerAPIVersion, "ephemeralrunners")
	legacyRunners    = resourceOf(fleet.LegacyRunnerAPIVersion, "runners")
)

func resourceOf(apiVersion, resource string) schema.GroupVersionResource {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		panic(fmt.Sprintf("kube: API version %q: %v", apiVersion, err))
	}
	return gv.WithResource(resource)
}

// ListEphemeralRunners lists ARC's EphemeralRunners in each namespace (all
// namespaces, in one list, when namespaces is empty) and returns their
// views. It reads them as ListPods reads pods: each namespace as one
// watch-list (see streamEphemeralRunners), and, where the API server gives
// none, that namespace and the rest of this call in pages of
// Options.PageSize, with a warning; the next call tries the watch-list
// again. A client that reads pods in pages only (Options.Pages, Compress:
// a watch is never compressed) reads these in pages only too. Either way
// each runner is decoded as it streams in (see ephemeralRunnerPage): at
// 100,000 runners, building each whole object as Unstructured was most of
// the list's time and garbage. The result is all or nothing: any failed
// page, an expired continue token included, fails the whole call, because
// a runner missing from the list would look podless or its pod's runner
// id unknown. pods, the views ListPods gave, are only read: a runner's view
// shares the name and UID strings of the pod that names it as its owner.
func (c *Client) ListEphemeralRunners(ctx context.Context, namespaces []string, pods []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	if readThroughWatch {
		return c.listEphemeralRunnersThroughWatch(ctx, namespaces)
	}
	memo := newListMemo(c.githubHost, pods)
	watchList := !c.pagesOnly
	ers, err := listNamespaces(ctx, "ephemeralrunners", namespaces, metav1.ListOptions{Limit: c.pageSize},
		func(ctx context.Context, ns string, opts metav1.ListOptions, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
			if opts.Continue == "" && watchList {
				got, err := c.streamEphemeralRunners(ctx, ns, memo, out)
				if !errors.Is(err, errNoWatchList) {
					return got, "", err
				}
				watchList = false
				c.log.Warn("ephemeralrunners listed in pages: the API server gave no watch-list",
					slog.String("namespace", ns), slog.String("error", err.Error()))
				out = got
			}
			return c.ephemeralRunnerPage(ctx, ns, opts, memo, out)
		}, memo.room())
	if err != nil {
		return nil, err
	}
	// A UID is one object's, whichever way the list was read: two runners
	// under one is no answer an API server gives, and the classifier ties a
	// pod to its runner, and its runner id, by it.
	if i, j, dup := duplicateUID(ers); dup {
		return nil, fmt.Errorf("list ephemeralrunners: two runners under UID %q (%s/%s and %s/%s): the list cannot be trusted",
			ers[i].UID, ers[i].Namespace, ers[i].Name, ers[j].Namespace, ers[j].Name)
	}
	return ers, nil
}

// duplicateUID finds two runners under one UID, by sorting their positions
// by UID: a set of the UIDs, made when the list is complete and the sweep
// holds the most, was 4 MB at 100,000 runners; the positions are 400 KB.
func duplicateUID(ers []fleet.EphemeralRunner) (i, j int, dup bool) {
	at := make([]int32, min(len(ers), math.MaxInt32))
	for k := range at {
		at[k] = int32(k)
	}
	slices.SortFunc(at, func(a, b int32) int { return cmp.Or(strings.Compare(ers[a].UID, ers[b].UID), cmp.Compare(a, b)) })
	for k := 1; k < len(at); k++ {
		if ers[at[k-1]].UID == ers[at[k]].UID {
			return int(at[k-1]), int(at[k]), true
		}
	}
	return 0, 0, false
}

// view reduces an EphemeralRunner to what the classifier needs. A runner
// ARC has not written a status for yet has empty status fields, not an
// error. The views live until the sweep has judged them, so what a fleet
// repeats (namespace, scope, phase, reason, the list of finalizers) is one
// copy all views share; o's own slice of finalizers is reused for the next
// item and never kept.
func (o *erObject) view(memo *listMemo) fleet.EphemeralRunner {
	s := &o.Status
	name, uid := memo.shared(o.Name, o.UID)
	v := fleet.EphemeralRunner{
		Namespace:       intern(o.Namespace),
		Name:            name,
		UID:             uid,
		ResourceVersion: o.ResourceVersion,
		ScopeKey:        memo.key(o.GitHubConfigURL),
		Phase:           intern(s.Phase),
		// GitHub's runner ids are positive; anything else knows none.
		RunnerID:      max(s.RunnerID, 0),
		CreatedAt:     fleet.StampOf(o.CreationTimestamp),
		Finalizers:    memo.sharedFinalizers(o.Finalizers),
		DeletingSince: fleet.StampOf(o.DeletionTimestamp),
	}
	if s.Reason != "" || s.Message != "" {
		v.Note = &fleet.StatusNote{Reason: intern(s.Reason), Message: s.Message}
	}
	v.Job = arcJob(s)
	return v
}

// arcJob is the job ARC's listener recorded on the status when the job
// started on the runner (v0.27.6 autoScalerKubernetesManager.go:
// jobRequestId, jobRepositoryName as OWNER/REPO, workflowRunId,
// jobDisplayName; newer ARC adds jobId). Nil when none is recorded. A
// recorded job that does not say enough to ask GitHub about it (a
// repository not of the form OWNER/REPO, no run) is kept, not known
// (fleet.Job.Known): ARC says a job ran, and the reaper may not act as if
// none had.
func arcJob(s *erStatus) *fleet.Job {
	request := s.JobRequestID
	repo := s.JobRepositoryName
	run := s.WorkflowRunID
	if request <= 0 && repo == "" && run <= 0 {
		return nil
	}
	j := &fleet.Job{Name: s.JobDisplayName, RequestID: max(request, 0)}
	if ref, err := fleet.ParseJobRef(repo + "/" + strconv.FormatInt(run, 10)); err == nil {
		// A fleet's jobs come from a few repositories.
		j.Owner, j.Repo, j.RunID = intern(ref.Owner), intern(ref.Repo), ref.RunID
	}
	// jobId is a string in the CRD; only a plain positive decimal can be
	// the REST job id the check asks for.
	if id := s.JobID; id != "" {
		if ref, err := fleet.ParseJobRef("o/r/1/" + id); err == nil {
			j.JobID = ref.JobID
		}
	}
	return j
}

// nestedInt64 reads an integer field, 0 when it is missing or not a whole
// number. JSON decoding gives int64 for integers; a float64 is accepted in
// case a writer sent 1.0.
func nestedInt64(obj map[string]any, fields ...string) int64 {
	if n, found, err := unstructured.NestedInt64(obj, fields...); err == nil && found {
		return n
	}
	if f, found, err := unstructured.NestedFloat64(obj, fields...); err == nil && found && f == float64(int64(f)) {
		return int64(f)
	}
	return 0
}

// scopeKeyOfConfigURL is the Scope.Key of an EphemeralRunner's
// spec.githubConfigUrl, read as ARC reads it (actions.ParseGitHubConfigFromURL):
// on any host, github.com or GHES, the path "/ORG" is an organization,
// "/enterprises/SLUG" an enterprise and "/OWNER/REPO" a repository,
// trailing slashes aside. Anything else, including a URL without an http(s)
// scheme and host, or on a host other than githubHost (when set), is "": a
// runner with no scope is never judged against a runner list that is not
// its own.
func scopeKeyOfConfigURL(raw, githubHost string) string {
	u, err := url.Parse(strings.Trim(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	if githubHost != "" && fleet.WebHost(u.Scheme, u.Host) != fleet.WebHost(u.Scheme, githubHost) {
		return "" // another GitHub: see Options.GitHubHost
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var s fleet.Scope
	switch {
	case len(parts) == 1:
		s = fleet.Scope{Kind: fleet.OrgScope, Name: parts[0]}
	case len(parts) == 2 && strings.EqualFold(parts[0], "enterprises"):
		s = fleet.Scope{Kind: fleet.EnterpriseScope, Name: parts[1]}
	case len(parts) == 2:
		s = fleet.Scope{Kind: fleet.RepoScope, Owner: parts[0], Name: parts[1]}
	default:
		return ""
	}
	// ParseScope's rule for a name, so that every key made here is one a
	// configured scope can have.
	if parsed, err := fleet.ParseScope(s.String()); err != nil || parsed != s {
		return ""
	}
	return s.Key()
}

// DeleteOwner deletes the ARC runner object that controls a pod, an
// EphemeralRunner or a legacy Runner, instead of the pod: deleting the pod
// alone would have ARC recreate it from the same dead runner config. The
// delete holds to the owner reference's UID, so an object recreated under
// the same name since is not touched (Changed). Any other kind of owner is
// refused without a request.
func (c *Client) DeleteOwner(ctx context.Context, namespace string, o fleet.Owner) (fleet.Result, error) {
	what := verb("delete", c.dryRun) + " owner"
	if !o.ARCOwned() {
		return "", fmt.Errorf("%s %s %s %s/%s: not an ARC runner (%s %s or %s %s), refusing",
			what, o.APIVersion, o.Kind, namespace, o.Name,
			fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind, fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind)
	}
	if namespace == "" || o.Name == "" || o.UID == "" {
		return "", fmt.Errorf("%s %s %s/%s: no namespace, name or UID to hold the delete to, refusing an unconditional delete", what, o.Kind, namespace, o.Name)
	}
	gvr := ephemeralRunners
	if o.Kind == fleet.LegacyRunnerKind {
		gvr = legacyRunners
	}
	uid := types.UID(o.UID)
	res, err := c.deleteARC(ctx, gvr, namespace, o.Name, &metav1.Preconditions{UID: &uid})
	if err != nil {
		return "", fmt.Errorf("%s %s %s/%s: %w", what, o.Kind, namespace, o.Name, err)
	}
	return res, nil
}

// DeleteEphemeralRunner deletes an EphemeralRunner only if it is still the
// object that was judged: same UID and same resourceVersion. A failed
// precondition is Changed, a skip for this sweep.
func (c *Client) DeleteEphemeralRunner(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	what := verb("delete", c.dryRun) + " ephemeralrunner"
	pre, err := judged(what, er.Namespace, er.Name, er.UID, er.ResourceVersion)
	if err != nil {
		return "", err
	}
	res, err := c.deleteARC(ctx, ephemeralRunners, er.Namespace, er.Name, pre)
	if err != nil {
		return "", fmt.Errorf("%s %s/%s: %w", what, er.Namespace, er.Name, err)
	}
	return res, nil
}

// deleteARC deletes one ARC object under the preconditions and maps the
// answer to a result. Propagation is background, as for any custom
// resource, said out loud: the object's pod must go with it.
func (c *Client) deleteARC(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, pre *metav1.Preconditions) (fleet.Result, error) {
	background := metav1.DeletePropagationBackground
	err := c.dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions:     pre,
		PropagationPolicy: &background,
		DryRun:            dryRunOption(c.dryRun),
	})
	return result(err)
}

// RemoveFinalizers removes ARC's own finalizers (fleet.IsARCFinalizer), by
// name and no other, from an EphemeralRunner that is stuck deleting, so
// that the API server can finish the deletion once nothing else holds it.
// Another controller's finalizer guards that controller's own cleanup:
// removing it would leak what that controller manages, so it stays, and
// the object with it. It is a JSON merge patch that writes the observed
// finalizers less ARC's and carries the observed resourceVersion, so it
// applies only to the object as it was judged, whose finalizers are the
// ones observed: anything written since (ARC's controller coming back,
// another controller, a recreated object) is Changed. Only a view that
// was already deleting is accepted; removing the finalizers of a live
// EphemeralRunner would skip ARC's cleanup of its runner. A view that
// holds none of ARC's finalizers changes nothing and sends nothing:
// AlreadyGone.
func (c *Client) RemoveFinalizers(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	what := verb("remove", c.dryRun) + " ARC's finalizers of ephemeralrunner"
	if er.ResourceVersion == "" {
		return "", fmt.Errorf("%s %s/%s: the view has no resourceVersion to hold the patch to, refusing an unconditional patch", what, er.Namespace, er.Name)
	}
	if er.DeletingSince.IsZero() {
		return "", fmt.Errorf("%s %s/%s: it was not being deleted when observed, refusing", what, er.Namespace, er.Name)
	}
	keep := fleet.ForeignFinalizers(er.Finalizers)
	if len(keep) == len(er.Finalizers) {
		return fleet.AlreadyGone, nil
	}
	if keep == nil {
		keep = []string{}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"finalizers":      keep,
			"resourceVersion": er.ResourceVersion,
		},
	})
	if err != nil {
		return "", fmt.Errorf("%s %s/%s: %w", what, er.Namespace, er.Name, err)
	}
	_, err = c.dyn.Resource(ephemeralRunners).Namespace(er.Namespace).Patch(ctx, er.Name, types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRunOption(c.dryRun)})
	res, err := result(err)
	if err != nil {
		return "", fmt.Errorf("%s %s/%s: %w", what, er.Namespace, er.Name, err)
	}
	return res, nil
}

// ReleaseRegistration removes ARC's runner-registration finalizer, and no
// other, from an EphemeralRunner being deleted (see
// fleet.ARCRegistrationFinalizer), so that ARC's controller goes on to
// delete the pod and the JIT secret. It reads the object (one GET) to find
// the finalizer's places, then sends a JSON patch that tests the UID, the
// runner id the proof was about (status.runnerId) and the finalizer at each
// place before removing it (every copy: the API server keeps duplicates,
// and ARC would wait on any one left). A patch whose tests fail because
// the object moved under it is read once more; an object recreated under
// the name, or now holding another runner, is Changed. A live
// EphemeralRunner is refused: without the finalizer, ARC would not remove
// its runner when it is deleted later. As a dry run (the pre-flight) the
// object need not be deleting yet, since the delete that comes first is
// not made either.
func (c *Client) ReleaseRegistration(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	what := verb("release the registration finalizer of", c.dryRun) + " ephemeralrunner"
	if er.Namespace == "" || er.Name == "" || er.UID == "" || er.RunnerID == 0 {
		return "", fmt.Errorf("%s %s/%s: no namespace, name, UID or runner id to hold the patch to, refusing", what, er.Namespace, er.Name)
	}
	res := c.dyn.Resource(ephemeralRunners).Namespace(er.Namespace)
	for attempt := 0; ; attempt++ {
		u, err := res.Get(ctx, er.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fleet.AlreadyGone, nil
		}
		if err != nil {
			return "", fmt.Errorf("%s %s/%s: read it: %w", what, er.Namespace, er.Name, err)
		}
		if string(u.GetUID()) != er.UID || nestedInt64(u.Object, "status", "runnerId") != er.RunnerID {
			return fleet.Changed, nil
		}
		if u.GetDeletionTimestamp() == nil && !c.dryRun {
			return "", fmt.Errorf("%s %s/%s: it is not being deleted, refusing: ARC would not remove its runner when it is", what, er.Namespace, er.Name)
		}
		ops := []map[string]any{
			{"op": "test", "path": "/metadata/uid", "value": er.UID},
			{"op": "test", "path": "/status/runnerId", "value": er.RunnerID},
		}
		fins := u.GetFinalizers()
		for i := len(fins) - 1; i >= 0; i-- {
			if fins[i] == fleet.ARCRegistrationFinalizer {
				path := fmt.Sprintf("/metadata/finalizers/%d", i)
				ops = append(ops, map[string]any{"op": "test", "path": path, "value": fins[i]}, map[string]any{"op": "remove", "path": path})
			}
		}
		if len(ops) == 2 {
			return fleet.AlreadyGone, nil
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return "", fmt.Errorf("%s %s/%s: %w", what, er.Namespace, er.Name, err)
		}
		_, err = res.Patch(ctx, er.Name, types.JSONPatchType, patch, metav1.PatchOptions{DryRun: dryRunOption(c.dryRun)})
		switch {
		case err == nil:
			return fleet.Deleted, nil
		case apierrors.IsNotFound(err):
			return fleet.AlreadyGone, nil
		case apierrors.IsInvalid(err) && c.moved(ctx, er, u.GetResourceVersion()):
			// A failed test: the object moved under the patch (ARC
			// dropped a finalizer, wrote its status). Read it again,
			// once; moving again is Changed.
			if attempt == 0 {
				continue
			}
			return fleet.Changed, nil
		default:
			// Any other refusal, a 422 from validation included, is an
			// error: the finalizer is still there.
			return "", fmt.Errorf("%s %s/%s: %w", what, er.Namespace, er.Name, err)
		}
	}
}

// moved reports whether the EphemeralRunner is no longer at the
// resourceVersion read: what tells a JSON patch's failed test (the object
// changed under it) from any other 422.
func (c *Client) moved(ctx context.Context, er fleet.EphemeralRunner, rv string) bool {
	u, err := c.dyn.Resource(ephemeralRunners).Namespace(er.Namespace).Get(ctx, er.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && u.GetResourceVersion() != rv)
}
