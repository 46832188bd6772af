package kube

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/randfill"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// randomPods are pods with every field filled at random (seeded, so a
// failure repeats), to check the trimming against fields no hand-written
// pod would think of.
func randomPods(t *testing.T, n int) []corev1.Pod {
	t.Helper()
	f := randfill.New().RandSource(rand.NewSource(20261123)).NilChance(0.2).NumElements(0, 3).Funcs(
		// Values the API round-trips: whole seconds, valid quantities.
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(4e9), 0).Rfc3339Copy() },
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(metav1.Unix(c.Int63n(4e9), 0).Time)
		},
	)
	pods := make([]corev1.Pod, n)
	for i := range pods {
		f.Fill(&pods[i])
		// Some pods name their containers as the mappings below look
		// for, and are controlled, so that every branch of View runs.
		if i%2 == 0 && len(pods[i].Spec.Containers) > 0 {
			pods[i].Spec.Containers[0].Name = "runner"
			if len(pods[i].Status.ContainerStatuses) > 0 {
				pods[i].Status.ContainerStatuses[0].Name = "runner"
			}
		}
		// And some after a sidecar, which the watch-list drops.
		if i%4 == 1 && len(pods[i].Spec.Containers) > 1 {
			last := len(pods[i].Spec.Containers) - 1
			pods[i].Spec.Containers[0].Name, pods[i].Spec.Containers[last].Name = "dind", "runner"
			if n := len(pods[i].Status.ContainerStatuses); n > 1 {
				pods[i].Status.ContainerStatuses[0].Name, pods[i].Status.ContainerStatuses[n-1].Name = "dind", "runner"
			}
		}
		notStarted(&pods[i], i)
		if i%3 == 0 && len(pods[i].OwnerReferences) > 0 {
			yes := true
			pods[i].OwnerReferences[0].Controller = &yes
			// Some are legacy Runners' pods, whose scope View reads
			// from the runner container's environment.
			if i%2 == 0 {
				pods[i].OwnerReferences[0].APIVersion, pods[i].OwnerReferences[0].Kind = fleet.LegacyRunnerAPIVersion, fleet.LegacyRunnerKind
			}
		}
		// Some carry every label and annotation the mappings read, so
		// that trimming to a Mapping's keys is seen to keep them.
		if i%4 == 1 {
			if pods[i].Labels == nil {
				pods[i].Labels = map[string]string{}
			}
			if pods[i].Annotations == nil {
				pods[i].Annotations = map[string]string{}
			}
			for k, v := range map[string]string{LabelOrganization: "acme", LabelRepository: "api", "pool/claimed-by": "claim-1", "runner-name": "acme-runner-1", "scope": "api"} {
				pods[i].Labels[k] = v
			}
			// The labels that name a pod's group, each kind in turn.
			switch i % 16 {
			case 1:
				pods[i].Labels[LabelScaleSetName], pods[i].Labels[LabelScaleSetNamespace] = "acme-set", "arc"
			case 5:
				pods[i].Labels[LabelLegacyRunnerDeployment] = "acme-rd"
			case 9:
				pods[i].Labels[LabelLegacyRunnerSet] = "acme-rs"
			}
			for k, v := range map[string]string{"runner-name": "acme-runner-2", AnnotationLegacyRunnerID: "42", "pool/job": "acme/api/7/8"} {
				pods[i].Annotations[k] = v
			}
		}
		for j := range pods[i].Spec.Containers {
			env := pods[i].Spec.Containers[j].Env
			for k := range env {
				switch (i + j + k) % 4 {
				case 0:
					env[k].Name, env[k].Value = "RUNNER_ORG", "acme"
				case 1:
					env[k].Name, env[k].Value = "RUNNER_REPO", "acme/api"
				}
			}
		}
	}
	return pods
}

