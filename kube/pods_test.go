package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestListPodsReadsKubeletStatus writes statuses the way a kubelet leaves
// them and checks what the view makes of each after a round trip through
// the API server.
func TestListPodsReadsKubeletStatus(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "kube")
	none := corev1.ContainerState{}
	arc := map[string]string{
		"app":                      "runner",
		"actions-ephemeral-runner": "True",
		LabelOrganization:          "Acme",
		LabelRepository:            "API",
	}
	tests := []struct {
		name      string
		labels    map[string]string
		owner     bool
		sidecar   bool
		status    *corev1.PodStatus
		wantPhase string
		want      fleet.Container
		wantStamp bool
	}{
		{name: "pending-no-status", wantPhase: "Pending"},
		{name: "running", status: podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), none)),
			wantPhase: "Running", want: fleet.Container{Found: true, Running: true}},
		{name: "failed-oom", status: podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), none)),
			wantPhase: "Failed", want: fleet.Container{Found: true, Terminated: term(137, 0, "OOMKilled")}},
		{name: "succeeded", status: podStatus(corev1.PodSucceeded, containerStatus("runner", stateTerminated(0, 0, "Completed"), none)),
			wantPhase: "Succeeded", want: fleet.Container{Found: true, Terminated: term(0, 0, "Completed")}},
		{name: "running-runner-dead-sidecar-alive", sidecar: true,
			status: podStatus(corev1.PodRunning,
				containerStatus("dind", stateRunning(), none),
				containerStatus("runner", stateTerminated(137, 0, "Error"), stateTerminated(143, 15, "Error"))),
			wantPhase: "Running", want: fleet.Container{Found: true, Terminated: term(137, 0, "Error"), LastTerminated: term(143, 15, "Error")}},
		{name: "running-runner-restarted", status: podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), stateTerminated(7, 0, "Error"))),
			wantPhase: "Running", want: fleet.Container{Found: true, Running: true, LastTerminated: term(7, 0, "Error")}},
		{name: "failed-no-runner-status", sidecar: true, status: podStatus(corev1.PodFailed, containerStatus("dind", stateTerminated(1, 0, "Error"), none)),
			wantPhase: "Failed", want: fleet.Container{}},
		{name: "stamped-arc", labels: map[string]string{"pool/claimed-by": "dispatcher-1"}, owner: true,
			status:    podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), none)),
			wantPhase: "Running", want: fleet.Container{Found: true, Running: true}, wantStamp: true},
	}
	created := map[string]*corev1.Pod{}
	for _, tc := range tests {
		labels := map[string]string{}
		for k, v := range arc {
			labels[k] = v
		}
		for k, v := range tc.labels {
			labels[k] = v
		}
		p := testenv.RunnerPod{Name: tc.name, Labels: labels, Sidecar: tc.sidecar, Status: tc.status, Unscheduled: tc.status == nil}
		if tc.name == "running-runner-restarted" {
			p.RestartPolicy = corev1.RestartPolicyAlways
		}
		if tc.owner {
			p.Owner = &metav1.OwnerReference{
				APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner",
				Name: tc.name, UID: "0b7f3f1c-1111-4222-8333-944455556666", Controller: controller(),
			}
		}
		created[tc.name] = env.RunnerPod(t, ns, p)
	}

	c := newClient(t, Options{})
	m := Mapping{Scopes: mustScopes(t, "repo:acme/api"), StampLabel: "pool/claimed-by"}
	pods, err := c.ListPods(context.Background(), []string{ns}, "app=runner", m)
	require.NoError(t, err)
	require.Len(t, pods, len(tests))
	got := byName(pods)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := got[ns+"/"+tc.name]
			require.True(t, ok)
			obj := created[tc.name]
			assert.Equal(t, string(obj.UID), v.UID)
			assert.Equal(t, obj.ResourceVersion, v.ResourceVersion, "the view holds the resourceVersion after the status write")
			assert.Equal(t, tc.name, v.RunnerName)
			assert.Equal(t, "repo:acme/api", v.ScopeKey)
			assert.Equal(t, tc.wantPhase, v.Phase)
			assert.WithinDuration(t, obj.CreationTimestamp.Time, v.CreatedAt.Time(), 0)
			assert.False(t, v.Deleting)
			assert.Equal(t, tc.wantStamp, v.Stamped)
			assert.Equal(t, utc(tc.want), utc(v.Runner))
			if tc.owner {
				require.NotNil(t, v.Owner)
				assert.Equal(t, fleet.Owner{APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner",
					Name: tc.name, UID: "0b7f3f1c-1111-4222-8333-944455556666"}, *v.Owner)
			} else {
				assert.Nil(t, v.Owner)
			}
		})
	}
}

