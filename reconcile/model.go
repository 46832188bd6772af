// Package reconcile holds the pure heart of runner-reaper: what a sweep
// observed, how that is classified into verdicts, how verdicts are confirmed
// across sweeps, and the order in which they are allowed to act. Nothing here
// does I/O, so every decision the reaper makes can be tested as a table.
package reconcile

import (
	"fmt"
	"strings"
	"time"
)

// Verdict names one kind of leak. The strings are part of the log contract.
type Verdict string

const (
	Zombie        Verdict = "zombie"
	Unregistered  Verdict = "unregistered"
	OrphanStamped Verdict = "orphan-stamped"
	Terminal      Verdict = "terminal"
	Ghost         Verdict = "ghost"
	// ARCFailed: an EphemeralRunner in phase Failed for too long. ARC
	// counts it against the scale set's maximum, so it blocks capacity.
	ARCFailed Verdict = "arc-failed"
	// ARCPodless: an EphemeralRunner with no pod for too long, not being
	// deleted.
	ARCPodless Verdict = "arc-podless"
	// ARCStuckDeleting: an EphemeralRunner whose deletion has waited too
	// long on a finalizer nobody can satisfy any more.
	ARCStuckDeleting Verdict = "arc-stuck-deleting"
)

// Verdicts lists every verdict in the order the bound lets them act (as
// docs/design.md gives it): ARC's own leaks after the pod-level ones and
// before ghosts, which cost nothing but clutter.
var Verdicts = []Verdict{Terminal, OrphanStamped, Zombie, Unregistered, ARCFailed, ARCPodless, ARCStuckDeleting, Ghost}

// Priority is the verdict's rank in docs/design.md's act order; lower acts first.
func (v Verdict) Priority() int {
	for i, w := range Verdicts {
		if v == w {
			return i
		}
	}
	return len(Verdicts)
}

// ScopeKind is where a runner is registered on GitHub.
type ScopeKind string

const (
	RepoScope       ScopeKind = "repo"
	OrgScope        ScopeKind = "org"
	EnterpriseScope ScopeKind = "enterprise"
)

// Scope is one GitHub runner list: a repository, an organization or an
// enterprise. Owner is set only for repositories.
type Scope struct {
	Kind  ScopeKind
	Owner string
	Name  string
}

// ParseScope reads the configuration form: repo:OWNER/NAME, org:NAME or
// enterprise:SLUG. Every name must be one GitHub could have given: a name is
// placed into request paths, so "..", a slash or an escape must never get
// that far, whatever wrote it (configuration, a pod label, a ledger).
func ParseScope(s string) (Scope, error) {
	kind, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || rest == "" {
		return Scope{}, fmt.Errorf("scope %q is not KIND:NAME", s)
	}
	switch ScopeKind(kind) {
	case RepoScope:
		owner, name, ok := strings.Cut(rest, "/")
		if !ok {
			return Scope{}, fmt.Errorf("repository scope %q is not repo:OWNER/NAME", s)
		}
		if why := ownerProblem(owner); why != "" {
			return Scope{}, fmt.Errorf("repository scope %q: owner %s", s, why)
		}
		if why := repoProblem(name); why != "" {
			return Scope{}, fmt.Errorf("repository scope %q: repository name %s", s, why)
		}
		return Scope{Kind: RepoScope, Owner: owner, Name: name}, nil
	case OrgScope:
		if why := ownerProblem(rest); why != "" {
			return Scope{}, fmt.Errorf("organization scope %q: name %s", s, why)
		}
		return Scope{Kind: OrgScope, Name: rest}, nil
	case EnterpriseScope:
		if why := slugProblem(rest); why != "" {
			return Scope{}, fmt.Errorf("enterprise scope %q: slug %s", s, why)
		}
		return Scope{Kind: EnterpriseScope, Name: rest}, nil
	default:
		return Scope{}, fmt.Errorf("scope %q has unknown kind %q (want repo, org or enterprise)", s, kind)
	}
}

