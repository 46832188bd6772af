package kube

import (
	"cmp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ARC's pod labels naming the GitHub scope its runner registered in; see
// testdata/arc-crds/README.md.
const (
	LabelEnterprise   = "actions.github.com/enterprise"
	LabelOrganization = "actions.github.com/organization"
	LabelRepository   = "actions.github.com/repository"
)

// The labels that name what made a runner pod (fleet.Group): ARC's scale
// set (controllers/actions.github.com constants.go, which the
// EphemeralRunnerSet copies onto each EphemeralRunner and so onto its
// pod), and legacy ARC's RunnerDeployment and RunnerSet
// (controllers/actions.summerwind.net runnerdeployment_controller.go and
// constants.go).
const (
	LabelScaleSetName           = "actions.github.com/scale-set-name"
	LabelScaleSetNamespace      = "actions.github.com/scale-set-namespace"
	LabelLegacyRunnerDeployment = "runner-deployment-name"
	LabelLegacyRunnerSet        = "runnerset-name"
)

// DefaultRunnerContainer is the container ARC runs the runner in.
const DefaultRunnerContainer = "runner"

// SourceKind says where a pod keeps its runner's GitHub name.
type SourceKind int

const (
	// PodName: the pod's name is the runner's name, as in ARC's scale-set
	// mode (pod, EphemeralRunner and runner share one name). The zero value.
	PodName SourceKind = iota
	// Label: the value of the label Source.Key.
	Label
	// Annotation: the value of the annotation Source.Key.
	Annotation
)

// Source is where the runner's GitHub name comes from.
type Source struct {
	Kind SourceKind
	// Key is the label or annotation key; unused for PodName.
	Key string
}

// Mapping says how this deployment's pods name their runner, their GitHub
// scope and their owner stamp. It is configuration, not state: View is a pure
// function of the Mapping and the pod.
type Mapping struct {
	// RunnerContainer is the name of the container the runner runs in;
	// "" means DefaultRunnerContainer.
	RunnerContainer string
	// RunnerName is where the runner's GitHub name comes from.
	RunnerName Source
	// ScopeLabel, when set, is a label whose value names the pod's scope
	// (an org name, enterprise slug or repository name among Scopes);
	// "" means ARC's labels.
	ScopeLabel string
	// Scopes are the configured GitHub scopes.
	Scopes []fleet.Scope
	// StampLabel is the pool's owner-stamp label key; "" turns the
	// orphan-stamped check off.
	StampLabel string
	// JobAnnotation, when set, is the annotation in which the pool's
	// dispatcher writes the job it gave the runner, as
	// OWNER/REPO/RUN_ID[/JOB_ID] (REAPER_JOB_FROM). Not a label: a label's
	// value cannot hold a '/'.
	JobAnnotation string
}

// keys are the labels, annotations and container View reads, so that the
// watch-list decodes no other (trimmer.keys); with the annotation that
// marks a watch-list's end bookmark, which streamPods reads.
func (m Mapping) keys() *metaKeys {
	k := &metaKeys{
		labels: []string{LabelEnterprise, LabelOrganization, LabelRepository,
			LabelScaleSetName, LabelScaleSetNamespace, LabelLegacyRunnerDeployment, LabelLegacyRunnerSet,
			LabelPodTemplateHash, LabelControllerRevisionHash},
		annotations: []string{AnnotationLegacyRunnerID, metav1.InitialEventsAnnotationKey},
		runner:      m.runnerContainerName(),
	}
	for _, l := range []string{m.ScopeLabel, m.StampLabel} {
		if l != "" {
			k.labels = append(k.labels, l)
		}
	}
	if m.JobAnnotation != "" {
		k.annotations = append(k.annotations, m.JobAnnotation)
	}
	switch m.RunnerName.Kind {
	case Label:
		k.labels = append(k.labels, m.RunnerName.Key)
	case Annotation:
		k.annotations = append(k.annotations, m.RunnerName.Key)
	}
	return k
}

// View reduces a pod to what the classifier needs. It keeps nothing of p, so
// the caller can drop the Pod as soon as it has the view.
func (m Mapping) View(p *corev1.Pod) fleet.Pod {
	v := fleet.Pod{
		Namespace:       intern(p.Namespace),
		Name:            p.Name,
		UID:             string(p.UID),
		ResourceVersion: p.ResourceVersion,
		RunnerName:      m.runnerName(p),
		ScopeKey:        intern(m.scopeKey(p)),
		Phase:           intern(string(p.Status.Phase)),
		CreatedAt:       fleet.StampOf(p.CreationTimestamp.Time),
		Deleting:        p.DeletionTimestamp != nil,
		Stamped:         m.StampLabel != "" && p.Labels[m.StampLabel] != "",
		ServiceAccount:  intern(p.Spec.ServiceAccountName),
		Runner:          m.runnerContainer(p),
		HasRunner:       m.hasRunner(p),
		StartedAt:       fleet.StampOf(m.startedAt(p)),
		Job:             m.job(p),
		Group:           groupOf(p),
	}
	v.StartWait = m.startWait(p, v.Runner)
	if ref := controllerOf(p); ref != nil {
		name := ref.Name
		if name == v.Name {
			name = v.Name // ARC names the pod as its EphemeralRunner
		}
		v.Owner = &fleet.Owner{
			APIVersion: intern(ref.APIVersion),
			Kind:       intern(ref.Kind),
			Name:       name,
			UID:        string(ref.UID),
		}
		// ARC looked the id up under the pod's name (the Runner's, its
		// runner's RUNNER_NAME): an id read beside another name could
		// not be checked against it.
		if legacyRunner(p) && v.RunnerName == p.Name {
			v.RunnerID = legacyRunnerID(p.Annotations[AnnotationLegacyRunnerID])
		}
	}
	return v
}

// groupOf is what made the pod (fleet.Group): ARC's scale set or legacy
// ARC's RunnerDeployment or RunnerSet by their labels, else the pod's
// controller owner, else its generateName. ARC's own per-runner owners
// (an EphemeralRunner, a Runner) name one runner, not a template, so a
// pod they own without the labels is in no group. fleet.GroupOf interns
// the name, so the views of a group's pods share one string.
//
// The group is always in the pod's own namespace: ARC sets its scale-set
// namespace label to it, and a label that said otherwise, which anyone who
// can make a pod can write, would count the pod into another namespace's
// group, hold that group's runners and send Events there.
func groupOf(p *corev1.Pod) fleet.Group {
	if name := p.Labels[LabelScaleSetName]; name != "" {
		return fleet.GroupOf(fleet.GroupScaleSet, p.Namespace, name)
	}
	if name := p.Labels[LabelLegacyRunnerDeployment]; name != "" {
		return fleet.GroupOf(fleet.GroupRunnerDeployment, p.Namespace, name)
	}
	if name := p.Labels[LabelLegacyRunnerSet]; name != "" {
		return fleet.GroupOf(fleet.GroupRunnerSet, p.Namespace, name)
	}
	if ref := controllerOf(p); ref != nil {
		o := fleet.Owner{APIVersion: ref.APIVersion, Kind: ref.Kind}
		if o.ARCOwned() {
			return fleet.Group{}
		}
		if prefix, ok := generatedJob(ref); ok {
			return fleet.GroupOf(fleet.GroupGenerateName, p.Namespace, prefix)
		}
		return fleet.GroupOf(ref.Kind, p.Namespace, ref.Name)
	}
	if p.GenerateName == "" {
		return fleet.Group{}
	}
	name := p.GenerateName
	for _, l := range []string{LabelPodTemplateHash, LabelControllerRevisionHash} {
		if h := p.Labels[l]; h != "" {
			// Pods that share a generateName may come from unrelated
			// templates; the hash their controller stamped tells them
			// apart where one did.
			name += "@" + h
			break
		}
	}
	return fleet.GroupOf(fleet.GroupGenerateName, p.Namespace, name)
}

// The labels a controller stamps its pods' template with: a Deployment's
// ReplicaSets and a StatefulSet's or DaemonSet's revisions. They outlive
// the controller (a ReplicaSet deleted with its pods orphaned).
const (
	LabelPodTemplateHash        = "pod-template-hash"
	LabelControllerRevisionHash = "controller-revision-hash"
)

// generatedJob is the name prefix of a batch/v1 Job whose name was made
// for it (a CronJob's Jobs, NAME-<scheduled minute>; a tool's Job a runner,
// PREFIX-<random suffix>): such Jobs each make one runner from the same
// template, so the pods group by the prefix, as a generateName. A Job
// named by hand is its own group. Without it every Job would be a group of
// one, which never loops, and would crowd the real groups out of the
// window.
func generatedJob(ref *metav1.OwnerReference) (string, bool) {
	if ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, "batch/") {
		return "", false
	}
	i := strings.LastIndexByte(ref.Name, '-')
	if i <= 0 {
		return "", false
	}
	suffix := ref.Name[i+1:]
	if generatedSuffix(suffix) || scheduledSuffix(suffix) {
		return ref.Name[:i+1], true
	}
	return "", false
}