// utc puts a container's times in one location so that equal instants
// compare equal.
func utc(c fleet.Container) fleet.Container {
	for _, tp := range []**fleet.Termination{&c.Terminated, &c.LastTerminated} {
		if *tp != nil {
			t := **tp
			t.FinishedAt = t.FinishedAt.UTC()
			*tp = &t
		}
	}
	return c
}

// TestListPods checks which pods each list returns and that it costs exactly
// one request per namespace as a watch-list, and one per page per namespace
// in pages.
func TestListPods(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	nsA := env.Namespace(t, "kube")
	nsB := env.Namespace(t, "kube")
	nsC := env.Namespace(t, "kube")
	nsP := env.Namespace(t, "kube")
	// The run label keeps the all-namespaces list to this test's pods.
	match := map[string]string{"app": "runner", "run": nsA}
	selector := "app=runner,run=" + nsA
	running := podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))

	var all []string
	add := func(ns, name string, labels map[string]string) {
		env.RunnerPod(t, ns, testenv.RunnerPod{Name: name, Labels: labels, Status: running})
		all = append(all, ns+"/"+name)
	}
	for i := 1; i <= 3; i++ {
		add(nsA, fmt.Sprintf("a-%d", i), match)
	}
	env.RunnerPod(t, nsA, testenv.RunnerPod{Name: "a-other", Labels: map[string]string{"app": "other", "run": nsA}, Status: running})
	add(nsB, "b-1", match)
	add(nsC, "c-1", match)
	for i := 1; i <= 5; i++ {
		add(nsP, fmt.Sprintf("p-%d", i), match)
	}
	names := func(ns string, n ...string) []string {
		out := make([]string, len(n))
		for i, s := range n {
			out[i] = ns + "/" + s
		}
		return out
	}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	aPods := names(nsA, "a-1", "a-2", "a-3")
	pPods := names(nsP, "p-1", "p-2", "p-3", "p-4", "p-5")

	tests := []struct {
		name         string
		namespaces   []string
		selector     string
		pageSize     int64
		want         []string
		wantPages    int64 // requests in pages
		wantWatchers int64 // requests as watch-lists
	}{
		{"one namespace, selector excludes a pod", []string{nsA}, selector, 0, aPods, 1, 1},
		{"two namespaces", []string{nsA, nsB}, selector, 0, cat(aPods, names(nsB, "b-1")), 2, 2},
		{"a namespace named twice is listed once", []string{nsA, nsB, nsA}, selector, 0, cat(aPods, names(nsB, "b-1")), 2, 2},
		{"the excluded pod alone", []string{nsA}, "app=other,run=" + nsA, 0, names(nsA, "a-other"), 1, 1},
		{"no match is an empty list, one request", []string{nsB}, "app=nothing", 0, nil, 1, 1},
		{"all namespaces, one list", nil, selector, 0, all, 1, 1},
		{"five pods in pages of two", []string{nsP}, selector, 2, pPods, 3, 1},
		{"pages per namespace", []string{nsP, nsB}, selector, 2, cat(pPods, names(nsB, "b-1")), 4, 2},
		{"one pod per page", []string{nsP}, selector, 1, pPods, 5, 1},
	}
	for _, tc := range tests {
		for _, pages := range []bool{false, true} {
			mode, wantRequests := "watch-list", tc.wantWatchers
			if pages {
				mode, wantRequests = "pages", tc.wantPages
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				c := newClient(t, Options{PageSize: tc.pageSize, Pages: pages})
				pods, err := c.ListPods(ctx, tc.namespaces, tc.selector, Mapping{})
				require.NoError(t, err)
				assert.LessOrEqual(t, cap(pods)-len(pods), len(pods)/8, "the views kept without the room append left")
				got := make([]string, 0, len(pods))
				for _, p := range pods {
					got = append(got, p.Namespace+"/"+p.Name)
				}
				want := append([]string(nil), tc.want...)
				sort.Strings(got)
				sort.Strings(want)
				if want == nil {
					want = []string{}
				}
				assert.Equal(t, want, got, "no pod missing, none twice")
				assert.Equal(t, wantRequests, c.Counts().Requests, "requests")
			})
		}
	}

	t.Run("an empty namespace name among named ones is refused", func(t *testing.T) {
		c := newClient(t, Options{})
		pods, err := c.ListPods(ctx, []string{nsA, ""}, selector, Mapping{})
		require.Error(t, err)
		assert.Nil(t, pods)
		assert.Zero(t, c.Counts().Requests)
	})
	t.Run("a namespace that does not exist is an empty list", func(t *testing.T) {
		c := newClient(t, Options{})
		pods, err := c.ListPods(ctx, []string{nsA + "-missing"}, selector, Mapping{})
		require.NoError(t, err)
		assert.Empty(t, pods)
	})
	t.Run("a bad selector fails with the namespace named", func(t *testing.T) {
		c := newClient(t, Options{})
		_, err := c.ListPods(ctx, []string{nsA}, "app in (", Mapping{})
		require.ErrorContains(t, err, "list pods in "+nsA)
	})
	t.Run("negative page size is refused", func(t *testing.T) {
		_, err := New(env.Config, Options{PageSize: -1})
		require.Error(t, err)
	})
}