// maxNameLen bounds every name of a scope; GitHub's own limits are lower
// (39 for an account, 100 for a repository).
const maxNameLen = 100

// ownerProblem checks an organization or user name: letters, digits,
// hyphens and (for managed users) underscores, starting with a letter or
// digit. It says what is wrong, or "".
func ownerProblem(n string) string { return nameProblem(n, "-_", true) }

// repoProblem checks a repository name: letters, digits, '.', '-' and '_',
// but never the path segments "." or "..".
func repoProblem(n string) string {
	if n == "." || n == ".." {
		return fmt.Sprintf("%q is a path segment, not a repository", n)
	}
	return nameProblem(n, "-_.", false)
}

// slugProblem checks an enterprise slug: letters, digits and hyphens,
// starting with a letter or digit.
func slugProblem(n string) string { return nameProblem(n, "-", true) }

// nameProblem checks that n is 1 to maxNameLen letters, digits and the
// extra characters, starting with a letter or digit when leadAlnum.
func nameProblem(n, extra string, leadAlnum bool) string {
	switch {
	case n == "" || len(n) > maxNameLen:
		return fmt.Sprintf("must be 1 to %d characters", maxNameLen)
	case leadAlnum && !alnum(rune(n[0])):
		return "must start with a letter or digit"
	}
	for _, r := range n {
		if !alnum(r) && !strings.ContainsRune(extra, r) {
			return fmt.Sprintf("has %q; only letters, digits and %s are allowed", r, quoteEach(extra))
		}
	}
	return ""
}