// notStarted makes some of the runner pods wait to start, each way
// fleet.StartWait tells: a random state has a running and a terminated
// runner at once, and would never reach what View reads of a wait (the
// conditions, the init container statuses, the runner's waiting reason).
func notStarted(p *corev1.Pod, i int) {
	if i%6 != 0 || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Name != "runner" {
		return
	}
	p.Status.Phase = corev1.PodPending
	runner := &p.Status.ContainerStatuses[0]
	runner.State.Running, runner.State.Terminated, runner.LastTerminationState.Terminated = nil, nil, nil
	if runner.State.Waiting == nil {
		runner.State.Waiting = &corev1.ContainerStateWaiting{}
	}
	reasons := []string{"ImagePullBackOff", "PodInitializing", "ContainerCreating", "CreateContainerConfigError"}
	runner.State.Waiting.Reason = reasons[(i/6)%len(reasons)]
	for j := range p.Status.InitContainerStatuses {
		st := &p.Status.InitContainerStatuses[j].State
		// Each init container one way: done, failed, waiting, running.
		switch (i/6 + j) % 4 {
		case 0:
			st.Waiting, st.Running = nil, nil
			if st.Terminated != nil {
				st.Terminated.ExitCode = 0
			}
		case 1:
			st.Waiting, st.Running = nil, nil
		case 2:
			st.Running, st.Terminated = nil, nil
		case 3:
			st.Waiting, st.Terminated = nil, nil
		}
	}
	switch {
	case i%18 == 0 && len(p.Status.Conditions) > 0:
		c := &p.Status.Conditions[len(p.Status.Conditions)-1]
		c.Type, c.Status = corev1.PodScheduled, corev1.ConditionFalse
		c.Reason = []string{corev1.PodReasonUnschedulable, corev1.PodReasonSchedulingGated, "Other"}[(i/18)%3]
	case i%18 == 6 && len(p.Status.Conditions) > 0:
		// Scheduled, with the reason and message a True condition may
		// carry too, which View does not read.
		c := &p.Status.Conditions[0]
		c.Type, c.Status = corev1.PodScheduled, corev1.ConditionTrue
	}
}

// trimmedWant is what trimming must leave of p: its metadata but the
// managed fields; of its spec, the containers' names and the service
// account name; of its status, the phase, the start time, each container
// status's name, state and last state, each init container status's name
// and state, and the PodScheduled conditions: False with their type,
// status, reason and message, True with their type, status and
// lastTransitionTime.
func trimmedWant(p corev1.Pod) corev1.Pod {
	w := *p.DeepCopy()
	w.ManagedFields = nil
	spec := corev1.PodSpec{ServiceAccountName: w.Spec.ServiceAccountName}
	for _, c := range w.Spec.Containers {
		kept := corev1.Container{Name: c.Name}
		for _, e := range c.Env {
			if legacyScopeEnv(e.Name) {
				kept.Env = append(kept.Env, e)
			}
		}
		spec.Containers = append(spec.Containers, kept)
	}
	w.Spec = spec
	status := corev1.PodStatus{Phase: w.Status.Phase, StartTime: w.Status.StartTime}
	for _, c := range w.Status.Conditions {
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			status.Conditions = append(status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
			status.Conditions = append(status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	for _, c := range w.Status.InitContainerStatuses {
		status.InitContainerStatuses = append(status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, State: c.State})
	}
	for _, c := range w.Status.ContainerStatuses {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, State: c.State, LastTerminationState: c.LastTerminationState})
	}
	w.Status = status
	return w
}

// mappings are the ways a deployment maps its pods, so that each of View's
// reads (labels, annotations, owner, containers, statuses) is compared.
func mappings(t *testing.T) []Mapping {
	return []Mapping{
		{},
		{RunnerContainer: "runner", StampLabel: "pool/claimed-by", Scopes: mustScopes(t, "org:acme")},
		{RunnerName: Source{Kind: Label, Key: "runner-name"}, ScopeLabel: "scope", Scopes: mustScopes(t, "org:acme", "repo:acme/api")},
		{RunnerName: Source{Kind: Annotation, Key: "runner-name"}, JobAnnotation: "pool/job"},
		{Scopes: mustScopes(t, "org:acme", "repo:acme/api")},
		{RunnerContainer: "dind"},
	}
}