func TestDeletePod(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	admin := env.Client.CoreV1()
	running := podStatus(corev1.PodRunning, containerStatus("runner", stateRunning(), corev1.ContainerState{}))

	tests := []struct {
		name string
		// after runs between the view and the delete: what the rest of
		// the cluster did meanwhile.
		after        func(t *testing.T, ns, name string)
		want         fleet.Result
		wantSurvivor bool
	}{
		{"deletes the pod that was judged", nil, fleet.Deleted, false},
		{"already deleted by someone else", func(t *testing.T, ns, name string) {
			require.NoError(t, admin.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		}, fleet.AlreadyGone, false},
		{"replaced by a new pod of the same name", func(t *testing.T, ns, name string) {
			require.NoError(t, admin.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: name, Labels: map[string]string{"app": "runner"}, Status: running})
		}, fleet.Changed, true},
		{"stamped after it was viewed", func(t *testing.T, ns, name string) {
			p, err := admin.Pods(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			p.Labels["pool/claimed-by"] = "dispatcher-1"
			_, err = admin.Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			require.NoError(t, err)
		}, fleet.Changed, true},
		{"status written after it was viewed", func(t *testing.T, ns, name string) {
			p, err := admin.Pods(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			p.Status = *podStatus(corev1.PodFailed, containerStatus("runner", stateTerminated(137, 0, "OOMKilled"), corev1.ContainerState{}))
			_, err = admin.Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			require.NoError(t, err)
		}, fleet.Changed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "kube")
			env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Labels: map[string]string{"app": "runner"}, Status: running})
			c := newClient(t, Options{})
			pods, err := c.ListPods(ctx, []string{ns}, "app=runner", Mapping{StampLabel: "pool/claimed-by"})
			require.NoError(t, err)
			require.Len(t, pods, 1)
			view := pods[0]
			if tc.after != nil {
				tc.after(t, ns, view.Name)
			}

			checkThenWrite(t, c, tc.want,
				func() (fleet.Result, error) { return c.DryRun().DeletePod(ctx, view) },
				func() (fleet.Result, error) { return c.DeletePod(ctx, view) })

			left, err := admin.Pods(ns).Get(ctx, view.Name, metav1.GetOptions{})
			if !tc.wantSurvivor {
				require.True(t, apierrors.IsNotFound(err), "pod should be gone, got %v", err)
				return
			}
			require.NoError(t, err, "the pod that was not judged must survive")
			switch tc.name {
			case "replaced by a new pod of the same name":
				assert.NotEqual(t, view.UID, string(left.UID), "the survivor is the new pod")
			case "stamped after it was viewed":
				assert.Equal(t, "dispatcher-1", left.Labels["pool/claimed-by"], "the stamp survives")
			}
		})
	}

	t.Run("a view without preconditions is refused without a request", func(t *testing.T) {
		ns := env.Namespace(t, "kube")
		p := env.RunnerPod(t, ns, testenv.RunnerPod{Name: "runner-1", Status: running})
		c := newClient(t, Options{})
		for _, v := range []fleet.Pod{
			{Namespace: ns, Name: p.Name, ResourceVersion: p.ResourceVersion},
			{Namespace: ns, Name: p.Name, UID: string(p.UID)},
		} {
			_, err := c.DeletePod(ctx, v)
			require.ErrorContains(t, err, "refusing an unconditional delete")
		}
		assert.Zero(t, c.Counts().Requests)
		_, err := admin.Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		require.NoError(t, err)
	})
}