// quoteEach lists characters for a message: '-', '_' and '.'.
func quoteEach(chars string) string {
	q := make([]string, 0, len(chars))
	for _, c := range chars {
		q = append(q, fmt.Sprintf("'%c'", c))
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func alnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// String is the configuration form, also used in log lines.
func (s Scope) String() string {
	if s.Kind == RepoScope {
		return string(s.Kind) + ":" + s.Owner + "/" + s.Name
	}
	return string(s.Kind) + ":" + s.Name
}

// Key identifies the scope in maps and the ledger. GitHub treats owner and
// repository names without regard to case, and so must the reaper, or a
// label written in another case would look like a scope nobody observed.
func (s Scope) Key() string { return strings.ToLower(s.String()) }

// Pod is the little the classifier needs of a Kubernetes pod. The kube
// adapter builds it page by page so a sweep never holds the fleet's full Pod
// objects.
type Pod struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// RunnerName is the name the pod's runner registers with on GitHub.
	RunnerName string
	// ScopeKey is the Scope.Key of the pod's GitHub scope; empty when the
	// pod says nothing the configuration can map to a scope.
	ScopeKey string
	// Phase is the pod's status.phase: Pending, Running, Succeeded, Failed
	// or Unknown.
	Phase     string
	CreatedAt time.Time
	// StartedAt is when the runner began: its container's
	// state.running.startedAt, else the pod's status.startTime, else its
	// creation. The registration deadline counts from here, because a pod
	// may wait Pending for minutes (node scale-up, a large image) before
	// its runner can even try to register.
	StartedAt time.Time
	// HasRunner is true when the pod's spec has a container named as the
	// configured runner container. A pod without one is not a runner, only
	// something the label selector happened to match, and is never judged.
	HasRunner bool
	// ServiceAccount is the pod's spec.serviceAccountName: the same-named
	// ServiceAccount is deleted with a bare pod only when the pod ran as
	// it, so that no other ServiceAccount that merely shares the name goes.
	ServiceAccount string
	// Deleting is true once the pod has a deletion timestamp: someone else
	// is already removing it.
	Deleting bool
	// Stamped is true when the pod carries the pool's owner-stamp label.
	Stamped bool
	Runner  Container
	// Owner is the pod's controller owner reference, if any.
	Owner *Owner
	// RunnerID is a registration id known from Kubernetes (for example an
	// ARC EphemeralRunner's status.runnerId); zero when unknown.
	RunnerID int64
}

// Owner kinds the reaper deletes instead of the pod, because their
// controllers would otherwise recreate the pod from a dead runner config.
const (
	EphemeralRunnerAPIVersion = "actions.github.com/v1alpha1"
	EphemeralRunnerKind       = "EphemeralRunner"
	LegacyRunnerAPIVersion    = "actions.summerwind.dev/v1alpha1"
	LegacyRunnerKind          = "Runner"
)

// ARCOwned reports whether the owner is an ARC runner object whose deletion
// is the right way to remove its pod.
func (o *Owner) ARCOwned() bool {
	return o != nil && ((o.APIVersion == EphemeralRunnerAPIVersion && o.Kind == EphemeralRunnerKind) ||
		(o.APIVersion == LegacyRunnerAPIVersion && o.Kind == LegacyRunnerKind))
}

// Owner is a controller owner reference.
type Owner struct {
	APIVersion string
	Kind       string
	Name       string
	UID        string
}

// Container is what the runner container's status says.
type Container struct {
	// Found is false when the pod has no status for the runner container.
	Found   bool
	Running bool
	// Terminated is state.terminated; LastTerminated is
	// lastState.terminated, the fallback of the exit fingerprint.
	Terminated     *Termination
	LastTerminated *Termination
}

// Termination is a container's terminated state.
type Termination struct {
	ExitCode   int32
	Signal     int32
	Reason     string
	FinishedAt time.Time
}

// Registration is a self-hosted runner as GitHub lists it. The JSON names
// are short because registrations are cached in the ledger, which must fit a
// ConfigMap.
type Registration struct {
	ID     int64    `json:"i"`
	Name   string   `json:"n"`
	Online bool     `json:"o,omitempty"`
	Busy   bool     `json:"b,omitempty"`
	Labels []string `json:"l,omitempty"`
}

// ScopeList is one scope's runner list as one sweep saw it.
type ScopeList struct {
	Scope Scope
	// Complete is true only when every page was read and the items add up
	// to total_count. An incomplete list is never evidence of absence.
	Complete bool
	// Problem says why the list is not complete, for the log.
	Problem string
	// Err is the list's error, kept typed so that a skip can tell a rate
	// limit (and until when) and an inconsistent list from a failure.
	Err     error
	Runners []Registration
}

// EphemeralRunner is what the classifier needs of an ARC
// actions.github.com/v1alpha1 EphemeralRunner.
type EphemeralRunner struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// ScopeKey is the Scope.Key of spec.githubConfigUrl; empty when the URL
	// names no scope.
	ScopeKey  string
	Phase     string
	Reason    string
	Message   string
	RunnerID  int64
	CreatedAt time.Time
	// DeletingSince is the deletion timestamp; zero when not deleting.
	DeletingSince time.Time
	Finalizers    []string
}

// Observation is everything one sweep saw.
type Observation struct {
	Now  time.Time
	Pods []Pod
	// EphemeralRunners is set only when ARC's leaks are watched.
	EphemeralRunners []EphemeralRunner
	// Lists holds one entry per configured scope, by Scope.Key.
	Lists map[string]ScopeList
	// Unobserved lists the configured namespaces whose pods were not seen:
	// the namespace does not exist, or its existence could not be checked.
	Unobserved []UnobservedNamespace
}

// UnobservedNamespace is a configured namespace that listed no pod and could
// not be shown to exist. An empty list from it proves nothing (a misspelt
// name lists nothing too), and a pod there could back any registration, so
// while there is one no registration is judged a ghost.
type UnobservedNamespace struct {
	Namespace string
	Reason    string
}

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
	// hurry it (see Clocks). Zero in a ledger written before it existed:
	// the mark's local hold then starts at the next sweep.
	FirstSeenLocal time.Time `json:"first_seen_local,omitzero"`
	// Scope is the Scope.Key the verdict was judged in: while that scope's
	// list cannot be read, the mark is neither confirmed nor cleared.
	Scope      string `json:"scope,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Pod        string `json:"pod,omitempty"`
	RunnerID   int64  `json:"runner_id,omitempty"`
	RunnerName string `json:"runner_name,omitempty"`
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
