package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

func mustScopes(t *testing.T, specs ...string) []fleet.Scope {
	t.Helper()
	out := make([]fleet.Scope, 0, len(specs))
	for _, s := range specs {
		sc, err := fleet.ParseScope(s)
		require.NoError(t, err)
		out = append(out, sc)
	}
	return out
}

// ownedBy makes a pod controlled by the kind, with ARC's legacy id
// annotation set to id.
func ownedBy(apiVersion, kind, id string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: p.Name, UID: "uid-owner", Controller: controller()}}
		p.Annotations = map[string]string{AnnotationLegacyRunnerID: id}
	}
}

// jobOwned makes the pod a batch/v1 Job's, the Job named name.
func jobOwned(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "uid-job", Controller: controller()}}
	}
}

// legacyEnv makes a legacy Runner's pod (id 9173) whose runner container
// has the environment given as name, value pairs.
func legacyEnv(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ownedBy(fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind, "9173")(p)
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
	}
}

func legacyOwner() *fleet.Owner {
	return &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: "runner-abc", UID: "uid-owner"}
}

// TestLegacyRunnerIDIsARCsOrNothing: an annotation that is not the plain
// positive decimal ARC writes gives no id, so a hand-written or hostile
// value cannot name another runner's registration by a trick of parsing.
func TestLegacyRunnerIDIsARCsOrNothing(t *testing.T) {
	for value, want := range map[string]int64{
		"42": 42, "1": 1, "9223372036854775807": 9223372036854775807,
		"": 0, "0": 0, "-42": 0, "+42": 0, "042": 0, " 42": 0, "42 ": 0, "4_2": 0, "0x2a": 0, "1e3": 0, "42.0": 0,
		"9223372036854775808": 0, "99999999999999999999": 0, "４２": 0,
	} {
		t.Run(value, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{AnnotationLegacyRunnerID: value},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: "r", UID: "u", Controller: controller()}}}}
			assert.Equal(t, want, Mapping{}.View(pod).RunnerID)
		})
	}
}