func TestDeleteServiceAccount(t *testing.T) {
	env := plane.Env(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		exists bool
		want   fleet.Result
	}{
		{"exists", true, fleet.Deleted},
		{"already gone", false, fleet.AlreadyGone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t, "kube")
			if tc.exists {
				_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner-1"}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			c := newClient(t, Options{})
			checked, err := c.DryRun().DeleteServiceAccount(ctx, ns, "runner-1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, checked, "the dry run answers as the delete will")
			if tc.exists {
				_, err = env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "runner-1", metav1.GetOptions{})
				require.NoError(t, err, "the dry run deleted nothing")
			}
			got, err := c.DeleteServiceAccount(ctx, ns, "runner-1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			_, err = env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "runner-1", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "got %v", err)
		})
	}
}

// TestListPodsCancelled: a cancelled sweep stops listing and says so.
func TestListPodsCancelled(t *testing.T) {
	env := plane.Env(t)
	ns := env.Namespace(t, "kube")
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	c := newClient(t, Options{})
	pods, err := c.ListPods(ctx, []string{ns}, "", Mapping{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, pods)
}

// TestViews: views gathered in blocks come back in order, in one slice of
// their number, after any truncation, across the blocks' edges.
func TestViews(t *testing.T) {
	tests := []struct {
		name    string
		add     int
		keep    int // truncate to this after adding; -1 for none
		thenAdd int
	}{
		{name: "none", add: 0, keep: -1},
		{name: "fewer than a block", add: 10, keep: -1},
		{name: "exactly a block", add: viewBlock, keep: -1},
		{name: "one past a block", add: viewBlock + 1, keep: -1},
		{name: "several blocks", add: 3*viewBlock + 7, keep: -1},
		{name: "truncated inside a block", add: 2*viewBlock + 5, keep: viewBlock + 3, thenAdd: 4},
		{name: "truncated to a block's edge", add: 2*viewBlock + 5, keep: viewBlock, thenAdd: viewBlock + 1},
		{name: "truncated to nothing", add: viewBlock + 5, keep: 0, thenAdd: 2},
		{name: "truncated to more than it has", add: 5, keep: 9, thenAdd: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v views
			var want []fleet.Pod
			next := 0
			add := func(n int) {
				for range n {
					p := fleet.Pod{Name: strconv.Itoa(next)}
					next++
					v.add(p)
					want = append(want, p)
				}
			}
			add(tc.add)
			if tc.keep >= 0 {
				v.truncate(tc.keep)
				want = want[:min(tc.keep, len(want))]
				require.Equal(t, len(want), v.len())
				for _, b := range v.blocks {
					assert.NotEmpty(t, b, "no empty block is kept")
				}
			}
			add(tc.thenAdd)
			require.Equal(t, len(want), v.len())
			got := v.all()
			assert.Equal(t, len(want), cap(got), "exactly their number")
			if len(want) == 0 {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, want, got)
			}
			assert.Zero(t, v.len(), "all empties it")
			assert.Nil(t, v.blocks, "and lets go of its blocks")
		})
	}
}

// TestViewsTruncateReleasesStrings: a view dropped by truncate keeps no
// string alive in its block's spare room.
func TestViewsTruncateReleasesStrings(t *testing.T) {
	var v views
	for i := range 10 {
		v.add(fleet.Pod{Name: "pod-" + strconv.Itoa(i), Owner: &fleet.Owner{Name: "er-" + strconv.Itoa(i), UID: "u-" + strconv.Itoa(i)}})
	}
	owners := make([]*fleet.Owner, 10)
	for i := range owners {
		owners[i] = v.blocks[0][i].Owner
	}
	v.truncate(4)
	b := v.blocks[0]
	for i, p := range b[len(b):10] {
		assert.Equal(t, fleet.Pod{}, p)
		assert.Equal(t, fleet.Owner{}, *owners[4+i], "a dropped view's owner keeps no strings")
	}
	for i, p := range b {
		assert.Equal(t, fleet.Owner{Name: "er-" + strconv.Itoa(i), UID: "u-" + strconv.Itoa(i)}, *p.Owner, "a kept view's owner is whole")
	}
}

