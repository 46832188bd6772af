package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// An unchanged fleet costs no rate limit: the ETags of the first sweep
// travel to the next process through the ledger, so the second sweep's every
// list request (both pages of a 150-runner scope, and page 1 once more to
// revalidate it after the last page) is conditional and answered 304,
// nothing else is asked of GitHub, and the summary's github_not_modified
// equals its github_requests.
func TestUnchangedFleetIsAllNotModified(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for i := 0; i < 150; i++ {
		w.runner(fmt.Sprintf("acme-r-%03d", i), "online", false)
	}
	w.pod("acme-r-000", testenv.Running())
	w.pod("acme-r-001", testenv.Running())
	budget := w.sim.RateRemaining()

	first := w.sweep()
	first.requireCode(t, 0)
	s1 := first.summary(t)
	assert.EqualValues(t, 3, s1["github_requests"], "one request per page of 100, never one per runner, and page 1 revalidated")
	assert.EqualValues(t, 1, s1["github_not_modified"], "the revalidation of an unchanged page is a 304")
	spent := budget - w.sim.RateRemaining()

	w.sim.ResetRequests()
	second := w.sweep()
	second.requireCode(t, 0)
	reqs := w.sim.Requests()
	require.Len(t, reqs, 3)
	for _, q := range reqs {
		assert.Equal(t, ghsim.EndpointList, q.Endpoint)
		assert.NotEmpty(t, q.IfNoneMatch, "page %s is asked for conditionally", q.Query)
		assert.Equal(t, 304, q.Status)
	}
	s2 := second.summary(t)
	assert.EqualValues(t, 3, s2["github_requests"])
	assert.Equal(t, s2["github_requests"], s2["github_not_modified"])
	assert.EqualValues(t, 150, s2["registrations_observed"], "the cached pages stand in for the 304s")
	assert.Equal(t, spent, budget-w.sim.RateRemaining(), "the second sweep spent no rate limit")
	assert.Empty(t, second.msg("action"))
}

// Dry run and audit change nothing on either side. `sweep --dry-run` marks
// and confirms like a real sweep (so its second run shows the zombie ready)
// and prints the same action lines with dry_run true and would-delete;
// `audit` prints the table, what it would do now or when the mark matures,
// and never writes the ledger.
func TestDryRunAndAuditChangeNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	zombie := w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "Error")})
	w.runner("acme-healthy", "online", false)
	w.pod("acme-healthy", testenv.Running())
	untouched := func() {
		t.Helper()
		for _, name := range []string{"acme-zombie", "acme-dead", "acme-healthy"} {
			assert.True(t, w.podExists(name), "%s survives", name)
		}
		assert.True(t, w.runnerExists(zombie.ID))
		assert.Empty(t, w.requests(ghsim.EndpointDelete), "no GitHub delete")
		assert.Empty(t, w.reapedEvents(), "no Event")
	}

	audit := w.exec("audit")
	audit.requireCode(t, 0)
	table := audit.Stdout
	assert.True(t, strings.HasPrefix(table, "VERDICT"), "the table starts with its header:\n%s", table)
	assert.Regexp(t, `(?m)^terminal\s+`+w.ns+`/acme-dead\s.*now: delete pod\s.*\[sigkill\]`, table)
	assert.Regexp(t, `(?m)^zombie\s+`+w.ns+`/acme-zombie\s.*mark: first seen now, confirm on a later sweep`, table)
	assert.NotContains(t, table, "acme-healthy")
	assert.Equal(t, "audit", audit.summary(t)["mode"], "an audit's log lines go to stderr")
	_, exists := w.marksJSON()
	assert.False(t, exists, "an audit writes no ledger")
	untouched()

	dry := w.sweep("--dry-run")
	dry.requireCode(t, 0)
	acted := dry.actions(t)
	require.Len(t, acted, 1, "the zombie is only marked")
	assert.Equal(t, "would-delete", acted["acme-dead"]["result"])
	assert.Equal(t, true, acted["acme-dead"]["dry_run"])
	assert.Equal(t, "sigkill", acted["acme-dead"]["exit_class"])
	assert.Equal(t, "dry-run", dry.summary(t)["mode"])
	assert.Equal(t, true, dry.summary(t)["dry_run"])
	assert.Len(t, w.marks(), 1, "a dry run marks like a real sweep")
	untouched()

	time.Sleep(pastConfirm)
	dry2 := w.sweep("--dry-run")
	dry2.requireCode(t, 0)
	acted = dry2.actions(t)
	require.Len(t, acted, 2)
	for name, line := range acted {
		assert.Equal(t, "would-delete", line["result"], name)
		assert.Equal(t, true, line["dry_run"], name)
		assert.NotContains(t, line, "pod_result", name)
	}
	assert.Equal(t, "delete-registration-then-pod", acted["acme-zombie"]["action"])
	untouched()

	version := func() string {
		cm, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
		require.NoError(t, err)
		return cm.ResourceVersion
	}
	v := version()
	audit2 := w.exec("audit")
	audit2.requireCode(t, 0)
	assert.Regexp(t, `(?m)^zombie\s+`+w.ns+`/acme-zombie\s+acme-zombie \(#\d+\).*now: delete registration then pod`, audit2.Stdout)
	assert.Equal(t, v, version(), "an audit leaves the ledger as it found it")
	untouched()
}