// TestTrimKeepsWhatViewReads: over 500 randomly filled pods, a trimmed pod
// decodes to exactly what trimmedWant keeps, and every mapping views it as
// it views the whole pod. A View that came to read a field the trimming
// drops fails here.
func TestTrimKeepsWhatViewReads(t *testing.T) {
	// The waits the trimmed pods were seen to give, so that the test is
	// known to reach each way View reads one.
	waits := map[string]int{}
	defer func() {
		for _, kind := range []string{"unschedulable", "init", "runner", "scheduled"} {
			assert.Positive(t, waits[kind], "no random pod waited on %s", kind)
		}
	}()
	for i, p := range randomPods(t, 500) {
		full, err := p.Marshal()
		require.NoError(t, err)
		var whole corev1.Pod
		require.NoError(t, whole.Unmarshal(full))

		trimmed, err := new(trimmer).pod(nil, full)
		require.NoError(t, err)
		var got corev1.Pod
		require.NoError(t, got.Unmarshal(trimmed))

		require.Equal(t, trimmedWant(whole), got, "pod %d", i)
		w := (Mapping{}).View(&got).StartWait
		if w != nil && !w.ScheduledAt.IsZero() {
			waits["scheduled"]++
		}
		switch {
		case w.Unschedulable():
			waits["unschedulable"]++
		case w != nil && w.Init:
			waits["init"]++
		case w != nil:
			waits["runner"]++
		}
		for _, m := range mappings(t) {
			require.Equal(t, m.View(&whole), m.View(&got), "pod %d, mapping %+v", i, m)
			// As the watch-list trims: to the Mapping's own keys.
			keys := m.keys()
			keyed, err := (&trimmer{keys: keys}).pod(nil, full)
			require.NoError(t, err)
			var k corev1.Pod
			require.NoError(t, k.Unmarshal(keyed))
			require.Equal(t, m.View(&whole), m.View(&k), "pod %d trimmed to the keys of mapping %+v", i, m)
			for key := range k.Labels {
				require.Contains(t, keys.labels, key)
			}
			for key := range k.Annotations {
				require.Contains(t, keys.annotations, key)
			}
		}
		assert.Less(t, len(trimmed), len(full)+1)
	}
}

// TestTrimRefusesAPodItCannotRead: metadata, spec or status sent as
// anything but a message fails the trimming, as it fails the whole decode,
// rather than making a pod without them.
func TestTrimRefusesAPodItCannotRead(t *testing.T) {
	for _, field := range []protowire.Number{fieldPodMetadata, fieldPodSpec, fieldPodStatus} {
		msg := protowire.AppendTag(nil, field, protowire.VarintType)
		msg = protowire.AppendVarint(msg, 7)
		var whole corev1.Pod
		require.Error(t, whole.Unmarshal(msg), "the whole decoder refuses field %d as a varint", field)
		_, err := new(trimmer).pod(nil, msg)
		require.ErrorIs(t, err, errMalformed, "field %d", field)
	}
}

// TestTrimmingDecoder: the core client's protobuf decoder trims each item
// of a PodList in the envelope, and leaves every other object (a single pod
// too, and every non-protobuf body) to the serializer as it came.
func TestTrimmingDecoder(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	pb := protobuf.NewSerializer(scheme, scheme)
	d := trimmingDecoder{pb}
	enc := serializer.NewCodecFactory(scheme).EncoderForVersion(pb, corev1.SchemeGroupVersion)
	encode := func(obj runtime.Object) []byte {
		b, err := runtime.Encode(enc, obj)
		require.NoError(t, err)
		return b
	}
	pods := randomPods(t, 20)
	for i := range pods {
		pods[i].TypeMeta = metav1.TypeMeta{}
		// As protobuf gives the pod back (times in the local zone).
		b, err := pods[i].Marshal()
		require.NoError(t, err)
		pods[i] = corev1.Pod{}
		require.NoError(t, pods[i].Unmarshal(b))
	}

	t.Run("a single pod passes whole", func(t *testing.T) {
		obj, _, err := d.Decode(encode(pods[0].DeepCopy()), nil, nil)
		require.NoError(t, err)
		got := obj.(*corev1.Pod)
		got.TypeMeta = metav1.TypeMeta{}
		assert.Equal(t, pods[0], *got)
	})
	t.Run("a pod list", func(t *testing.T) {
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, Items: append([]corev1.Pod(nil), pods...)}
		obj, _, err := d.Decode(encode(list), nil, nil)
		require.NoError(t, err)
		got := obj.(*corev1.PodList)
		assert.Equal(t, "42", got.ResourceVersion)
		assert.Equal(t, "next", got.Continue, "the continue token survives")
		require.Len(t, got.Items, len(pods))
		for i := range pods {
			assert.Equal(t, trimmedWant(pods[i]), got.Items[i], "item %d", i)
		}
	})
	t.Run("other kinds pass whole", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ledger", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kept"}}},
			Data: map[string]string{"marks.json": "{}"}}
		obj, _, err := d.Decode(encode(cm.DeepCopy()), nil, nil)
		require.NoError(t, err)
		got := obj.(*corev1.ConfigMap)
		assert.Equal(t, cm.Data, got.Data)
		assert.Equal(t, cm.ManagedFields, got.ManagedFields)
	})
	t.Run("what is not protobuf is the serializer's to refuse", func(t *testing.T) {
		_, _, err := d.Decode([]byte(`{"kind":"Pod"}`), nil, nil)
		require.Error(t, err)
		_, _, err = d.Decode(append([]byte("k8s\x00"), 0xff, 0xff), nil, nil)
		require.Error(t, err)
	})
}