// TestViewsPackTheirStrings: the strings a view keeps and its owner
// reference are copied into the views' blocks, every value as it was
// given: a runner name and an owner name that are the pod's name share its
// bytes, other names have their own, an empty string stays empty and a
// string too long for a block keeps its own. Packing later views never
// changes an earlier one's.
func TestViewsPackTheirStrings(t *testing.T) {
	given := func(i int) fleet.Pod {
		name := fmt.Sprintf("arc-runner-set-%05d-runner-%05d", i, i)
		p := fleet.Pod{
			Namespace: "ci", Name: name, RunnerName: strings.Clone(name),
			UID: fmt.Sprintf("2b1f0c7e-5d7a-4f43-9a55-%012d", i), ResourceVersion: strconv.Itoa(1000 + i),
			Owner: &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind,
				Name: strings.Clone(name), UID: fmt.Sprintf("9c0d3a1e-0b7f-4c2e-8d41-%012d", i)},
		}
		switch i % 5 {
		case 1:
			p.RunnerName = "registered-" + name
			p.Owner.Name = "owner-" + name
		case 2:
			p.Owner, p.ResourceVersion = nil, ""
		case 3:
			p.RunnerName = strings.Repeat("r", textBlock)
		case 4:
			p.RunnerName = ""
		}
		return p
	}
	at := func(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }
	const n = 3 * textBlock / 64 // several text blocks
	var v views
	var orig, want []fleet.Pod
	add := func(i int) {
		p := given(i)
		orig = append(orig, p)
		v.add(p)
		want = append(want, given(i))
	}
	// A stream that broke gives back its views, and its namespace's
	// pages add them again.
	for i := range n / 2 {
		add(i)
	}
	v.truncate(n / 3)
	orig, want = orig[:n/3], want[:n/3]
	for i := n / 3; i < n; i++ {
		add(i)
	}
	got := v.all()
	require.Len(t, got, n)
	var owners, follows, adjacent int
	for i := range got {
		p := got[i]
		// Every field as given, the owner compared by value.
		w, g := want[i], p
		if w.Owner != nil && g.Owner != nil {
			assert.Equal(t, *w.Owner, *g.Owner)
			w.Owner, g.Owner = nil, nil
		}
		assert.Equal(t, w, g)
		if want[i].Owner == nil {
			assert.Nil(t, p.Owner)
		} else {
			require.NotNil(t, p.Owner)
			assert.NotSame(t, orig[i].Owner, p.Owner, "the owner is copied")
			assert.NotEqual(t, at(orig[i].Owner.UID), at(p.Owner.UID), "the owner's UID is copied")
			owners++
		}
		// Copied, not kept where they were given.
		assert.NotEqual(t, at(orig[i].Name), at(p.Name))
		assert.NotEqual(t, at(orig[i].UID), at(p.UID))
		switch i % 5 {
		case 1:
			assert.NotEqual(t, at(p.Name), at(p.RunnerName))
			assert.NotEqual(t, at(p.Name), at(p.Owner.Name))
		case 3:
			assert.Equal(t, at(orig[i].RunnerName), at(p.RunnerName), "a string too long for a block keeps its own")
		case 4:
			assert.Empty(t, p.RunnerName)
		default:
			assert.Equal(t, at(p.Name), at(p.RunnerName), "the runner name is the pod's")
		}
		if p.Owner != nil && i%5 != 1 {
			assert.Equal(t, at(p.Name), at(p.Owner.Name), "the owner's name is the pod's")
		}
		// Packed one after another: the UID follows the name (or the
		// runner name packed after it) in the same block.
		if next := at(p.Name) + uintptr(len(p.Name)); at(p.UID) == next || (i%5 == 1 && at(p.UID) == next+uintptr(len(p.RunnerName))) {
			follows++
		}
		if i > 0 && p.Owner != nil && got[i-1].Owner != nil &&
			uintptr(unsafe.Pointer(p.Owner))-uintptr(unsafe.Pointer(got[i-1].Owner)) == unsafe.Sizeof(fleet.Owner{}) {
			adjacent++
		}
	}
	assert.Greater(t, follows, n*9/10, "strings packed in blocks")
	assert.Greater(t, adjacent, owners/3, "owners packed in blocks")
}

// TestViewsStartSmall: a list of a few pods takes a few small blocks, not
// the 32 KiB of text and 1,024 owners that a large fleet's blocks hold;
// they double up to those as the list grows.
func TestViewsStartSmall(t *testing.T) {
	var v views
	p := fleet.Pod{Name: "runner-a", UID: "u", Owner: &fleet.Owner{Name: "runner-a", UID: "u-er"}}
	v.add(p)
	assert.Equal(t, firstOwnerBlock, cap(v.owners))
	assert.Less(t, v.text.Cap(), 2*firstTextBlock)
	for i := range 5000 {
		p.Name = fmt.Sprintf("runner-%06d", i)
		v.add(p)
	}
	assert.Equal(t, viewBlock, cap(v.owners))
	assert.GreaterOrEqual(t, v.text.Cap(), textBlock)
	assert.Less(t, v.text.Cap(), 2*textBlock)
}
