package fleet

import (
	"strings"
	"unique"
)

// Group names what made a runner pod, so that the reaper can tell when the
// same template keeps producing runners that fail the same way (a reap
// loop). It is one interned string ("KIND NAMESPACE/NAME"), held as a
// handle: a pod's view pays 8 bytes for it, and a fleet's pods share the
// few groups there are.
//
// The kinds, in the order the kube adapter looks for them:
//   - GroupScaleSet: ARC's scale set, from the pod's
//     actions.github.com/scale-set-name and -namespace labels; the object
//     the operator configures is the AutoscalingRunnerSet of that name;
//   - GroupRunnerDeployment, GroupRunnerSet: legacy ARC, from the pod's
//     runner-deployment-name or runnerset-name label;
//   - the kind of the pod's controller owner (ReplicaSet, StatefulSet,
//     Job, a pool's own kind), except ARC's per-runner owners
//     (EphemeralRunner, Runner), which make one group of each pod;
//   - GroupGenerateName: a pod with no controller, by its generateName,
//     the prefix its maker gives every pod of one template.
//
// A pod that says none of these is in no group, and is never part of a
// loop.
type Group struct {
	h unique.Handle[string]
}

// The group kinds that are not an owner's own kind.
const (
	// GroupScaleSet is ARC's AutoscalingRunnerSet, named as the scale set.
	GroupScaleSet = "AutoscalingRunnerSet"
	// GroupRunnerDeployment and GroupRunnerSet are legacy ARC's.
	GroupRunnerDeployment = "RunnerDeployment"
	GroupRunnerSet        = "RunnerSet"
	// GroupGenerateName is a controller-less pod's generateName.
	GroupGenerateName = "generateName"
)

// GroupOf is the group of that kind, namespace and name; the zero Group
// when any of them is empty.
func GroupOf(kind, namespace, name string) Group {
	if kind == "" || namespace == "" || name == "" {
		return Group{}
	}
	return Group{unique.Make(kind + " " + namespace + "/" + name)}
}

// ParseGroup reads a group as String writes it; the zero Group for a
// string that is not one.
func ParseGroup(s string) Group {
	kind, rest, ok := strings.Cut(s, " ")
	if !ok {
		return Group{}
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok {
		return Group{}
	}
	return GroupOf(kind, ns, name)
}

// IsZero is true for a pod in no group.
func (g Group) IsZero() bool { return g == Group{} }

// String is "KIND NAMESPACE/NAME", or "" for the zero Group.
func (g Group) String() string {
	if g.IsZero() {
		return ""
	}
	return g.h.Value()
}

// Parts splits the group into its kind, namespace and name.
func (g Group) Parts() (kind, namespace, name string) {
	kind, rest, _ := strings.Cut(g.String(), " ")
	namespace, name, _ = strings.Cut(rest, "/")
	return kind, namespace, name
}
