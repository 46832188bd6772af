package cronjob_test

// The ARC components proven like the base: components/arc (ARC-aware
// reaping: REAPER_ARC_LEAKS and get, list, delete on EphemeralRunners and
// legacy Runners) and components/arc-finalizers (REAPER_ARC_REMOVE_FINALIZERS
// and ephemeralrunners patch). What they render is accepted by a real API
// server with ARC's CRDs installed; the Role is exactly the base's plus
// those rules; and the real binary, run as the manifest's ServiceAccount
// against EphemeralRunners, legacy Runners and pods created the way ARC
// creates them, does the whole job with the component's Role and names the
// action any one missing ARC rule refuses.

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	arcComponent          = "arc"
	arcFinalizerComponent = "arc-finalizers"
)

var (
	// arcRules is what components/arc adds to the base's Role, as testenv.Permission()
	// names them.
	arcRules = []string{
		"get ephemeralrunners.actions.github.com",
		"list ephemeralrunners.actions.github.com",
		"watch ephemeralrunners.actions.github.com",
		"delete ephemeralrunners.actions.github.com",
		"patch ephemeralrunners.actions.github.com",
		"get runners.actions.summerwind.dev",
		"list runners.actions.summerwind.dev",
		"delete runners.actions.summerwind.dev",
	}
	// arcPatchRule is the right both ARC components use: components/arc to
	// release the registration finalizer, components/arc-finalizers (which
	// adds no right of its own) to remove a stuck object's finalizers.
	arcPatchRule = "patch ephemeralrunners.actions.github.com"
)

// ---------------------------------------------------------------------------
// Rendering: accepted by the API server, and exactly the base plus ARC.

func TestARCComponentsRenderExactlyTheBasePlusARC(t *testing.T) {
	shippedNamespaceExists(t)
	base := render(t, false)
	for _, tc := range []struct {
		name       string
		components []string
		rules      []string
		config     map[string]string
	}{
		{"base+arc", []string{arcComponent}, arcRules,
			map[string]string{"REAPER_ARC_LEAKS": "true"}},
		{"base+arc+arc-finalizers", []string{arcComponent, arcFinalizerComponent}, arcRules,
			map[string]string{"REAPER_ARC_LEAKS": "true", "REAPER_ARC_REMOVE_FINALIZERS": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := renderWith(t, tc.components...)

			stdout, stderr, err := serverDryRun(t, m.YAML)
			require.NoError(t, err, "kubectl apply --dry-run=server:\n%s%s", stdout, stderr)
			for _, obj := range m.Kinds {
				kind, objName, _ := strings.Cut(obj, "/")
				assert.Regexp(t, `(?i)`+kind+`[^ ]*/`+objName+` (created|configured|unchanged) \(server dry run\)`, stdout)
			}
			assert.NotContains(t, strings.ToLower(stderr), "warning")
			assert.Equal(t, base.Kinds, m.Kinds, "the components add no object")

			// The Role: the base's rules first, untouched, then exactly
			// the component's, one verb and one resource per rule.
			want := append(append([]string(nil), leastPrivilege...), tc.rules...)
			sort.Strings(want)
			assert.Equal(t, want, testenv.Permissions(m.rules()))
			require.Greater(t, len(m.Role.Rules), len(base.Role.Rules))
			assert.Equal(t, base.Role.Rules, m.Role.Rules[:len(base.Role.Rules)], "the base's rules are kept as they are")
			assert.Equal(t, base.LogRole, m.LogRole, "and the runner-log Role")
			for _, r := range m.rules() {
				assert.Len(t, r.Verbs, 1, "one verb per rule, so one can be dropped: %v", r)
				assert.Len(t, r.Resources, 1, "one resource per rule: %v", r)
				assert.Len(t, r.APIGroups, 1, "one group per rule: %v", r)
				assert.Empty(t, r.NonResourceURLs)
				for _, s := range append(append(r.Verbs, r.Resources...), r.APIGroups...) {
					assert.NotContains(t, s, "*", "no wildcard: %v", r)
				}
			}
			for _, obj := range m.Kinds {
				assert.False(t, strings.HasPrefix(obj, "Cluster"), "nothing cluster-scoped: %s", obj)
			}

			// The config: the base's, plus exactly the ARC settings; dry-run
			// is left alone.
			wantData := map[string]string{}
			for k, v := range base.Config.Data {
				wantData[k] = v
			}
			for k, v := range tc.config {
				wantData[k] = v
			}
			assert.Equal(t, wantData, m.Config.Data)
			assert.Equal(t, "true", m.Config.Data["REAPER_DRY_RUN"], "the components leave dry-run alone")

			// Everything else as the base has it.
			assert.Equal(t, base.SA, m.SA)
			assert.Equal(t, base.Binding, m.Binding)
			assert.Equal(t, base.Ledger, m.Ledger)
			assert.Equal(t, base.CronJob, m.CronJob)
		})
	}
}

