package sweep_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Requests per sweep are counted exactly: one pod list per namespace page,
// plus, per scope, P = ceil(runners / 100) list pages and P-1
// revalidations of the earlier pages, which an unchanged list answers 304
// at no rate-limit cost; the ledger costs one get and one write. A second
// sweep with nothing changed is answered 304 on every page, which costs no
// rate limit. A configured namespace that lists
// no pod costs one more request, the check that it exists.
func TestRequestsPerSweep(t *testing.T) {
	env := plane.Env(t)
	second := env.Namespace(t, "sweep-b")
	repo, err := fleet.ParseScope("repo:acme/web")
	require.NoError(t, err)
	r := newRig(t, func(c *config.Config) {
		c.Namespaces = append(c.Namespaces, second)
		c.Scopes = append(c.Scopes, repo)
	})
	r.sim.AddScope("repo:acme/web")
	for i := 0; i < 250; i++ {
		r.runner(fmt.Sprintf("acme-%03d", i), "online", false)
		if i < 20 {
			r.pod(fmt.Sprintf("acme-%03d", i), testenv.Running())
		}
		if i == 20 {
			env.RunnerPod(t, second, testenv.RunnerPod{Name: "acme-020", Org: "acme", PodState: testenv.Running()})
		}
	}
	for i := 0; i < 100; i++ {
		r.sim.AddRunner("repo:acme/web", ghRunner(fmt.Sprintf("web-%03d", i)))
	}
	budget := r.sim.RateRemaining()

	first := r.run(sweep.Act)
	require.NoError(t, first.Err)
	// 3 pages for 250 runners and 2 revalidations (304) + 1 page for 100.
	assert.EqualValues(t, 6, first.GitHub.Requests)
	assert.EqualValues(t, 2, first.GitHub.NotModified)
	// 2 namespaces, one page each; ledger get; ledger create.
	assert.EqualValues(t, 4, first.Kube.Requests)
	assert.Equal(t, budget-4, r.sim.RateRemaining())

	again := r.run(sweep.Act)
	require.NoError(t, again.Err)
	assert.EqualValues(t, 6, again.GitHub.Requests)
	assert.EqualValues(t, 6, again.GitHub.NotModified, "every unchanged page is answered 304")
	assert.EqualValues(t, 4, again.Kube.Requests)
	assert.Equal(t, budget-4, r.sim.RateRemaining(), "304s cost no rate limit")

	summary := r.lines("sweep")
	require.Len(t, summary, 2)
	assert.EqualValues(t, 6, summary[1]["github_requests"])
	assert.EqualValues(t, 6, summary[1]["github_not_modified"])
	assert.EqualValues(t, 4, summary[1]["kube_requests"])

	r.cfg.Namespaces = append(r.cfg.Namespaces, env.Namespace(t, "sweep-empty"))
	empty := r.run(sweep.Act)
	require.NoError(t, empty.Err)
	assert.Equal(t, sweep.StatusComplete, empty.Status, "an empty namespace that exists is fine")
	// 3 namespaces, one page each; the empty one's existence; ledger get
	// and write.
	assert.EqualValues(t, 6, empty.Kube.Requests)
}

// A scope dropped from the configuration leaves no list cache behind in the
// ledger, which would otherwise grow until it had to be trimmed.
func TestDroppedScopeLeavesNoCache(t *testing.T) {
	repo, err := fleet.ParseScope("repo:acme/web")
	require.NoError(t, err)
	r := newRig(t, func(c *config.Config) { c.Scopes = append(c.Scopes, repo) })
	r.sim.AddScope("repo:acme/web")
	r.sim.AddRunner("repo:acme/web", ghRunner("web-1"))
	require.NoError(t, r.run(sweep.Act).Err)
	store := configmap.New(r.env.Client.CoreV1().ConfigMaps(r.ns), r.ns, "runner-reaper-ledger", nil)
	l, _, err := store.Load(context.Background())
	require.NoError(t, err)
	assert.Contains(t, l.Lists, repo.Key())

	r.cfg.Scopes = r.cfg.Scopes[:1]
	require.NoError(t, r.run(sweep.Act).Err)
	l, _, err = store.Load(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, l.Lists, repo.Key())
	assert.Contains(t, l.Lists, orgScope)
}

// A ledger that had to be trimmed to fit its backend's limit is in the
// sweep's result and summary: the marks dropped restart their confirmation,
// and the summary is what an operator reads. A save that fits says nothing.
func TestTrimmedLedgerIsSummarised(t *testing.T) {
	r := newRig(t)
	r.runner("acme-zombie", "offline", false)
	r.pod("acme-zombie", testenv.Running())

	s := r.sweeper()
	store := configmap.New(r.env.Client.CoreV1().ConfigMaps(r.ns), r.ns, "runner-reaper-ledger", nil)
	// Room for an empty marks object only: the mark and the list cache go.
	store.LimitBytes = len(state.MarksKey) + len("{}")
	s.Ledger = store
	res := reported(context.Background(), s, sweep.DryRun, s.Log)
	require.NoError(t, res.Err)
	require.Len(t, res.Confirmation.Marks, 1)
	assert.Equal(t, state.Trim{DroppedLists: 1, DroppedMarks: 1, LimitBytes: store.LimitBytes}, res.LedgerTrim)
	sums := r.lines("sweep")
	require.Len(t, sums, 1)
	assert.EqualValues(t, 1, sums[0]["ledger_trimmed_marks"])
	assert.EqualValues(t, 1, sums[0]["ledger_trimmed_lists"])

	res = r.run(sweep.DryRun)
	require.NoError(t, res.Err)
	assert.False(t, res.LedgerTrim.Trimmed())
	sums = r.lines("sweep")
	require.Len(t, sums, 2)
	assert.NotContains(t, sums[1], "ledger_trimmed_marks")
	assert.NotContains(t, sums[1], "ledger_trimmed_lists")
}

// Each admitted action costs one Kubernetes request more than its writes:
// the pre-flight, a server-side dry run of the delete, sent before the
// first write. Observation costs what it did.
func TestRequestsPerAction(t *testing.T) {
	r := newRig(t)
	r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	res := r.run(sweep.Act)
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, "deleted", string(res.Outcomes[0].Result))
	// Observation: ledger get, one pod list page, ledger create. The
	// action: pre-flight, Event, delete.
	assert.EqualValues(t, 3+3, res.Kube.Requests)
	// A terminal pod without a registration asks nothing of GitHub
	// beyond the list.
	assert.EqualValues(t, 1, res.GitHub.Requests)
}
