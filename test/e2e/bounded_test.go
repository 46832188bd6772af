package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Every wait bounded, through the compiled binary: a Kubernetes
// API that never answers, the sweep's own deadline, and SIGTERM or SIGINT
// while an action is in flight.

// silentKubeconfig writes a kubeconfig whose API server accepts every
// connection on loopback and never answers.
func silentKubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.ServerKubeconfig(t, "http://"+testenv.SilentServer(t))
}

// An API server that accepts the connection and never answers: the sweep
// fails at REAPER_KUBE_TIMEOUT with an error that says so, exits 1, and
// deletes nothing, where it used to hang for ever.
func TestKubernetesAPIThatNeverAnswers(t *testing.T) {
	t.Parallel()
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	w := newWorld(t, map[string]string{
		"KUBECONFIG":          silentKubeconfig(t),
		"REAPER_KUBE_TIMEOUT": "1s",
		"REAPER_LEDGER":       "file:" + ledger,
	})
	reg := w.runner("acme-offline", "offline", false)

	start := time.Now()
	r := w.sweep()
	took := time.Since(start)
	r.requireCode(t, 1)
	assert.Less(t, took, 15*time.Second, "the sweep ended at the request's timeout")
	s := r.summary(t)
	assert.Contains(t, s["error"], "observe pods")
	assert.Contains(t, s["error"], "no answer from the Kubernetes API within 1s", "the error says the request timed out")
	assert.True(t, w.runnerExists(reg.ID), "nothing was deleted on GitHub")
	assert.Empty(t, w.requests(ghsim.EndpointDelete))
	_, err := os.Stat(ledger)
	assert.True(t, os.IsNotExist(err), "nothing was saved: the ledger file was not written")
}

// terminalPair plants two terminal pods, each with its offline
// registration, one created a second before the other so that the order
// of their actions is known: first goes first.
func terminalPair(w *world) (first, second *corev1.Pod, firstReg, secondReg ghsim.Runner) {
	w.t.Helper()
	dead := testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")}
	firstReg = w.runner("acme-first", "offline", false)
	first = w.pod("acme-first", dead)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has whole seconds
	secondReg = w.runner("acme-second", "offline", false)
	second = w.pod("acme-second", dead)
	return first, second, firstReg, secondReg
}

// The sweep's deadline: past REAPER_SWEEP_TIMEOUT less the 5 s spare no
// action starts; the one in flight finishes; the rest are not-reached and
// the sweep exits 3 (degraded).
func TestSweepDeadlineLeavesTheRestNotReached(t *testing.T) {
	t.Parallel()
	// Actions may start for the first 3.5 s; the first one's registration
	// delete takes 4 s, within the 5 s an action may take.
	w := newWorld(t, map[string]string{"REAPER_SWEEP_TIMEOUT": "8500ms"})
	_, _, firstReg, secondReg := terminalPair(w)
	w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Hang: 4 * time.Second, Times: 1})

	r := w.sweep()
	r.requireCode(t, 3)
	acts := r.actions(t)
	assert.Equal(t, "deleted", acts["acme-first"]["result"], "the action in flight finished")
	assert.Equal(t, "deleted", acts["acme-first"]["registration_result"])
	assert.Equal(t, "not-reached", acts["acme-second"]["result"], "no action starts within the spare time of the deadline")
	assert.False(t, w.podExists("acme-first"))
	assert.False(t, w.runnerExists(firstReg.ID))
	assert.True(t, w.podExists("acme-second"))
	assert.True(t, w.runnerExists(secondReg.ID))
	s := r.summary(t)
	assert.EqualValues(t, 3, s["status"])
	assert.Equal(t, map[string]any{"deleted": 1.0, "not-reached": 1.0}, s["results"])
}

// Observation that runs past the deadline fails the sweep: nothing is
// saved and nothing deleted, not even a terminal pod, which needs no
// GitHub word; the error says the deadline passed.
func TestSweepDeadlineDuringObservation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_SWEEP_TIMEOUT": "6s", "REAPER_GITHUB_TIMEOUT": "1m"})
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Hang: time.Minute})

	start := time.Now()
	r := w.sweep()
	took := time.Since(start)
	r.requireCode(t, 1)
	assert.Less(t, took, 20*time.Second, "the sweep ended at its deadline, not at the request's timeout")
	assert.True(t, w.podExists("acme-dead"), "nothing is deleted after an observation cut short")
	_, saved := w.marksJSON()
	assert.False(t, saved, "the ledger was not saved")
	s := r.summary(t)
	assert.Contains(t, s["error"], "REAPER_SWEEP_TIMEOUT")
	assert.Contains(t, s["stopped"], "REAPER_SWEEP_TIMEOUT")
}

// started is the binary running in the background.
type started struct {
	w    *world
	p    *testenv.Started
	args []string
}

func (w *world) start(args ...string) *started {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	w.t.Cleanup(cancel)
	p, err := testenv.StartBinary(ctx, bin, w.env, args...)
	require.NoError(w.t, err)
	return &started{w: w, p: p, args: args}
}

func (s *started) wait() run {
	s.w.t.Helper()
	r, err := s.p.Wait()
	require.NoError(s.w.t, err)
	return s.w.check(r, s.args...)
}