// generatedSuffix reports whether s is the API server's generateName
// suffix: five characters of its alphabet, which has no vowels (and no
// 0, 1 or 3) so that it spells no word.
func generatedSuffix(s string) bool {
	if len(s) != 5 {
		return false
	}
	for i := range len(s) {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", rune(s[i])) {
			return false
		}
	}
	return true
}

// scheduledSuffix reports whether s is a CronJob's Job suffix: the
// scheduled time in minutes since the epoch, eight digits or more.
func scheduledSuffix(s string) bool {
	if len(s) < 8 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AnnotationLegacyRunnerID is where ARC's legacy runner pod controller
// records the registration's id once GitHub lists the runner under the
// pod's name (v0.27.6 runner_graceful_stop.go, ensureRunnerPodRegistered).
// It is what tells a registration GitHub dropped while the pod ran (an
// outage, a runner removed by hand) from one that never came: without it,
// such a pod waits out the whole registration deadline.
//
// It is read only on pods a legacy Runner controls, and only when the
// pod's runner name is the pod's own, under which ARC looked it up. A
// RunnerSet's pods (a StatefulSet's) carry it too, but come back under the
// same name and register again (config.sh --replace) with a new id. An id
// may also be stale on a Runner's pod (a template copied from a live pod
// copies its annotations), so the classifier never trusts it alone: an id
// that contradicts the pod's name ties the pod to nothing, and a gone id
// whose name is still listed falls back to the name.
const AnnotationLegacyRunnerID = "actions-runner/id"

// legacyRunnerID is the annotation's id, or 0 when it is not a plain
// positive decimal: a signed, padded or overflowing value is not ARC's.
func legacyRunnerID(s string) int64 {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// runnerName is "" when the configured label or annotation is missing: a
// guess (the pod name) could match some other runner's registration.
func (m Mapping) runnerName(p *corev1.Pod) string {
	switch m.RunnerName.Kind {
	case Label:
		return p.Labels[m.RunnerName.Key]
	case Annotation:
		return p.Annotations[m.RunnerName.Key]
	default:
		return p.Name
	}
}

// job is the job the pool's label or annotation names, or nil when it
// names none. A value that is not a job reference is kept as a job that
// cannot be asked about (fleet.Job.Known): the dispatcher said the runner
// took a job, and the reaper may not act as if it had not.
func (m Mapping) job(p *corev1.Pod) *fleet.Job {
	if m.JobAnnotation == "" {
		return nil
	}
	v := p.Annotations[m.JobAnnotation]
	if v == "" {
		return nil
	}
	j, err := fleet.ParseJobRef(v)
	if err != nil {
		return &fleet.Job{}
	}
	return &j
}

// scopeKey is the Scope.Key of the pod's scope, or "" when the pod does not
// say enough to pick one.
func (m Mapping) scopeKey(p *corev1.Pod) string {
	if m.ScopeLabel != "" {
		return m.scopeFromLabel(p.Labels[m.ScopeLabel])
	}
	// ARC's labels. A scope named here but not configured still gets its
	// key, so the sweep can say that scope was never observed rather than
	// mistake the pod for an unscoped one.
	ent := p.Labels[LabelEnterprise]
	org := p.Labels[LabelOrganization]
	repo := p.Labels[LabelRepository]
	switch {
	case ent != "":
		return fleet.Scope{Kind: fleet.EnterpriseScope, Name: ent}.Key()
	case org != "" && repo != "":
		return fleet.Scope{Kind: fleet.RepoScope, Owner: org, Name: repo}.Key()
	case org != "":
		return fleet.Scope{Kind: fleet.OrgScope, Name: org}.Key()
	case legacyRunner(p):
		// A legacy Runner's pod has no scope label: ARC gives its runner
		// container the Runner's scope in its environment, and looks its
		// registration up there. The one configured scope is no guess
		// for it: a repository's runner in an organization's list looks
		// unregistered.
		return m.legacyScopeKey(p)
	case len(m.Scopes) == 1:
		// A pod that names no scope can only belong to the one there is.
		return m.Scopes[0].Key()
	default:
		return ""
	}
}

// legacyScopeEnv reports whether the variable is one of those ARC v0.27.6
// sets on a legacy runner container to say its scope
// (runner_controller.go EnvVarEnterprise, EnvVarOrg, EnvVarRepo; the
// repository as OWNER/NAME).
func legacyScopeEnv(name string) bool {
	switch name {
	case "RUNNER_ENTERPRISE", "RUNNER_ORG", "RUNNER_REPO":
		return true
	}
	return false
}

// legacyRunner reports whether a legacy (actions.summerwind.dev) Runner
// controls the pod.
func legacyRunner(p *corev1.Pod) bool {
	ref := controllerOf(p)
	return ref != nil && ref.APIVersion == fleet.LegacyRunnerAPIVersion && ref.Kind == fleet.LegacyRunnerKind
}

// controllerOf is metav1.GetControllerOf without its copy: the pod's
// first owner reference marked controller, in place. View reads it two or
// three times a pod, and each copy was garbage.
func controllerOf(p *corev1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		if ref := &p.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref
		}
	}
	return nil
}

