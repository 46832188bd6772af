package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	orgScope = "org:acme"
	token    = "ghp_test_secret_token"
)

// clock is a settable time source, so confirm-after can pass without the
// test waiting for it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// rig is one test's world: a namespace on the real API server, a GitHub
// simulator, and a sweeper wired the way the CLI wires it.
type rig struct {
	t     testing.TB
	env   *testenv.Env
	ns    string
	sim   *ghsim.Sim
	url   string
	cfg   config.Config
	clock *clock
	logs  *bytes.Buffer
	mu    sync.Mutex
}

func newRig(t testing.TB, mods ...func(*config.Config)) *rig {
	t.Helper()
	env := plane.Env(t)
	sim := ghsim.New(ghsim.Options{Token: token})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope(orgScope)
	ns := env.Namespace(t, "sweep")
	scope, err := fleet.ParseScope(orgScope)
	require.NoError(t, err)
	cfg := config.Config{
		Scopes:          []fleet.Scope{scope},
		Namespaces:      []string{ns},
		PodSelector:     "actions-ephemeral-runner=True",
		RunnerContainer: "runner",
		RunnerName:      config.NameSource{From: config.NameFromPod},
		StampLabel:      "pool.example.com/claimed-by",
		Policy: reconcile.Policy{
			RegistrationDeadline: 10 * time.Minute,
			StampEnabled:         true,
			GhostNamePrefix:      "acme-",
		},
		Hold:            reconcile.Hold{ConfirmAfter: 5 * time.Minute, StampMaxAge: 5 * time.Minute, MassSuspicionFraction: 0.5, MassSuspicionMin: 5},
		Limits:          reconcile.Limits{MaxActions: 50, MaxFraction: 1},
		Ledger:          config.Ledger{Kind: config.LedgerConfigMap, Namespace: ns, Name: "runner-reaper-ledger"},
		KubeConcurrency: 4,
		GitHub:          config.GitHub{APIURL: url, Token: token, Timeout: 5 * time.Second},
	}
	for _, m := range mods {
		m(&cfg)
	}
	return &rig{t: t, env: env, ns: ns, sim: sim, url: url, cfg: cfg, clock: &clock{now: time.Now()}, logs: &bytes.Buffer{}}
}

// sweeper builds a fresh Sweeper each time, as each CronJob run does: the
// process keeps nothing, only the ledger carries over.
func (r *rig) sweeper() *sweep.Sweeper {
	r.t.Helper()
	s, _, err := app.Build(r.cfg, r.env.Config, slog.New(slog.NewJSONHandler(r.logWriter(), nil)))
	require.NoError(r.t, err)
	s.Now, s.Local = r.clock.Now, r.clock.Now
	return s
}

func (r *rig) logWriter() *lockedWriter { return &lockedWriter{mu: &r.mu, buf: r.logs} }

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (r *rig) run(mode sweep.Mode) sweep.Result {
	r.t.Helper()
	s := r.sweeper()
	return reported(context.Background(), s, mode, s.Log)
}

// lines returns the JSON log lines with the given msg.
func (r *rig) lines(msg string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(r.t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// pod creates a runner pod of org acme the way ARC labels it, and writes
// its status as a kubelet would.
func (r *rig) pod(name string, st testenv.PodState) *corev1.Pod {
	r.t.Helper()
	return r.env.RunnerPod(r.t, r.ns, testenv.RunnerPod{Name: name, Org: "acme", PodState: st})
}

// stampedPod is pod, stamped with an owner's label.
func (r *rig) stampedPod(name string, st testenv.PodState) *corev1.Pod {
	r.t.Helper()
	return r.env.RunnerPod(r.t, r.ns, testenv.RunnerPod{Name: name, Org: "acme",
		Labels: map[string]string{"pool.example.com/claimed-by": "job-1234"}, PodState: st})
}

func (r *rig) podExists(name string) bool {
	r.t.Helper()
	return r.env.PodExists(r.t, r.ns, name)
}

func (r *rig) runner(name, status string, busy bool) ghsim.Runner {
	x := ghRunner(name)
	x.Status, x.Busy = status, busy
	return r.sim.AddRunner(orgScope, x)
}

func (r *rig) runnerExists(id int64) bool {
	for _, x := range r.sim.Runners(orgScope) {
		if x.ID == id {
			return true
		}
	}
	return false
}

func ghRunner(name string) ghsim.Runner {
	return ghsim.Runner{Name: name, OS: "linux", Status: "online",
		Labels: []ghsim.Label{{ID: 1, Name: "self-hosted", Type: "read-only"}}}
}