// waitFor polls the simulator until a request to endpoint is being
// answered (a hanging fault holds it), and returns it.
func (w *world) waitFor(endpoint string) ghsim.Request {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if rs := w.requests(endpoint); len(rs) > 0 {
			return rs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("no %s request reached the simulator", endpoint)
	return ghsim.Request{}
}

// SIGTERM, as the kubelet sends it at activeDeadlineSeconds or on a node
// drain, while an action's registration delete is in flight: that action
// finishes (its registration and its pod are gone, not one without the
// other), no other action starts (not-reached), the summary is written and
// the process exits 3 as soon as the action has finished. SIGINT is the
// same, and a second signal changes nothing.
func TestSignalDuringAnAction(t *testing.T) {
	t.Parallel()
	const hang = 3 * time.Second
	for _, tc := range []struct {
		name    string
		signals []syscall.Signal
		says    string
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, "received SIGTERM"},
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, "received SIGINT"},
		{"SIGTERM twice", []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, "received SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, nil)
			_, _, firstReg, secondReg := terminalPair(w)
			w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Hang: hang, Times: 1})

			proc := w.start("sweep")
			inFlight := w.waitFor(ghsim.EndpointDelete)
			require.True(t, strings.HasSuffix(inFlight.Path, "/"+strconv.FormatInt(firstReg.ID, 10)), "the first action's delete is in flight: %s", inFlight.Path)
			signalled := time.Now()
			for i, sig := range tc.signals {
				if i > 0 {
					time.Sleep(300 * time.Millisecond)
				}
				require.NoError(t, proc.p.Signal(sig))
			}
			r := proc.wait()
			exited := time.Since(signalled)

			r.requireCode(t, 3)
			assert.Less(t, exited, hang+5*time.Second, "the process exits once the action in flight has finished")
			acts := r.actions(t)
			assert.Equal(t, "deleted", acts["acme-first"]["result"], "the action in flight finished")
			assert.Equal(t, "deleted", acts["acme-first"]["registration_result"])
			assert.Equal(t, "deleted", acts["acme-first"]["pod_result"])
			assert.False(t, w.runnerExists(firstReg.ID))
			assert.False(t, w.podExists("acme-first"), "its pod went with its registration")
			assert.Equal(t, "not-reached", acts["acme-second"]["result"], "no action starts after the signal")
			assert.True(t, w.runnerExists(secondReg.ID))
			assert.True(t, w.podExists("acme-second"))
			assert.Len(t, w.requests(ghsim.EndpointDelete), 1, "one registration delete was sent")
			s := r.summary(t)
			assert.EqualValues(t, 3, s["status"])
			assert.Contains(t, s["stopped"], tc.says, "the summary says why it stopped")
			assert.Equal(t, map[string]any{"deleted": 1.0, "not-reached": 1.0}, s["results"])
		})
	}
}

// A signal during observation stops the sweep: nothing is saved or
// deleted, the summary says why, and the process exits 1 at once rather
// than waiting for the list.
func TestSignalDuringObservation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string]string{"REAPER_GITHUB_TIMEOUT": "1m"})
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Hang: time.Minute})

	proc := w.start("sweep")
	w.waitFor(ghsim.EndpointList)
	signalled := time.Now()
	require.NoError(t, proc.p.Signal(syscall.SIGTERM))
	r := proc.wait()

	r.requireCode(t, 1)
	assert.Less(t, time.Since(signalled), 5*time.Second, "the process stops at once")
	assert.True(t, w.podExists("acme-dead"), "nothing is deleted")
	_, saved := w.marksJSON()
	assert.False(t, saved, "the ledger was not saved")
	s := r.summary(t)
	assert.Contains(t, s["stopped"], "received SIGTERM")
	assert.Contains(t, s["error"], "received SIGTERM")
	assert.Empty(t, r.msg("action"))
}

// The Lambda keeps its invocation's deadline, and REAPER_SWEEP_TIMEOUT,
// when shorter, wins: here the invocation allows 50 s, the sweep 8.5 s, so
// the second action is not reached and the answer says degraded (3),
// which is not a failed invocation.
func TestLambdaShorterSweepTimeoutWins(t *testing.T) {
	t.Parallel()
	lbin, d := lambdaParts(t)
	w := newWorld(t, map[string]string{"REAPER_SWEEP_TIMEOUT": "8500ms"})
	sm, _ := secretsManager(t, w.token)
	table := newTable(t, d)
	_, _, firstReg, secondReg := terminalPair(w)
	w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Hang: 4 * time.Second, Times: 1})

	em := testenv.StartEmulator(t, lbin, testenv.EmulatorOptions{Timeout: 50 * time.Second, Env: lambdaEnv(t, w, d, sm, table)})
	inv := invokeScheduled(t, em)
	s := answer(t, em, inv)
	assert.EqualValues(t, 3, s["status"], "a degraded sweep is not a failed invocation")
	assert.Equal(t, map[string]any{"deleted": 1.0, "not-reached": 1.0}, s["results"])
	assert.Less(t, inv.Finished.Sub(inv.Started), 20*time.Second, "the sweep's own deadline, not the invocation's, ended it")
	assert.False(t, w.runnerExists(firstReg.ID))
	assert.False(t, w.podExists("acme-first"))
	assert.True(t, w.runnerExists(secondReg.ID))
	assert.True(t, w.podExists("acme-second"))
}
