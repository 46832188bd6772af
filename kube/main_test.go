package kube

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the one real control plane this package's tests share, started
// by the first test that needs it; each test works in namespaces of its own.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }

const runnerImage = "ghcr.io/actions/actions-runner:latest"

// finished is a fixed past time at the second precision the API keeps.
var finished = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

func started() metav1.Time { return metav1.NewTime(finished.Add(-time.Hour)) }

func containerStatus(name string, state, last corev1.ContainerState) corev1.ContainerStatus {
	image := runnerImage
	if name != "runner" {
		image = "docker:dind"
	}
	return corev1.ContainerStatus{
		Name:                 name,
		Image:                image,
		ImageID:              image + "@sha256:0000000000000000000000000000000000000000000000000000000000000000",
		State:                state,
		LastTerminationState: last,
		Ready:                state.Running != nil,
	}
}

func stateRunning() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started()}}
}

func stateTerminated(code, signal int32, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:   code,
		Signal:     signal,
		Reason:     reason,
		StartedAt:  started(),
		FinishedAt: metav1.NewTime(finished),
	}}
}

func podStatus(phase corev1.PodPhase, containers ...corev1.ContainerStatus) *corev1.PodStatus {
	return &corev1.PodStatus{Phase: phase, ContainerStatuses: containers}
}

func term(code, signal int32, reason string) *fleet.Termination {
	return &fleet.Termination{ExitCode: code, Signal: signal, Reason: reason, FinishedAt: finished}
}

// newClient is a counting Client with the administrator's rights.
func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	env := plane.Env(t)
	c, err := New(env.Config, opts)
	require.NoError(t, err)
	return c
}

// userClient is a Client for a user who has exactly what RBAC grants it.
func userClient(t *testing.T, user string) *Client {
	t.Helper()
	env := plane.Env(t)
	cfg, err := env.AddUser(user)
	require.NoError(t, err)
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	return c
}

// byName indexes views by namespace/name.
func byName(pods []fleet.Pod) map[string]fleet.Pod {
	m := make(map[string]fleet.Pod, len(pods))
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	return m
}

// controller is an OwnerReference.Controller of true.
func controller() *bool { b := true; return &b }

// checkThenWrite runs a write's server-side dry run and then the write
// itself, the way the reaper does: the dry run must answer as the write will
// and change nothing (the write still meets its preconditions), and the
// write must cost exactly one request. Pods and ARC's objects share it.
func checkThenWrite(t *testing.T, c *Client, want fleet.Result, check, write func() (fleet.Result, error)) {
	t.Helper()
	checked, err := check()
	require.NoError(t, err)
	assert.Equal(t, want, checked, "the dry run answers as the write will")

	before := c.Counts()
	got, err := write()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, int64(1), c.Counts().Sub(before).Requests, "one request per write")
}

// forbiddenCase is one call that RBAC must refuse.
type forbiddenCase struct {
	name string
	call func() error
}

// assertForbidden runs each call as a subtest: it must fail, and with an
// error that IsForbidden recognises, so the sweep can say which permission
// is missing.
func assertForbidden(t *testing.T, cases []forbiddenCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "apierrors.IsForbidden(%v)", err)
		})
	}
}

// refusedWrite is a write whose refusal must carry no result.
func refusedWrite(t *testing.T, f func() (fleet.Result, error)) func() error {
	return func() error {
		res, err := f()
		assert.Empty(t, res)
		return err
	}
}