// legacyScopeKey is the scope a legacy runner container's environment
// names, or "" when it names none or more than one.
func (m Mapping) legacyScopeKey(p *corev1.Pod) string {
	name := m.runnerContainerName()
	var env map[string]string
	for i := range p.Spec.Containers {
		if c := &p.Spec.Containers[i]; c.Name == name {
			env = map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
		}
	}
	var scopes []fleet.Scope
	if v := env["RUNNER_ENTERPRISE"]; v != "" {
		scopes = append(scopes, fleet.Scope{Kind: fleet.EnterpriseScope, Name: v})
	}
	if v := env["RUNNER_ORG"]; v != "" {
		scopes = append(scopes, fleet.Scope{Kind: fleet.OrgScope, Name: v})
	}
	if owner, repo, ok := strings.Cut(env["RUNNER_REPO"], "/"); ok {
		scopes = append(scopes, fleet.Scope{Kind: fleet.RepoScope, Owner: owner, Name: repo})
	} else if env["RUNNER_REPO"] != "" {
		return ""
	}
	if len(scopes) != 1 {
		return ""
	}
	if parsed, err := fleet.ParseScope(scopes[0].String()); err != nil || parsed != scopes[0] {
		return ""
	}
	return scopes[0].Key()
}

// scopeFromLabel matches a label value against the configured scopes' names.
// An ambiguous value (two scopes share a name) maps to no scope, because
// judging the pod against the wrong runner list would make it look
// unregistered.
func (m Mapping) scopeFromLabel(value string) string {
	if value == "" {
		return ""
	}
	key := ""
	for _, s := range m.Scopes {
		if !strings.EqualFold(s.Name, value) {
			continue
		}
		if key != "" && key != s.Key() {
			return ""
		}
		key = s.Key()
	}
	return key
}