// ---------------------------------------------------------------------------
// The real binary as the CronJob's ServiceAccount, against ARC's objects.

// arcWorldOpts say which fleet to plant and which rule to take away.
type arcWorldOpts struct {
	// legacy plants a legacy summerwind fleet (its pods selected with a
	// selector of their own) instead of the scale-set fleet.
	legacy bool
	// dropRule removes the Role rule testenv.Permission() names so (e.g. "delete
	// ephemeralrunners.actions.github.com").
	dropRule string
}

// arcWorld is a cronjob world (namespace, the manifest's RBAC objects moved
// into it, a simulator) planted with an ARC fleet:
//
//   - scale-set fleet: an EphemeralRunner whose running pod's registration
//     is offline (zombie), a Failed EphemeralRunner with no pod (arc-failed),
//     and one deleted but held by ARC's finalizers (arc-stuck-deleting);
//   - legacy fleet: a summerwind Runner whose running pod's registration is
//     offline (zombie).
type arcWorld struct {
	*world
	zombie, failed, stuck, legacy string
	zombieReg                     ghsim.Runner
	legacyReg                     ghsim.Runner
}

func newARCWorld(t *testing.T, bin string, m manifest, o arcWorldOpts) *arcWorld {
	t.Helper()
	env := plane.Env(t)
	ns := env.Namespace(t, "cronjob-arc")
	w := &arcWorld{world: &world{t: t, env: env, ns: ns, bin: bin}}

	kubeconfig := installManifest(t, ns, m, o.dropRule, true)

	w.sim = ghsim.New(ghsim.Options{Token: token})
	url, err := w.sim.Start()
	require.NoError(t, err)
	t.Cleanup(w.sim.Close)
	w.sim.AddScope(scope)

	selector := "" // the shipped default, actions-ephemeral-runner=True
	if o.legacy {
		w.legacy = "acme-runnerdeploy-q8w2n-zx4vb"
		w.legacyReg = w.sim.AddRunner(scope, ghsim.Runner{Name: w.legacy, Status: "offline"})
		r := env.LegacyRunner(t, ns, testenv.LegacyRunner{Name: w.legacy, Organization: "acme",
			Finalizers: []string{testenv.LegacyRunnerFinalizer}})
		env.RunnerPod(t, ns, testenv.RunnerPod{Owner: testenv.ControllerRef(r),
			Labels: map[string]string{"actions-runner": "", "runner-template-hash": "6d5f8c7b9"}, PodState: testenv.Running(),
			Env: testenv.LegacyScopeEnv("acme", "", "")})
		// The legacy controller's pods carry none of ARC's scale-set
		// labels; a deployment selects them with a selector of its own.
		selector = "actions-runner"
	} else {
		// EphemeralRunners as ARC's controllers leave them, with their
		// finalizers: nothing removes those in the test control plane, so
		// a deleted one stays, deleting, as when ARC cannot finish.
		arc := func(name string, status testenv.EphemeralRunnerStatus) *unstructured.Unstructured {
			return env.EphemeralRunner(t, ns, testenv.EphemeralRunner{Name: name, ConfigURL: strings.TrimSuffix(url, "/") + "/acme", Finalizers: testenv.ARCFinalizers(), Status: &status})
		}
		w.zombie = testenv.ScaleSet + "-x7k2p-runner-z0mb1"
		w.zombieReg = w.sim.AddRunner(scope, ghsim.Runner{Name: w.zombie, Status: "offline"})
		er := arc(w.zombie, testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: w.zombieReg.ID})
		env.RunnerPod(t, ns, testenv.RunnerPod{Owner: testenv.ControllerRef(er), Org: "acme", ScaleSet: testenv.ScaleSet,
			PodState: testenv.Running()})

		w.failed = testenv.ScaleSet + "-x7k2p-runner-f41l3"
		arc(w.failed, testenv.EphemeralRunnerStatus{Phase: "Failed",
			Reason: "TooManyPodFailures", Message: "Pod has failed to start more than 5 times"})

		w.stuck = testenv.ScaleSet + "-x7k2p-runner-stuck"
		arc(w.stuck, testenv.EphemeralRunnerStatus{Phase: "Running"})
		env.DeleteARC(t, testenv.EphemeralRunners, ns, w.stuck)
	}

	w.reap = map[string]string{}
	for k, v := range m.Config.Data {
		w.reap[k] = v
	}
	for k, v := range map[string]string{
		"KUBECONFIG":                      kubeconfig,
		"REAPER_NAMESPACES":               ns,
		"REAPER_LEDGER":                   "configmap:" + ns + "/" + ledgerName,
		"REAPER_DRY_RUN":                  "false",
		"REAPER_SCOPES":                   scope,
		"REAPER_GITHUB_API_URL":           url,
		"REAPER_GITHUB_TOKEN":             token,
		"REAPER_CONFIRM_AFTER":            "1s",
		"REAPER_ARC_FAILED_AFTER":         "1s",
		"REAPER_ARC_PODLESS_AFTER":        "1s",
		"REAPER_ARC_STUCK_DELETING_AFTER": "1s",
	} {
		w.reap[k] = v
	}
	if selector != "" {
		// A legacy fleet's own selector misses scale-set pods, so ARC
		// leaks (which would take every EphemeralRunner for podless) are
		// refused with it; the owner-aware delete needs no list.
		w.reap["REAPER_POD_SELECTOR"] = selector
		w.reap["REAPER_ARC_LEAKS"] = "false"
	}
	return w
}

