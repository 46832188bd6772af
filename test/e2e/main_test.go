// Package e2e_test runs the compiled runner-reaper binary as a process, the
// way the CronJob runs it, against a real kube-apiserver (envtest) and the
// GitHub simulator. The in-process tests of package sweep prove the logic;
// these prove what an operator actually gets: the exit status, the JSON
// lines on stdout, what is left in the cluster and on GitHub, and that the
// only state carried from one run to the next is the ledger ConfigMap.
//
// Durations are real and short (confirm-after 2s, registration deadline 1s,
// stamp max age 2s), so the tests sleep just past them between sweeps rather
// than faking a clock: a fresh process per sweep has no clock to fake.
package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

var (
	// env is the one control plane every test shares; each test works in a
	// namespace of its own.
	env *testenv.Env
	// bin is the runner-reaper binary, built once for the package.
	bin string
	// kubeconfig is an administrator's kubeconfig, written once: envtest's
	// user provisioning is not meant to be called from parallel tests.
	kubeconfig string
)

const (
	scope      = "org:acme"
	ledgerName = "runner-reaper-ledger"
	stampLabel = "pool.example.com/claimed-by"

	// The holds every world runs with, as the binary reads them.
	confirmAfter         = 2 * time.Second
	registrationDeadline = 1 * time.Second
	stampMaxAge          = 2 * time.Second
	// pastConfirm is slept between a marking sweep and the sweep that may
	// act: just past the longest hold, with room for clock granularity.
	pastConfirm = confirmAfter + 300*time.Millisecond
	// pastDeadline is slept after creating pods that must be past the
	// registration deadline. creationTimestamp has whole-second precision
	// and is truncated, so this much always suffices.
	pastDeadline = registrationDeadline + 200*time.Millisecond
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

// runMain builds the binary while the control plane starts (both take
// seconds), runs the tests, and cleans up whatever way they end: every e2e
// test needs both, so nothing here is lazy.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runner-reaper-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	built := make(chan error, 1)
	go func() {
		var err error
		bin, err = testenv.BuildBinary(dir)
		built <- err
	}()
	e, startErr := testenv.Start()
	buildErr := <-built
	if startErr != nil {
		fmt.Fprintln(os.Stderr, "e2e:", startErr)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop control plane:", err)
		}
	}()
	if buildErr != nil {
		fmt.Fprintln(os.Stderr, "e2e:", buildErr)
		return 1
	}
	env = e
	if kubeconfig, err = env.Kubeconfig(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// world is one test's universe: a namespace on the shared API server, a
// GitHub simulator of its own, and the exact environment the binary is run
// with. Each world has its own token, so that a leak is pinned to the test
// that caused it.
type world struct {
	t     *testing.T
	ns    string
	sim   *ghsim.Sim
	token string
	env   map[string]string
	// secrets are more strings no output may hold: an App world's private
	// key lines. The JWTs and installation tokens the simulator saw and
	// minted are checked too.
	secrets []string
}

// newWorld sets up a world. extra overrides or adds REAPER_ variables; an
// empty value removes one.
func newWorld(t *testing.T, extra map[string]string) *world {
	t.Helper()
	token := "ghp_e2e_" + randomHex(t)
	sim := ghsim.New(ghsim.Options{Token: token})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope(scope)
	ns := env.Namespace(t, "e2e")
	e := map[string]string{
		"KUBECONFIG":                   kubeconfig,
		"REAPER_SCOPES":                scope,
		"REAPER_NAMESPACES":            ns,
		"REAPER_GITHUB_API_URL":        url,
		"REAPER_GITHUB_TOKEN":          token,
		"REAPER_GITHUB_TIMEOUT":        "5s",
		"REAPER_LEDGER":                "configmap:" + ns + "/" + ledgerName,
		"REAPER_CONFIRM_AFTER":         confirmAfter.String(),
		"REAPER_REGISTRATION_DEADLINE": registrationDeadline.String(),
		"REAPER_STAMP_MAX_AGE":         stampMaxAge.String(),
		// The default 0.25 of the managed pods would bound these small
		// fleets to one or two actions a sweep; the bound has a test of
		// its own.
		"REAPER_MAX_FRACTION": "1",
	}
	for k, v := range extra {
		if v == "" {
			delete(e, k)
		} else {
			e[k] = v
		}
	}
	return &world{t: t, ns: ns, sim: sim, token: token, env: e}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// run is one run of the binary with its log lines decoded.
type run struct {
	testenv.Run
	// Logs are the JSON log lines: stdout for a sweep, stderr for an
	// audit (whose stdout is the table).
	Logs []map[string]any
}

// sweep runs `runner-reaper sweep args...`.
func (w *world) sweep(args ...string) run {
	w.t.Helper()
	return w.exec(append([]string{"sweep"}, args...)...)
}

// exec runs the binary once and applies the checks every run must pass:
// safety rule 5 (no credential, the token or an App's key, JWTs and
// installation tokens, appears in any output), and for a run that got past
// configuration, every log line is JSON.
func (w *world) exec(args ...string) run {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := testenv.RunBinary(ctx, bin, w.env, args...)
	require.NoError(w.t, err)
	return w.check(r, args...)
}

// check applies the checks of exec to a run of the binary with args.
func (w *world) check(r testenv.Run, args ...string) run {
	w.t.Helper()
	if w.token != "" {
		assertNoSecret(w.t, w.token, r)
	}
	if sent := w.env["REAPER_GITHUB_TOKEN"]; sent != "" && sent != w.token {
		assertNoSecret(w.t, sent, r)
	}
	for _, secret := range append(w.sim.Credentials(), w.secrets...) {
		assertNoSecret(w.t, secret, r)
	}

	out := run{Run: r}
	if r.Code == 2 {
		return out // configuration errors are plain text on stderr
	}
	logs := r.Stdout
	switch {
	case len(args) > 0 && args[0] == "history":
		return out // its stdout is the record, its stderr plain text
	case len(args) > 0 && args[0] == "audit":
		logs = r.Stderr
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		require.NoError(w.t, json.Unmarshal([]byte(l), &m), "every log line is JSON: %q", l)
		out.Logs = append(out.Logs, m)
	}
	return out
}

// assertNoSecret is safety rule 5 as every test sees it: whatever a run
// does, succeed or fail, its token never reaches stdout or stderr.
func assertNoSecret(t *testing.T, token string, r testenv.Run) {
	t.Helper()
	assert.NotContains(t, r.Stdout, token, "rule 5: the token leaked to stdout")
	assert.NotContains(t, r.Stderr, token, "rule 5: the token leaked to stderr")
}

// msg returns the log lines with the given msg.
func (r run) msg(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range r.Logs {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// actions are the action lines, keyed by pod name (or runner name for a
// line with no pod, i.e. a ghost).
func (r run) actions(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, l := range r.msg("action") {
		key, _ := l["pod"].(string)
		if key == "" {
			key, _ = l["runner_name"].(string)
		}
		require.NotContains(t, out, key, "one action line per candidate")
		out[key] = l
	}
	return out
}

// results counts the action lines per result.
func (r run) results() map[string]int {
	out := map[string]int{}
	for _, l := range r.msg("action") {
		out[l["result"].(string)]++
	}
	return out
}

// summary is the one sweep summary line.
func (r run) summary(t *testing.T) map[string]any {
	t.Helper()
	s := r.msg("sweep")
	require.Len(t, s, 1, "one summary line per sweep; stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	return s[0]
}

// requireCode checks the exit status, showing the run's output if it is
// not the one expected.
func (r run) requireCode(t *testing.T, code int) {
	t.Helper()
	require.Equal(t, code, r.Code, "exit status; stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
}

// pod creates a runner pod of org acme, labelled the way ARC labels it,
// then writes its status as a kubelet would.
func (w *world) pod(name string, st testenv.PodState) *corev1.Pod {
	w.t.Helper()
	return env.RunnerPod(w.t, w.ns, testenv.RunnerPod{Name: name, Org: "acme", PodState: st})
}

// stampedPod is pod, stamped with an owner's label.
func (w *world) stampedPod(name string, st testenv.PodState) *corev1.Pod {
	w.t.Helper()
	return env.RunnerPod(w.t, w.ns, testenv.RunnerPod{Name: name, Org: "acme",
		Labels: map[string]string{stampLabel: "job-1234"}, PodState: st})
}

func (w *world) podExists(name string) bool {
	w.t.Helper()
	return env.PodExists(w.t, w.ns, name)
}

func (w *world) runner(name, status string, busy bool) ghsim.Runner {
	return w.sim.AddRunner(scope, ghsim.Runner{Name: name, Status: status, Busy: busy,
		Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}}})
}

func (w *world) runnerExists(id int64) bool {
	for _, r := range w.sim.Runners(scope) {
		if r.ID == id {
			return true
		}
	}
	return false
}

// requests returns the simulator's logged requests to an endpoint
// (ghsim.EndpointList, ...).
func (w *world) requests(endpoint string) []ghsim.Request {
	var out []ghsim.Request
	for _, r := range w.sim.Requests() {
		if r.Endpoint == endpoint {
			out = append(out, r)
		}
	}
	return out
}

// marksJSON is the ledger ConfigMap's data["marks.json"] exactly as stored,
// and whether the ConfigMap exists.
func (w *world) marksJSON() (string, bool) {
	w.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false
	}
	require.NoError(w.t, err)
	return cm.Data["marks.json"], true
}

// marks decodes the ledger's marks.
func (w *world) marks() map[string]fleet.Mark {
	w.t.Helper()
	s, ok := w.marksJSON()
	require.True(w.t, ok, "the ledger ConfigMap exists")
	var m map[string]fleet.Mark
	require.NoError(w.t, json.Unmarshal([]byte(s), &m))
	return m
}

// podMarkKey is the ledger key of the mark on pod p (by UID, as the product keys it).
func podMarkKey(p *corev1.Pod) string { return fleet.PodMarkKey(string(p.UID)) }

// reapedEvents counts the RunnerReaped Events per pod name.
func (w *world) reapedEvents() map[string]int {
	w.t.Helper()
	evs, err := env.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "RunnerReaped").String()})
	require.NoError(w.t, err)
	out := map[string]int{}
	for _, e := range evs.Items {
		out[e.InvolvedObject.Name]++
	}
	return out
}

// num reads a JSON number field as an int, for comparing counts.
func num(t *testing.T, m map[string]any, key string) int {
	t.Helper()
	v, ok := m[key].(float64)
	require.True(t, ok, "field %s is a number in %v", key, m)
	return int(v)
}