func (m Mapping) runnerContainerName() string {
	if m.RunnerContainer == "" {
		return DefaultRunnerContainer
	}
	return m.RunnerContainer
}

// hasRunner reads the spec, not the status: a pod is a runner by what it was
// made to run, whether or not the kubelet has reported on it yet.
func (m Mapping) hasRunner(p *corev1.Pod) bool {
	name := m.runnerContainerName()
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return true
		}
	}
	return false
}

// startedAt is when the runner began: its container's start, else the
// pod's (the kubelet accepted it), else its creation.
func (m Mapping) startedAt(p *corev1.Pod) time.Time {
	name := m.runnerContainerName()
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.Name == name && cs.State.Running != nil && !cs.State.Running.StartedAt.IsZero() {
			return cs.State.Running.StartedAt.Time
		}
	}
	if p.Status.StartTime != nil && !p.Status.StartTime.IsZero() {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
}

// runnerContainer reads the runner container's status as the kubelet last
// wrote it.
func (m Mapping) runnerContainer(p *corev1.Pod) fleet.Container {
	name := m.runnerContainerName()
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.Name != name {
			continue
		}
		return fleet.Container{
			Found:          true,
			Running:        cs.State.Running != nil,
			Terminated:     termination(cs.State.Terminated),
			LastTerminated: termination(cs.LastTerminationState.Terminated),
		}
	}
	return fleet.Container{}
}