// A bad configuration stops the run before anything is listed or deleted:
// exit 2, and stderr names the variable and shows a value that would work,
// so the operator can fix it from the message alone.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		env    map[string]string
		wanted []string
	}{
		{"bad duration", map[string]string{"REAPER_CONFIRM_AFTER": "5 minutes"},
			[]string{"REAPER_CONFIRM_AFTER", `"5 minutes"`, "example: REAPER_CONFIRM_AFTER=5m"}},
		{"negative duration", map[string]string{"REAPER_REGISTRATION_DEADLINE": "-1s"},
			[]string{"REAPER_REGISTRATION_DEADLINE", "positive", "example: REAPER_REGISTRATION_DEADLINE=10m"}},
		{"bad scope", map[string]string{"REAPER_SCOPES": "team:acme"},
			[]string{"REAPER_SCOPES", "team:acme", "example: REAPER_SCOPES=org:acme"}},
		{"typo in a variable name", map[string]string{"REAPER_CONFIRM_AFTR": "2s"},
			[]string{"REAPER_CONFIRM_AFTR", "did you mean REAPER_CONFIRM_AFTER", "example: REAPER_CONFIRM_AFTER="}},
		// Each of these was once accepted, and the run went on to reap.
		{"NaN fraction", map[string]string{"REAPER_MAX_FRACTION": "NaN"},
			[]string{"REAPER_MAX_FRACTION", "above 0 and at most 1", "example: REAPER_MAX_FRACTION=0.25"}},
		{"NaN alarm fraction", map[string]string{"REAPER_MASS_SUSPICION_FRACTION": "NaN"},
			[]string{"REAPER_MASS_SUSPICION_FRACTION", "example: REAPER_MASS_SUSPICION_FRACTION=0.5"}},
		{"dot segments in a scope", map[string]string{"REAPER_SCOPES": "repo:../.."},
			[]string{"REAPER_SCOPES", "owner must start with a letter or digit", "example: REAPER_SCOPES=org:acme"}},
		{"a control character in the token", map[string]string{"REAPER_GITHUB_TOKEN": "ghp_e2e\x01control"},
			[]string{"REAPER_GITHUB_TOKEN", "control character", "example: REAPER_GITHUB_TOKEN="}},
		{"credentials in the API URL", map[string]string{"REAPER_GITHUB_API_URL": "https://reaper:hunter2@ghes.example.com/api/v3/"},
			[]string{"REAPER_GITHUB_API_URL", "must not carry credentials", "example: REAPER_GITHUB_API_URL=https://"}},
		{"plain http to a host that is not loopback", map[string]string{"REAPER_GITHUB_API_URL": "http://ghes.example.com/api/v3/"},
			[]string{"REAPER_GITHUB_API_URL", "not loopback", "example: REAPER_GITHUB_API_URL=https://"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.env)
			w.runner("acme-dead", "offline", false)
			w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
			for _, args := range [][]string{{"sweep"}, {"audit"}} {
				r := w.exec(args...)
				r.requireCode(t, 2)
				for _, s := range tc.wanted {
					assert.Contains(t, r.Stderr, s)
				}
				assert.Empty(t, r.Stdout)
				assert.NotContains(t, r.Stderr, "hunter2", "a password in the URL never reaches a message")
			}
			assert.Empty(t, w.sim.Requests(), "GitHub was never asked")
			assert.True(t, w.podExists("acme-dead"), "nothing deleted")
			_, exists := w.marksJSON()
			assert.False(t, exists, "no ledger written")
		})
	}
}

// The binary built with the version and revision linked in, as the Makefile
// and the image build link them, prints them for --version with no
// configuration at all, and its summary line carries them.
func TestVersionFlagAndSummaryCarryTheLinkedBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := testenv.RunBinary(ctx, bin, map[string]string{}, "--version")
	require.NoError(t, err)
	assert.Equal(t, 0, r.Code, r.Stderr)
	assert.Equal(t, "runner-reaper "+testenv.BinaryVersion+" (revision "+testenv.BinaryRevision+")\n", r.Stdout)

	w := newWorld(t, nil)
	s := w.sweep("--dry-run")
	s.requireCode(t, 0)
	assert.Equal(t, testenv.BinaryVersion, s.summary(t)["version"])
	assert.Equal(t, testenv.BinaryRevision, s.summary(t)["revision"])
}