// viewsOf is what m makes of pods.
func viewsOf(m Mapping, pods []corev1.Pod) []fleet.Pod {
	out := make([]fleet.Pod, 0, len(pods))
	for i := range pods {
		out = append(out, m.View(&pods[i]))
	}
	return out
}

// TestResetPodLeavesNothingOfTheLast: decoded one after another into one
// pod, as streamPods decodes a stream, each of many random pods has the
// view it has decoded alone: nothing of a pod with more containers,
// owners, labels or a status is read as the next one's.
func TestResetPodLeavesNothingOfTheLast(t *testing.T) {
	// Each random pod (every field filled) is followed by a bare one:
	// whatever the first had, the second must not seem to have.
	var pods []corev1.Pod
	for i, p := range randomPods(t, 250) {
		bare := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
		if i%2 == 0 {
			// Or half bare: a status without container statuses,
			// owners without a controller.
			bare.Status.Phase = corev1.PodPending
			bare.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u"}}
		}
		pods = append(pods, p, bare)
	}
	var reused corev1.Pod
	var buf []byte
	for _, m := range mappings(t) {
		tr := trimmer{keys: m.keys()}
		for i, p := range pods {
			raw, err := p.Marshal()
			require.NoError(t, err)
			unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw}
			b, err := unk.Marshal()
			require.NoError(t, err)
			obj := append([]byte(protobufContentPrefix), b...)

			var alone corev1.Pod
			_, err = tr.decodePod(obj, nil, &alone)
			require.NoError(t, err)
			resetPod(&reused)
			buf, err = tr.decodePod(obj, buf[:0], &reused)
			require.NoError(t, err)
			require.Equal(t, m.View(&alone), m.View(&reused), "pod %d, mapping %+v", i, m)
		}
	}
}

// TestResetPodKeepsOnlySmallArrays: what resetPod keeps for the next pod
// is emptied, and a hostile pod's large arrays and maps are not kept.
func TestResetPodKeepsOnlySmallArrays(t *testing.T) {
	for _, tc := range []struct {
		n    int
		kept bool
	}{{1, true}, {keepAtMost, true}, {keepAtMost + 1, false}, {100000, false}} {
		var p corev1.Pod
		p.Spec.Containers = make([]corev1.Container, tc.n)
		p.Status.ContainerStatuses = make([]corev1.ContainerStatus, tc.n)
		p.OwnerReferences = make([]metav1.OwnerReference, tc.n)
		p.Labels, p.Annotations = map[string]string{}, map[string]string{}
		for i := range tc.n {
			p.Labels[fmt.Sprint(i)], p.Annotations[fmt.Sprint(i)] = "v", "v"
		}
		p.Name, p.Status.Phase = "last", corev1.PodRunning
		resetPod(&p)
		assert.Empty(t, p.Name)
		assert.Empty(t, p.Status.Phase)
		assert.Empty(t, p.Spec.Containers)
		assert.Empty(t, p.Status.ContainerStatuses)
		assert.Empty(t, p.OwnerReferences)
		assert.Empty(t, p.Labels)
		assert.Empty(t, p.Annotations)
		assert.Equal(t, tc.kept, cap(p.Spec.Containers) > 0, "%d containers", tc.n)
		assert.Equal(t, tc.kept, cap(p.Status.ContainerStatuses) > 0, "%d container statuses", tc.n)
		assert.Equal(t, tc.kept, cap(p.OwnerReferences) > 0, "%d owner references", tc.n)
		assert.Equal(t, tc.kept, p.Labels != nil, "%d labels", tc.n)
		assert.Equal(t, tc.kept, p.Annotations != nil, "%d annotations", tc.n)
	}
}