// startWait says what holds the runner back from starting (see
// fleet.StartWait for the order), with when the pod was scheduled; nil for
// a pod whose runner has started, run or ended, or that has ended itself,
// as nearly every pod has, and for one whose status says nothing of a wait
// or of its scheduling.
func (m Mapping) startWait(p *corev1.Pod, runner fleet.Container) *fleet.StartWait {
	if runner.Running || runner.Terminated != nil || runner.LastTerminated != nil ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	var scheduled time.Time
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type != corev1.PodScheduled {
			continue
		}
		switch {
		case c.Status == corev1.ConditionFalse && (c.Reason == corev1.PodReasonUnschedulable || c.Reason == corev1.PodReasonSchedulingGated):
			return newWait(c.Reason, c.Message, "", false)
		case c.Status == corev1.ConditionTrue:
			scheduled = c.LastTransitionTime.Time
		}
	}
	w := m.containerWait(p)
	if !scheduled.IsZero() {
		if w == nil {
			w = &fleet.StartWait{}
		}
		w.ScheduledAt = fleet.StampOf(scheduled)
	}
	return w
}

// containerWait is the wait the container statuses tell of, or nil.
func (m Mapping) containerWait(p *corev1.Pod) *fleet.StartWait {
	var runnerWait *corev1.ContainerStateWaiting
	name := m.runnerContainerName()
	for i := range p.Status.ContainerStatuses {
		if cs := &p.Status.ContainerStatuses[i]; cs.Name == name {
			runnerWait = cs.State.Waiting
		}
	}
	// An init container that failed or cannot start says more than the
	// runner's PodInitializing; one still running is what the runner
	// waits for only while the runner says so (a sidecar, an init
	// container that runs for good, runs beside a started runner too).
	// Init containers start in order, and a sidecar runs on while the
	// next one starts: an init container being created after a running
	// one is the one the pod waits on, not the sidecar before it.
	var current *corev1.ContainerStatus
	for i := range p.Status.InitContainerStatuses {
		cs := &p.Status.InitContainerStatuses[i]
		switch st := cs.State; {
		case st.Waiting != nil && !startProgress(st.Waiting.Reason):
			return newWait(st.Waiting.Reason, st.Waiting.Message, cs.Name, true)
		case st.Terminated != nil && st.Terminated.ExitCode != 0:
			msg := "exit code " + strconv.Itoa(int(st.Terminated.ExitCode))
			if st.Terminated.Message != "" {
				msg += ": " + st.Terminated.Message
			}
			return newWait(cmp.Or(st.Terminated.Reason, "Error"), msg, cs.Name, true)
		case st.Running != nil:
			current = cs
		case st.Waiting != nil && st.Waiting.Reason == "ContainerCreating" && (current == nil || current.State.Running != nil):
			// Being created, first or after a running init container,
			// which can then only be a sidecar (a regular one holds
			// every later one back).
			current = cs
		}
	}
	switch {
	case runnerWait != nil && !startProgress(runnerWait.Reason):
		return newWait(runnerWait.Reason, runnerWait.Message, name, false)
	case current != nil && (runnerWait == nil || runnerWait.Reason == "PodInitializing"):
		if current.State.Waiting != nil {
			return newWait(current.State.Waiting.Reason, current.State.Waiting.Message, current.Name, true)
		}
		return newWait("Running", "", current.Name, true)
	case runnerWait != nil && runnerWait.Reason != "":
		return newWait(runnerWait.Reason, runnerWait.Message, name, false)
	}
	return nil
}

// maxWaitText bounds each of a wait's texts in the view. They are the
// cluster's words, which anyone who may write a pod's status could make
// megabytes; the view keeps them generously, so that the secrets in them
// can be redacted whole before they are cut to what a verdict shows
// (reconcile.BoundWait).
const maxWaitText = 4096

// newWait is a wait with its texts bounded (maxWaitText).
func newWait(reason, message, container string, init bool) *fleet.StartWait {
	return &fleet.StartWait{Reason: intern(clipText(reason, maxWaitText)), Message: clipText(message, maxWaitText),
		Container: clipText(container, maxWaitText), Init: init}
}

// clipText is s cut to at most n bytes, at a rune's edge.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// startProgress reports whether a waiting reason is a start's normal
// progress rather than a fault: the kubelet creating the container, or
// waiting for the init containers. An empty reason says nothing either.
func startProgress(reason string) bool {
	return reason == "" || reason == "ContainerCreating" || reason == "PodInitializing"
}

func termination(t *corev1.ContainerStateTerminated) *fleet.Termination {
	if t == nil {
		return nil
	}
	return &fleet.Termination{
		ExitCode:   t.ExitCode,
		Signal:     t.Signal,
		Reason:     intern(t.Reason),
		FinishedAt: t.FinishedAt.Time,
	}
}

// intern returns the one copy of s that all views share. A fleet's pods
// repeat the same few namespaces, phases, scopes, owner kinds and exit
// reasons; kept once each rather than once per pod, the views of 10,000
// pods hold a megabyte less until the sweep has judged them.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