func TestMappingView(t *testing.T) {
	created := time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC)
	twoScopes := mustScopes(t, "org:Acme", "repo:acme/API")
	oneScope := mustScopes(t, "org:Acme")

	// Every case starts from this pod and this view of it, and changes
	// only what it is about, so each row shows one rule.
	basePod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:         "ci",
				Name:              "runner-abc",
				UID:               "uid-1",
				ResourceVersion:   "42",
				CreationTimestamp: metav1.NewTime(created),
			},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: runnerImage}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	baseView := func() fleet.Pod {
		return fleet.Pod{
			Namespace:       "ci",
			Name:            "runner-abc",
			UID:             "uid-1",
			ResourceVersion: "42",
			RunnerName:      "runner-abc",
			Phase:           "Running",
			CreatedAt:       fleet.StampOf(created),
			StartedAt:       fleet.StampOf(created),
			HasRunner:       true,
		}
	}
	labels := func(kv ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				p.Labels[kv[i]] = kv[i+1]
			}
		}
	}
	scope := func(key string) func(*fleet.Pod) { return func(v *fleet.Pod) { v.ScopeKey = key } }
	statuses := func(cs ...corev1.ContainerStatus) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.ContainerStatuses = cs }
	}
	none := corev1.ContainerState{}

	tests := []struct {
		name    string
		mapping Mapping
		pod     func(*corev1.Pod)
		want    func(*fleet.Pod)
	}{
		// ScopeKey from ARC's labels.
		{"arc enterprise", Mapping{Scopes: twoScopes},
			labels(LabelEnterprise, "Big-Corp"), scope("enterprise:big-corp")},
		{"arc enterprise wins over org and repo", Mapping{Scopes: twoScopes},
			labels(LabelEnterprise, "big-corp", LabelOrganization, "acme", LabelRepository, "api"), scope("enterprise:big-corp")},
		{"arc org and repo", Mapping{Scopes: twoScopes},
			labels(LabelOrganization, "Acme", LabelRepository, "API"), scope("repo:acme/api")},
		{"arc org only", Mapping{Scopes: twoScopes},
			labels(LabelOrganization, "acme"), scope("org:acme")},
		{"arc org with empty repository label", Mapping{Scopes: twoScopes},
			labels(LabelOrganization, "acme", LabelRepository, ""), scope("org:acme")},
		{"arc scope that is not configured keeps its key", Mapping{Scopes: oneScope},
			labels(LabelOrganization, "Other-Org"), scope("org:other-org")},
		{"no scope labels, one scope configured", Mapping{Scopes: oneScope},
			labels("app", "runner"), scope("org:acme")},
		{"only empty scope labels, one scope configured", Mapping{Scopes: oneScope},
			labels(LabelEnterprise, "", LabelOrganization, ""), scope("org:acme")},
		{"repository label without organization, one scope configured", Mapping{Scopes: oneScope},
			labels(LabelRepository, "api"), scope("org:acme")},
		{"no scope labels, two scopes configured", Mapping{Scopes: twoScopes},
			labels("app", "runner"), nil},
		{"no scope labels, no scopes configured", Mapping{},
			nil, nil},

		// ScopeKey from a label of the deployment's own.
		{"scope label names an org, any case", Mapping{ScopeLabel: "pool/scope", Scopes: twoScopes},
			labels("pool/scope", "ACME"), scope("org:acme")},
		{"scope label names a repository", Mapping{ScopeLabel: "pool/scope", Scopes: mustScopes(t, "org:acme", "repo:acme/web")},
			labels("pool/scope", "web"), scope("repo:acme/web")},
		{"scope label names an enterprise", Mapping{ScopeLabel: "pool/scope", Scopes: mustScopes(t, "enterprise:Big-Corp", "org:acme")},
			labels("pool/scope", "big-corp"), scope("enterprise:big-corp")},
		{"scope label matches nothing", Mapping{ScopeLabel: "pool/scope", Scopes: twoScopes},
			labels("pool/scope", "elsewhere"), nil},
		{"scope label is ambiguous", Mapping{ScopeLabel: "pool/scope", Scopes: mustScopes(t, "org:api", "repo:acme/api")},
			labels("pool/scope", "api"), nil},
		{"scope label absent: no single-scope fallback, ARC labels ignored", Mapping{ScopeLabel: "pool/scope", Scopes: oneScope},
			labels(LabelOrganization, "acme"), nil},

		// RunnerName.
		{"runner name from a label", Mapping{RunnerName: Source{Kind: Label, Key: "pool/runner"}},
			labels("pool/runner", "pool-7-runner"), func(v *fleet.Pod) { v.RunnerName = "pool-7-runner" }},
		{"runner name from an annotation", Mapping{RunnerName: Source{Kind: Annotation, Key: "pool/runner"}},
			func(p *corev1.Pod) { p.Annotations = map[string]string{"pool/runner": "pool-8-runner"} },
			func(v *fleet.Pod) { v.RunnerName = "pool-8-runner" }},
		{"runner name label missing is empty, not a guess", Mapping{RunnerName: Source{Kind: Label, Key: "pool/runner"}},
			labels("app", "runner"), func(v *fleet.Pod) { v.RunnerName = "" }},

		// Runner container.
		{"runner container running", Mapping{},
			statuses(containerStatus("runner", stateRunning(), none)),
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true, Running: true}
				v.StartedAt = fleet.StampOf(started().Time)
			}},
		{"runner container OOM-killed", Mapping{},
			statuses(containerStatus("dind", stateRunning(), none), containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), none)),
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true, Terminated: term(137, 0, "OOMKilled")}
			}},
		{"runner container restarted after SIGTERM", Mapping{},
			statuses(containerStatus("runner", stateRunning(), stateTerminated(143, 15, "Error"))),
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true, Running: true, LastTerminated: term(143, 15, "Error")}
				v.StartedAt = fleet.StampOf(started().Time)
			}},
		{"runner container waiting", Mapping{},
			statuses(containerStatus("runner", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, none)),
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true}
				v.StartWait = &fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}
			}},
		{"runner container not found among others", Mapping{},
			statuses(containerStatus("dind", stateRunning(), none)), nil},
		{"runner container under another name", Mapping{RunnerContainer: "dind"},
			func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "dind", Image: "docker:dind"})
				statuses(containerStatus("dind", stateRunning(), none), containerStatus("runner", stateTerminated(0, 0, "Completed"), none))(p)
			},
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true, Running: true}
				v.StartedAt = fleet.StampOf(started().Time)
			}},

		// Whether the pod is a runner at all: its spec, not its status.
		{"no runner container in the spec", Mapping{},
			func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{{Name: "postgres", Image: "postgres:16"}} },
			func(v *fleet.Pod) { v.HasRunner = false }},
		{"runner container in the spec under another name than configured", Mapping{RunnerContainer: "actions-runner"},
			nil, func(v *fleet.Pod) { v.HasRunner = false }},
		{"runner container in the spec, no status yet", Mapping{},
			func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodPending} },
			func(v *fleet.Pod) { v.Phase = "Pending" }},
		{"a status for a runner container the spec lacks is not a runner", Mapping{},
			func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
				statuses(containerStatus("runner", stateRunning(), none))(p)
			},
			func(v *fleet.Pod) {
				v.HasRunner = false
				v.Runner = fleet.Container{Found: true, Running: true}
				v.StartedAt = fleet.StampOf(started().Time)
			}},

		// When the runner started: its container, else the pod, else creation.
		{"started: the pod's start time while its runner container waits", Mapping{},
			func(p *corev1.Pod) {
				st := metav1.NewTime(created.Add(7 * time.Minute))
				p.Status.StartTime = &st
				statuses(containerStatus("runner", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, none))(p)
			},
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true}
				v.StartedAt = fleet.StampOf(created.Add(7 * time.Minute))
				v.StartWait = &fleet.StartWait{Reason: "ContainerCreating", Container: "runner"}
			}},
		{"started: the runner container's start beats the pod's", Mapping{},
			func(p *corev1.Pod) {
				st := metav1.NewTime(created.Add(7 * time.Minute))
				p.Status.StartTime = &st
				statuses(containerStatus("runner", corev1.ContainerState{Running: &corev1.ContainerStateRunning{
					StartedAt: metav1.NewTime(created.Add(9 * time.Minute))}}, none))(p)
			},
			func(v *fleet.Pod) {
				v.Runner = fleet.Container{Found: true, Running: true}
				v.StartedAt = fleet.StampOf(created.Add(9 * time.Minute))
			}},
		{"started: another container's start does not count", Mapping{},
			func(p *corev1.Pod) {
				statuses(containerStatus("dind", corev1.ContainerState{Running: &corev1.ContainerStateRunning{
					StartedAt: metav1.NewTime(created.Add(9 * time.Minute))}}, none))(p)
			},
			nil},

		// Stamp, owner, deletion, phase.
		{"stamped", Mapping{StampLabel: "pool/claimed-by"},
			labels("pool/claimed-by", "dispatcher-1"), func(v *fleet.Pod) { v.Stamped = true }},
		{"stamp label with empty value is not a stamp", Mapping{StampLabel: "pool/claimed-by"},
			labels("pool/claimed-by", ""), nil},
		{"stamp check off", Mapping{},
			labels("pool/claimed-by", "dispatcher-1"), nil},
		{"controller owner", Mapping{},
			func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "ConfigMap", Name: "not-controller", UID: "uid-cm"},
					{APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner", Name: "runner-abc", UID: "uid-er", Controller: controller()},
				}
			},
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner", Name: "runner-abc", UID: "uid-er"}
			}},
		{"owner reference that is not a controller", Mapping{},
			func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-cm"}}
			}, nil},
		{"legacy Runner's pod: the registration id ARC recorded", Mapping{},
			ownedBy(fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind, "9173"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9173 }},
		{"legacy Runner's pod: the largest id", Mapping{},
			ownedBy(fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind, "9223372036854775807"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9223372036854775807 }},
		{"a RunnerSet's pod (StatefulSet): its id goes stale as it registers again in place, not read", Mapping{},
			ownedBy("apps/v1", "StatefulSet", "9173"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "runner-abc", UID: "uid-owner"}
				v.Group = fleet.GroupOf("StatefulSet", "ci", "runner-abc")
			}},
		{"an EphemeralRunner's pod: the annotation is not ARC's there, not read", Mapping{},
			ownedBy(fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind, "9173"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "runner-abc", UID: "uid-owner"}
			}},
		{"legacy Runner's pod named by a label: the id, looked up under the pod's name, is not read", Mapping{RunnerName: Source{Kind: Label, Key: "pool/runner"}},
			func(p *corev1.Pod) {
				ownedBy(fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind, "9173")(p)
				p.Labels = map[string]string{"pool/runner": "other"}
			},
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerName = "other" }},
		{"legacy Runner's pod: its scope from ARC's RUNNER_ORG, not the one configured", Mapping{Scopes: oneScope},
			legacyEnv("RUNNER_ORG", "Acme", "RUNNER_REPO", "", "RUNNER_ENTERPRISE", ""),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.ScopeKey = "org:acme"; v.RunnerID = 9173 }},
		{"legacy Runner's pod: a repository's runner is not the organization's", Mapping{Scopes: oneScope},
			legacyEnv("RUNNER_ORG", "", "RUNNER_REPO", "acme/API"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.ScopeKey = "repo:acme/api"; v.RunnerID = 9173 }},
		{"legacy Runner's pod: an enterprise's runner", Mapping{Scopes: oneScope},
			legacyEnv("RUNNER_ENTERPRISE", "big-corp"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.ScopeKey = "enterprise:big-corp"; v.RunnerID = 9173 }},
		{"legacy Runner's pod saying no scope: none, not the one configured", Mapping{Scopes: oneScope},
			legacyEnv(),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9173 }},
		{"legacy Runner's pod saying two scopes: none", Mapping{Scopes: oneScope},
			legacyEnv("RUNNER_ORG", "acme", "RUNNER_REPO", "acme/api"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9173 }},
		{"legacy Runner's pod with a repository not OWNER/NAME: none", Mapping{Scopes: oneScope},
			legacyEnv("RUNNER_REPO", "api"),
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9173 }},
		{"legacy Runner's pod: another container's environment is not the runner's", Mapping{Scopes: oneScope},
			func(p *corev1.Pod) {
				legacyEnv()(p)
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Env: []corev1.EnvVar{{Name: "RUNNER_ORG", Value: "acme"}}})
			},
			func(v *fleet.Pod) { v.Owner = legacyOwner(); v.RunnerID = 9173 }},
		{"a pod of no controller: not read", Mapping{},
			func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationLegacyRunnerID: "9173"} }, nil},
		{"a Runner of another group: not read", Mapping{},
			ownedBy("actions.example.com/v1", fleet.LegacyRunnerKind, "9173"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "actions.example.com/v1", Kind: fleet.LegacyRunnerKind, Name: "runner-abc", UID: "uid-owner"}
				v.Group = fleet.GroupOf(fleet.LegacyRunnerKind, "ci", "runner-abc")
			}},
		// Group: what made the pod.
		{"group: ARC's scale set, by its labels, over its EphemeralRunner", Mapping{},
			func(p *corev1.Pod) {
				ownedBy(fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind, "")(p)
				labels(LabelScaleSetName, "acme-set", LabelScaleSetNamespace, "ci")(p)
			},
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "runner-abc", UID: "uid-owner"}
				v.Group = fleet.GroupOf(fleet.GroupScaleSet, "ci", "acme-set")
			}},
		{"group: a scale-set namespace label naming another namespace is not trusted", Mapping{},
			labels(LabelScaleSetName, "acme-set", LabelScaleSetNamespace, "victim"),
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupScaleSet, "ci", "acme-set") }},
		{"group: a scale set without its namespace label is the pod's namespace's", Mapping{},
			labels(LabelScaleSetName, "acme-set"),
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupScaleSet, "ci", "acme-set") }},
		{"group: legacy ARC's RunnerDeployment, over the Runner that owns the pod", Mapping{},
			func(p *corev1.Pod) {
				ownedBy(fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind, "")(p)
				labels(LabelLegacyRunnerDeployment, "acme-rd")(p)
			},
			func(v *fleet.Pod) {
				v.Owner = legacyOwner()
				v.Group = fleet.GroupOf(fleet.GroupRunnerDeployment, "ci", "acme-rd")
			}},
		{"group: legacy ARC's RunnerSet", Mapping{},
			labels(LabelLegacyRunnerSet, "acme-rs"),
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupRunnerSet, "ci", "acme-rs") }},
		{"group: an EphemeralRunner without the labels names one runner, no group", Mapping{},
			ownedBy(fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind, ""),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "runner-abc", UID: "uid-owner"}
			}},
		{"group: a bare pool's ReplicaSet", Mapping{},
			ownedBy("apps/v1", "ReplicaSet", ""),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "runner-abc", UID: "uid-owner"}
				v.Group = fleet.GroupOf("ReplicaSet", "ci", "runner-abc")
			}},
		{"group: a pod with no controller, by its generateName", Mapping{},
			func(p *corev1.Pod) { p.GenerateName = "pool-runner-" },
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupGenerateName, "ci", "pool-runner-") }},
		{"group: a pod with no controller and a template hash, by both", Mapping{},
			func(p *corev1.Pod) {
				p.GenerateName = "pool-runner-"
				labels(LabelPodTemplateHash, "5d8f7c9b4")(p)
			},
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupGenerateName, "ci", "pool-runner-@5d8f7c9b4") }},
		{"group: a pod with no controller and a revision hash, by both", Mapping{},
			func(p *corev1.Pod) {
				p.GenerateName = "pool-runner-"
				labels(LabelControllerRevisionHash, "pool-6b9f")(p)
			},
			func(v *fleet.Pod) { v.Group = fleet.GroupOf(fleet.GroupGenerateName, "ci", "pool-runner-@pool-6b9f") }},
		{"group: a pod with neither controller nor generateName, none", Mapping{},
			labels(LabelPodTemplateHash, "5d8f7c9b4"), nil},
		{"group: a Job made for one runner, by its name's prefix", Mapping{},
			jobOwned("runner-x7k2p"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "batch/v1", Kind: "Job", Name: "runner-x7k2p", UID: "uid-job"}
				v.Group = fleet.GroupOf(fleet.GroupGenerateName, "ci", "runner-")
			}},
		{"group: a CronJob's Job, by its name's prefix", Mapping{},
			jobOwned("nightly-runner-29301840"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "batch/v1", Kind: "Job", Name: "nightly-runner-29301840", UID: "uid-job"}
				v.Group = fleet.GroupOf(fleet.GroupGenerateName, "ci", "nightly-runner-")
			}},
		{"group: a Job named by hand is its own group", Mapping{},
			jobOwned("release-runner"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "batch/v1", Kind: "Job", Name: "release-runner", UID: "uid-job"}
				v.Group = fleet.GroupOf("Job", "ci", "release-runner")
			}},
		{"group: a Job whose last word has a vowel is named by hand", Mapping{},
			jobOwned("runner-alpha"),
			func(v *fleet.Pod) {
				v.Owner = &fleet.Owner{APIVersion: "batch/v1", Kind: "Job", Name: "runner-alpha", UID: "uid-job"}
				v.Group = fleet.GroupOf("Job", "ci", "runner-alpha")
			}},
		{"deleting", Mapping{},
			func(p *corev1.Pod) { ts := metav1.NewTime(created.Add(time.Hour)); p.DeletionTimestamp = &ts },
			func(v *fleet.Pod) { v.Deleting = true }},
		{"failed phase", Mapping{},
			func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
			func(v *fleet.Pod) { v.Phase = "Failed" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := basePod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			want := baseView()
			if tc.want != nil {
				tc.want(&want)
			}
			assert.Equal(t, want, tc.mapping.View(pod))
		})
	}
}

