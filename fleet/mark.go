package fleet

import (
	"fmt"
	"time"
)

// Mark is a verdict the ledger remembers from an earlier sweep. A verdict
// that rests on what GitHub said acts only once its mark has held for
// confirm-after, so that one bad answer from GitHub never deletes anything.
type Mark struct {
	Verdict   Verdict   `json:"verdict"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// FirstSeenLocal is when the mark was first seen by the clock of the
	// machine that swept, where FirstSeen is by the reference clock (the
	// API server's). A mark is ready only when both say its hold has
	// passed, so that neither a lying Date nor a skewed machine alone can
	// hurry it (see reconcile.Clocks). Zero in a ledger written before it existed:
	// the mark's local hold then starts at the next sweep.
	FirstSeenLocal time.Time `json:"first_seen_local,omitzero"`
	// Scope is the Scope.Key the verdict was judged in: while that scope's
	// list cannot be read, the mark is neither confirmed nor cleared.
	Scope      string `json:"scope,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Pod        string `json:"pod,omitempty"`
	RunnerID   int64  `json:"runner_id,omitempty"`
	RunnerName string `json:"runner_name,omitempty"`
	// JobCheckedAt is when the job guard last asked about the runner's
	// job and got no answer it could act on (job-unchecked), by the
	// reference clock. The sweep's job checks are bounded, and go to the
	// candidates asked longest ago first, so that checks that fail for
	// good take their turn behind the others rather than ahead of them.
	JobCheckedAt time.Time `json:"job_checked_at,omitzero"`
}

// PodMarkKey is the ledger key of a pod's mark. UIDs, not names, because a
// pod recreated under the same name is a different pod.
func PodMarkKey(uid string) string { return "pod/" + uid }

// EphemeralRunnerMarkKey is the ledger key of an EphemeralRunner's mark.
func EphemeralRunnerMarkKey(uid string) string { return "er/" + uid }

// RegistrationMarkKey is the ledger key of a registration's mark.
func RegistrationMarkKey(scopeKey string, id int64) string {
	return fmt.Sprintf("reg/%s/%d", scopeKey, id)
}
