package fleet

import "context"

// Writes are the Kubernetes writes of an action, one method each. The choke
// point holds two of them: the one that writes, and the same wrapped so
// that every write is sent as a server-side dry run (kube.Client.DryRun),
// which answers as the write would (Deleted meaning "would be allowed",
// AlreadyGone, Changed, or the refusal) and changes nothing. That second
// one is the pre-flight: one seam for "check, then do", as
// controller-runtime's client.NewDryRunClient wraps a client. The choke
// point (reap) is where it is used, but it lives here because the adapter
// names it too: kube.Client.DryRun returns it, and Go matches a method only
// on a result type that both sides can name.
type Writes interface {
	DeletePod(ctx context.Context, p Pod) (Result, error)
	DeleteServiceAccount(ctx context.Context, namespace, name string) (Result, error)
	// DeleteOwner removes the ARC runner object that controls a pod: its
	// controller would recreate a pod deleted on its own, from a runner
	// config that is already dead.
	DeleteOwner(ctx context.Context, namespace string, o Owner) (Result, error)
	DeleteEphemeralRunner(ctx context.Context, er EphemeralRunner) (Result, error)
	RemoveFinalizers(ctx context.Context, er EphemeralRunner) (Result, error)
	// ReleaseRegistration removes ARCRegistrationFinalizer, and nothing
	// else, from an EphemeralRunner being deleted whose registration is
	// known to be gone, so that ARC finishes the deletion: Deleted when
	// it was removed, AlreadyGone when the object or the finalizer is not
	// there any more, Changed when the object is not the one judged.
	ReleaseRegistration(ctx context.Context, er EphemeralRunner) (Result, error)
}

// Result is one word of the act protocol. A write answers with one of the
// first four (what the adapters return), and a candidate ends with one of
// them or of the rest (what the report prints). One set, so that a word
// such as "deleted" means the same in every field of every line.
type Result string

const (
	// Deleted: GitHub answered 204, or Kubernetes accepted the delete.
	Deleted Result = "deleted"
	// AlreadyGone: 404; someone else got there first. Success.
	AlreadyGone Result = "already-gone"
	// Busy: GitHub answered 422, the runner is running a job.
	Busy Result = "busy"
	// Changed: a Kubernetes precondition (UID or resourceVersion) failed;
	// the object is not the one that was judged.
	Changed Result = "changed"

	// SparedBusy: GitHub said the runner took a job (a 422, or a re-check
	// that found it busy); the pod is left alone and its mark cleared.
	SparedBusy Result = "spared-busy"
	// SkippedChanged: the object was replaced or changed since it was
	// observed; it is not the one that was judged.
	SkippedChanged Result = "skipped-changed"
	// SkippedRegistered: the runner was absent from the list, but a
	// re-check by name just before acting found it registered.
	SkippedRegistered Result = "skipped-registered"
	// WouldDelete: a dry run or audit reached the first write.
	WouldDelete Result = "would-delete"
	// Deferred: the bound was reached; the mark stays for a later sweep.
	Deferred Result = "deferred"
	// NotReached: the sweep's deadline came first.
	NotReached Result = "not-reached"
	// Reported: an EphemeralRunner stuck deleting, whose finalizers the
	// reaper is not allowed to remove; it takes no place in the bound.
	Reported Result = "reported"
	// AlreadyDeleting: the object to delete was being deleted already when
	// it was observed, by ARC or anyone else; deleting it again would
	// change nothing, so nothing is written and it takes no place in the
	// bound. If it stays deleting, it comes back as arc-stuck-deleting.
	AlreadyDeleting Result = "already-deleting"
	// RateLimited: the candidate needs a GitHub call and GitHub has said
	// rate-limited in this sweep; nothing was written for it, its mark
	// stays, and a later sweep takes it up. Not a failure.
	RateLimited Result = "rate-limited"
	// ProtectedJob: GitHub said the job the runner is known to have held
	// is queued or in progress on it. Whatever busy and status said, the
	// runner is left alone, its mark cleared, and it takes no place in
	// the bound.
	ProtectedJob Result = "protected-job"
	// JobUnchecked: a job is known for the runner and GitHub could not be
	// asked about it (the check failed, or the record names no job that
	// can be asked about). Not evidence either way: nothing is written,
	// the mark stays, and the sweep says so (exit 3).
	JobUnchecked Result = "job-unchecked"
	// LoopHeld: the candidate's group is in a reap loop (the same
	// template reaped again and again for the same failure), and one of
	// its runners whose verdict needs confirmation has acted in this
	// sweep already: nothing is written, the mark stays, and a later
	// sweep takes it up. Not done, and not a failure.
	LoopHeld Result = "loop-held"
	// Failed: an action could not be carried out; reap.Outcome.Err says why.
	Failed Result = "error"
)