// TestListPodsRunnerStartAndContainer writes pods and statuses to the real
// API server and checks, after the round trip, the two things asked of it
// of the view: whether the pod's spec has the runner container at all, and
// when its runner started (the container's start, else the pod's, else its
// creation).
func TestListPodsRunnerStartAndContainer(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "kube")
	labels := map[string]string{"app": "runner"}
	// The API keeps whole seconds.
	podStart := time.Now().UTC().Truncate(time.Second).Add(-3 * time.Minute)
	runnerStart := podStart.Add(2 * time.Minute)
	st := metav1.NewTime(podStart)
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	runningSince := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(runnerStart)}}
	none := corev1.ContainerState{}
	withStart := func(s *corev1.PodStatus) *corev1.PodStatus { s.StartTime = &st; return s }

	tests := []struct {
		name       string
		pod        testenv.RunnerPod
		hasRunner  bool
		wantStart  func(created time.Time) time.Time
		wantRunner fleet.Container
	}{{
		name:      "unscheduled",
		pod:       testenv.RunnerPod{Unscheduled: true},
		hasRunner: true, wantStart: func(c time.Time) time.Time { return c },
	}, {
		name:      "creating",
		pod:       testenv.RunnerPod{Status: withStart(podStatus(corev1.PodRunning, containerStatus("runner", waiting, none)))},
		hasRunner: true, wantStart: func(time.Time) time.Time { return podStart },
		wantRunner: fleet.Container{Found: true},
	}, {
		name:      "started-later",
		pod:       testenv.RunnerPod{Status: withStart(podStatus(corev1.PodRunning, containerStatus("runner", runningSince, none)))},
		hasRunner: true, wantStart: func(time.Time) time.Time { return runnerStart },
		wantRunner: fleet.Container{Found: true, Running: true},
	}, {
		name: "sidecar-started-later",
		pod: testenv.RunnerPod{Sidecar: true, Status: withStart(podStatus(corev1.PodRunning,
			containerStatus("dind", runningSince, none), containerStatus("runner", waiting, none)))},
		hasRunner: true, wantStart: func(time.Time) time.Time { return podStart },
		wantRunner: fleet.Container{Found: true},
	}, {
		name: "postgres-0",
		pod: testenv.RunnerPod{Containers: []corev1.Container{{Name: "postgres", Image: "postgres:16"}},
			Status: withStart(podStatus(corev1.PodRunning, corev1.ContainerStatus{Name: "postgres", Image: "postgres:16", State: runningSince}))},
		hasRunner: false, wantStart: func(time.Time) time.Time { return podStart },
	}}
	created := map[string]*corev1.Pod{}
	for _, tc := range tests {
		p := tc.pod
		p.Name, p.Labels = tc.name, labels
		created[tc.name] = env.RunnerPod(t, ns, p)
	}

	c := newClient(t, Options{})
	pods, err := c.ListPods(context.Background(), []string{ns}, "app=runner", Mapping{Scopes: mustScopes(t, "org:acme")})
	require.NoError(t, err)
	require.Len(t, pods, len(tests))
	got := byName(pods)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := got[ns+"/"+tc.name]
			assert.Equal(t, tc.hasRunner, v.HasRunner)
			assert.WithinDuration(t, tc.wantStart(created[tc.name].CreationTimestamp.Time), v.StartedAt.Time(), 0)
			assert.Equal(t, tc.wantRunner, v.Runner)
		})
	}
}