// arcState is the world's ARC objects' states, by kind/name.
func (w *arcWorld) arcState() map[string]string {
	out := map[string]string{}
	for _, n := range []string{w.zombie, w.failed, w.stuck} {
		if n != "" {
			out["EphemeralRunner/"+n] = w.env.ARCState(w.t, testenv.EphemeralRunners, w.ns, n)
		}
	}
	if w.legacy != "" {
		out["Runner/"+w.legacy] = w.env.ARCState(w.t, testenv.LegacyRunners, w.ns, w.legacy)
	}
	return out
}

// TestARCSweepAsTheCronJob runs the CronJob's binary as the manifest's
// ServiceAccount, with the ARC components' Roles, each subtest in its own
// namespace with its own simulator, in parallel.
func TestARCSweepAsTheCronJob(t *testing.T) {
	// Every case sweeps on the control plane: start it (or skip in
	// -short) before spending time on building the binary.
	plane.Env(t)
	bin, err := testenv.BuildBinary(t.TempDir())
	require.NoError(t, err)
	arc := renderWith(t, arcComponent)
	arcFin := renderWith(t, arcComponent, arcFinalizerComponent)

	// The component's Role does the whole job: the scale-set fleet's
	// zombie through its EphemeralRunner (registration first), the Failed
	// EphemeralRunner deleted, the stuck one reported only (arc) or its
	// finalizers removed (arc + arc-finalizers); the legacy fleet's zombie
	// through its Runner.
	for _, tc := range []struct {
		name      string
		m         manifest
		legacy    bool
		stuckLine []string
		want      func(w *arcWorld) map[string]string
	}{
		{name: "arc: scale-set fleet", m: arc,
			stuckLine: []string{`"verdict":"arc-stuck-deleting"`, `"action":"report"`, `"result":"reported"`},
			want: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "deleting", "EphemeralRunner/" + w.failed: "deleting",
					"EphemeralRunner/" + w.stuck: "deleting"}
			}},
		{name: "arc+arc-finalizers: scale-set fleet", m: arcFin,
			stuckLine: []string{`"verdict":"arc-stuck-deleting"`, `"action":"remove-finalizers"`, `"result":"deleted"`},
			want: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "deleting", "EphemeralRunner/" + w.failed: "deleting",
					"EphemeralRunner/" + w.stuck: "gone"}
			}},
		{name: "arc: legacy fleet", m: arc, legacy: true,
			want: func(w *arcWorld) map[string]string { return map[string]string{"Runner/" + w.legacy: "deleting"} }},
	} {
		t.Run("whole job/"+tc.name, func(t *testing.T) {
			t.Parallel()
			w := newARCWorld(t, bin, tc.m, arcWorldOpts{legacy: tc.legacy})
			time.Sleep(1200 * time.Millisecond)
			first := w.sweep()
			require.Equal(t, 0, first.Code, describe(first))
			assert.Empty(t, first.Lines(`"msg":"action"`), "every ARC verdict here waits for confirmation: %s", describe(first))
			time.Sleep(1500 * time.Millisecond)
			second := w.sweep()
			require.Equal(t, 0, second.Code, describe(second))
			assert.NotContains(t, output(second), "forbidden", describe(second))
			assert.NotContains(t, second.Stdout, "event_error")

			if tc.legacy {
				assert.Len(t, second.Lines(`"msg":"action"`), 1, describe(second))
				assert.Len(t, second.Lines(`"verdict":"zombie"`, `"action":"delete-registration-then-runner"`,
					`"object":"Runner `+w.ns+`/`+w.legacy+`"`, `"result":"deleted"`), 1, describe(second))
				assert.False(t, w.registered(w.legacyReg.ID), "registration first")
				assert.True(t, w.podExists(w.legacy), "the pod is the Runner's to remove (no garbage collector here)")
			} else {
				assert.Len(t, second.Lines(`"msg":"action"`), 3, describe(second))
				assert.Len(t, second.Lines(`"verdict":"zombie"`, `"action":"delete-registration-then-ephemeralrunner"`,
					`"object":"EphemeralRunner `+w.ns+`/`+w.zombie+`"`, `"result":"deleted"`), 1, describe(second))
				assert.Len(t, second.Lines(`"verdict":"arc-failed"`, `"action":"delete-ephemeralrunner"`,
					`"object":"EphemeralRunner `+w.ns+`/`+w.failed+`"`, `"result":"deleted"`), 1, describe(second))
				assert.Len(t, second.Lines(append([]string{`"object":"EphemeralRunner ` + w.ns + `/` + w.stuck + `"`}, tc.stuckLine...)...), 1, describe(second))
				assert.False(t, w.registered(w.zombieReg.ID), "registration first")
				assert.True(t, w.podExists(w.zombie), "the pod is the EphemeralRunner's to remove (no garbage collector here)")
			}
			assert.Equal(t, tc.want(w), w.arcState())
		})
	}

	// Each ARC rule taken away in turn. A rule the sweep really uses is
	// refused by name and the exit status says so; a rule the sweep does
	// not use (get and list on legacy Runners: the product lists only
	// EphemeralRunners, deletes by name, and reads back only an
	// EphemeralRunner whose finalizer it releases) changes nothing, which
	// the table records rather than pretend a refusal.
	for _, tc := range []struct {
		drop   string
		m      manifest
		legacy bool
		code   int
		// line: fragments one line of the last run holds; NS is the
		// namespace. want: the refusal in the output.
		line []string
		want string
		// after is the ARC objects' states once the sweeps are done.
		after func(w *arcWorld) map[string]string
		// regKept: the registration is still on GitHub.
		regKept bool
	}{
		// get reads the finalizer's place before ARC's registration
		// finalizer is released, and the release is proved before the
		// registration goes: without get, the zombie is left whole.
		{drop: "get ephemeralrunners.actions.github.com", m: arc, code: 1,
			line: []string{`"msg":"action"`, `"verdict":"zombie"`, `"object":"EphemeralRunner NS/` + testenv.ScaleSet + `-x7k2p-runner-z0mb1"`, `"result":"error"`},
			want: `ephemeralrunners.actions.github.com "` + testenv.ScaleSet + `-x7k2p-runner-z0mb1" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot get resource "ephemeralrunners" in API group "actions.github.com" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "live", "EphemeralRunner/" + w.failed: "deleting", "EphemeralRunner/" + w.stuck: "deleting"}
			}, regKept: true},
		{drop: arcPatchRule, m: arc, code: 1,
			line: []string{`"msg":"action"`, `"verdict":"zombie"`, `"object":"EphemeralRunner NS/` + testenv.ScaleSet + `-x7k2p-runner-z0mb1"`, `"result":"error"`},
			want: `ephemeralrunners.actions.github.com "` + testenv.ScaleSet + `-x7k2p-runner-z0mb1" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot patch resource "ephemeralrunners" in API group "actions.github.com" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "live", "EphemeralRunner/" + w.failed: "deleting", "EphemeralRunner/" + w.stuck: "deleting"}
			}, regKept: true},
		// The EphemeralRunners are read as a watch-list, which needs
		// watch alone; list is for the pages it falls back to, so
		// without list the job is done all the same, and without watch
		// it is done in pages after one refused request, which the
		// warning names.
		{drop: "list ephemeralrunners.actions.github.com", m: arc, code: 0,
			line: []string{`"msg":"sweep"`, `"status":0`},
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "deleting", "EphemeralRunner/" + w.failed: "deleting", "EphemeralRunner/" + w.stuck: "deleting"}
			}},
		{drop: "watch ephemeralrunners.actions.github.com", m: arc, code: 0,
			line: []string{`"msg":"sweep"`, `"status":0`},
			want: `cannot watch resource "ephemeralrunners" in API group "actions.github.com" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "deleting", "EphemeralRunner/" + w.failed: "deleting", "EphemeralRunner/" + w.stuck: "deleting"}
			}},
		{drop: "delete ephemeralrunners.actions.github.com", m: arc, code: 1,
			line: []string{`"msg":"action"`, `"verdict":"arc-failed"`, `"object":"EphemeralRunner NS/` + testenv.ScaleSet + `-x7k2p-runner-f41l3"`, `"result":"error"`},
			want: `ephemeralrunners.actions.github.com "` + testenv.ScaleSet + `-x7k2p-runner-f41l3" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot delete resource "ephemeralrunners" in API group "actions.github.com" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "live", "EphemeralRunner/" + w.failed: "live", "EphemeralRunner/" + w.stuck: "deleting"}
			}, regKept: true},
		{drop: "get runners.actions.summerwind.dev", m: arc, legacy: true, code: 0,
			line:  []string{`"msg":"sweep"`, `"status":0`},
			after: func(w *arcWorld) map[string]string { return map[string]string{"Runner/" + w.legacy: "deleting"} }},
		{drop: "list runners.actions.summerwind.dev", m: arc, legacy: true, code: 0,
			line:  []string{`"msg":"sweep"`, `"status":0`},
			after: func(w *arcWorld) map[string]string { return map[string]string{"Runner/" + w.legacy: "deleting"} }},
		{drop: "delete runners.actions.summerwind.dev", m: arc, legacy: true, code: 1,
			line:  []string{`"msg":"action"`, `"verdict":"zombie"`, `"object":"Runner NS/acme-runnerdeploy-q8w2n-zx4vb"`, `"result":"error"`},
			want:  `runners.actions.summerwind.dev "acme-runnerdeploy-q8w2n-zx4vb" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot delete resource "runners" in API group "actions.summerwind.dev" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string { return map[string]string{"Runner/" + w.legacy: "live"} }, regKept: true},
		{drop: arcPatchRule, m: arcFin, code: 1,
			line: []string{`"msg":"action"`, `"verdict":"arc-stuck-deleting"`, `"action":"remove-finalizers"`, `"result":"error"`},
			want: `ephemeralrunners.actions.github.com "` + testenv.ScaleSet + `-x7k2p-runner-stuck" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot patch resource "ephemeralrunners" in API group "actions.github.com" in the namespace "NS"`,
			after: func(w *arcWorld) map[string]string {
				return map[string]string{"EphemeralRunner/" + w.zombie: "live", "EphemeralRunner/" + w.failed: "deleting", "EphemeralRunner/" + w.stuck: "deleting"}
			}, regKept: true},
	} {
		t.Run("without "+tc.drop, func(t *testing.T) {
			t.Parallel()
			w := newARCWorld(t, bin, tc.m, arcWorldOpts{legacy: tc.legacy, dropRule: tc.drop})
			time.Sleep(1200 * time.Millisecond)
			first := w.sweep()
			time.Sleep(1500 * time.Millisecond)
			last := w.sweep()
			assert.Equal(t, tc.code, last.Code, describe(last))
			if tc.code == 0 {
				assert.Equal(t, 0, first.Code, describe(first))
			}
			if tc.code == 0 && tc.want == "" {
				assert.NotContains(t, output(first)+output(last), "forbidden", "a rule the sweep does not use")
			}
			var line []string
			for _, f := range tc.line {
				line = append(line, strings.ReplaceAll(f, "NS", w.ns))
			}
			assert.Len(t, last.Lines(line...), 1, "one line holds %q: %s", line, describe(last))
			if tc.want != "" {
				assert.Contains(t, output(last), strings.ReplaceAll(tc.want, "NS", w.ns), describe(last))
			}
			assert.Len(t, last.Lines(`"msg":"sweep"`), 1, "the sweep still reports: %s", describe(last))
			assert.Equal(t, tc.after(w), w.arcState(), describe(last))
			reg := w.zombieReg
			if tc.legacy {
				reg = w.legacyReg
			}
			// The pre-flight (a server-side dry-run delete) is refused
			// before any write, so a refused owner delete leaves the
			// registration on GitHub too: never a runner unregistered
			// with its object left live.
			assert.Equal(t, tc.regKept, w.registered(reg.ID), describe(last))
		})
	}
}
