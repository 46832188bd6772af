// Package cronjob_test proves the kustomize base in this directory: that the
// API server accepts what it renders, that the CronJob and its Role say what
// the design asks, and that the real binary, run with exactly the identity
// the manifest gives the CronJob, does the whole job with that Role and
// reports every action one missing permission refuses (safety rule 5).
package cronjob_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the one real control plane this package's tests share, started
// by the first test that needs it; each test works in namespaces of its own.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }

const (
	// shippedNamespace is the base's namespace; the sweep tests move the
	// manifest's objects into a fresh namespace of their own.
	shippedNamespace = "arc-runners"
	ledgerName       = "runner-reaper-ledger"
	saName           = "runner-reaper"
	token            = "ghp_cronjob_test_secret_value"
	scope            = "org:acme"
)

// ---------------------------------------------------------------------------
// Rendering

// manifest is one rendering of the base (or of the base with the
// delete-serviceaccounts component), parsed into typed objects.
type manifest struct {
	YAML    []byte
	Kinds   []string // kind/name of every object, in order
	SA      *corev1.ServiceAccount
	Role    *rbacv1.Role
	Binding *rbacv1.RoleBinding
	// LogRole and LogBinding grant get on pods/log apart from Role
	// (components/runner-log, which the base includes); nil without them.
	LogRole    *rbacv1.Role
	LogBinding *rbacv1.RoleBinding
	Config     *corev1.ConfigMap
	Ledger     *corev1.ConfigMap
	CronJob    *batchv1.CronJob
}

func baseDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err, "the test runs in the base's directory")
	return dir
}

// render renders the base, or the base with the delete-serviceaccounts
// component.
func render(t testing.TB, withComponent bool) manifest {
	t.Helper()
	if withComponent {
		return renderWith(t, "delete-serviceaccounts")
	}
	return renderWith(t)
}

// renderWith renders the base with the named components (directories under
// components/), in order.
func renderWith(t testing.TB, components ...string) manifest {
	t.Helper()
	k := testenv.Kustomization{Base: baseDir(t)}
	for _, c := range components {
		k.Components = append(k.Components, filepath.Join("components", c))
	}
	return parse(t, testenv.Kustomize(t, k))
}

// parse decodes every document strictly (an unknown or misspelt field fails)
// into its typed object. Any kind the base should not ship fails too.
func parse(t testing.TB, out []byte) manifest {
	t.Helper()
	m := manifest{YAML: out}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(doc, &head))
		gvk := head.APIVersion + " " + head.Kind
		m.Kinds = append(m.Kinds, head.Kind+"/"+head.Metadata.Name)
		var into any
		switch {
		case gvk == "v1 ServiceAccount" && m.SA == nil:
			m.SA = &corev1.ServiceAccount{}
			into = m.SA
		case gvk == "rbac.authorization.k8s.io/v1 Role" && head.Metadata.Name == logRBACName && m.LogRole == nil:
			m.LogRole = &rbacv1.Role{}
			into = m.LogRole
		case gvk == "rbac.authorization.k8s.io/v1 RoleBinding" && head.Metadata.Name == logRBACName && m.LogBinding == nil:
			m.LogBinding = &rbacv1.RoleBinding{}
			into = m.LogBinding
		case gvk == "rbac.authorization.k8s.io/v1 Role" && m.Role == nil:
			m.Role = &rbacv1.Role{}
			into = m.Role
		case gvk == "rbac.authorization.k8s.io/v1 RoleBinding" && m.Binding == nil:
			m.Binding = &rbacv1.RoleBinding{}
			into = m.Binding
		case gvk == "v1 ConfigMap" && head.Metadata.Name == "runner-reaper-config" && m.Config == nil:
			m.Config = &corev1.ConfigMap{}
			into = m.Config
		case gvk == "v1 ConfigMap" && head.Metadata.Name == ledgerName && m.Ledger == nil:
			m.Ledger = &corev1.ConfigMap{}
			into = m.Ledger
		case gvk == "batch/v1 CronJob" && m.CronJob == nil:
			m.CronJob = &batchv1.CronJob{}
			into = m.CronJob
		default:
			t.Fatalf("the base renders an object it should not ship (or twice): %s %s", gvk, head.Metadata.Name)
		}
		require.NoError(t, yaml.UnmarshalStrict(doc, into), "strict decode of %s %s", gvk, head.Metadata.Name)
	}
	for name, missing := range map[string]bool{
		"ServiceAccount": m.SA == nil, "Role": m.Role == nil, "RoleBinding": m.Binding == nil,
		"config ConfigMap": m.Config == nil, "ledger ConfigMap": m.Ledger == nil, "CronJob": m.CronJob == nil,
	} {
		require.False(t, missing, "the base renders no %s", name)
	}
	return m
}

// logRBACName names components/runner-log's Role and RoleBinding.
const logRBACName = "runner-reaper-runner-log"

// rules are every rule the manifest grants its ServiceAccount: its Role's,
// and the runner-log Role's when it has one.
func (m manifest) rules() []rbacv1.PolicyRule {
	out := append([]rbacv1.PolicyRule(nil), m.Role.Rules...)
	if m.LogRole != nil {
		out = append(out, m.LogRole.Rules...)
	}
	return out
}

// ---------------------------------------------------------------------------
// 1. Every rendered object is accepted by a real API server.

var nsOnce sync.Once

// shippedNamespaceExists creates arc-runners, the base's own namespace,
// labelled so that the API server's PodSecurity admission warns about any
// pod template that falls short of the restricted standard.
func shippedNamespaceExists(t *testing.T) {
	t.Helper()
	env := plane.Env(t)
	nsOnce.Do(func() {
		_, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: shippedNamespace, Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted",
				"pod-security.kubernetes.io/warn":    "restricted",
			}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", shippedNamespace, err)
		}
	})
}

func serverDryRun(t *testing.T, yamlDoc []byte) (stdout, stderr string, err error) {
	t.Helper()
	env := plane.Env(t)
	kubeconfig, kerr := env.Kubeconfig(t.TempDir())
	require.NoError(t, kerr)
	var out, errOut bytes.Buffer
	cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-")
	cmd.Stdin = bytes.NewReader(yamlDoc)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func TestRenderedManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	shippedNamespaceExists(t)
	for _, withComponent := range []bool{false, true} {
		name := "base"
		if withComponent {
			name = "base+delete-serviceaccounts"
		}
		t.Run(name, func(t *testing.T) {
			m := render(t, withComponent)
			stdout, stderr, err := serverDryRun(t, m.YAML)
			require.NoError(t, err, "kubectl apply --dry-run=server:\n%s%s", stdout, stderr)
			for _, obj := range m.Kinds {
				kind, objName, _ := strings.Cut(obj, "/")
				assert.Regexp(t, `(?i)`+kind+`[^ ]*/`+objName+` (created|configured|unchanged) \(server dry run\)`, stdout)
			}
			assert.NotContains(t, stderr, "PodSecurity", "the pod template meets the restricted Pod Security Standard")
			assert.NotContains(t, strings.ToLower(stderr), "warning")
		})
	}

	// The PodSecurity check above is live: the same CronJob without its
	// security context is warned about.
	t.Run("control: a pod template without the restricted context is warned about", func(t *testing.T) {
		m := render(t, false)
		cj := m.CronJob.DeepCopy()
		cj.Spec.JobTemplate.Spec.Template.Spec.SecurityContext = nil
		cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].SecurityContext = nil
		cj.APIVersion, cj.Kind = "batch/v1", "CronJob"
		b, err := yaml.Marshal(cj)
		require.NoError(t, err)
		_, stderr, err := serverDryRun(t, b)
		require.NoError(t, err)
		assert.Contains(t, stderr, `would violate PodSecurity "restricted`)
	})
}

// ---------------------------------------------------------------------------
// 2. The CronJob, the shipped config and the Role say what the design asks.

func TestCronJobIsAMinutelyRestrictedSweep(t *testing.T) {
	m := render(t, false)
	cj := m.CronJob
	assert.Equal(t, "runner-reaper", cj.Name)
	assert.Equal(t, shippedNamespace, cj.Namespace)
	assert.Equal(t, "runner-reaper", cj.Labels["app.kubernetes.io/name"])
	assert.Equal(t, "* * * * *", cj.Spec.Schedule, "every minute")
	assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	if assert.NotNil(t, cj.Spec.StartingDeadlineSeconds) {
		assert.Greater(t, *cj.Spec.StartingDeadlineSeconds, int64(0))
		assert.Less(t, *cj.Spec.StartingDeadlineSeconds, int64(60), "a missed minute is skipped, not run late")
	}
	if assert.NotNil(t, cj.Spec.SuccessfulJobsHistoryLimit) {
		assert.LessOrEqual(t, *cj.Spec.SuccessfulJobsHistoryLimit, int32(1))
	}
	if assert.NotNil(t, cj.Spec.FailedJobsHistoryLimit) {
		assert.LessOrEqual(t, *cj.Spec.FailedJobsHistoryLimit, int32(3))
		assert.Greater(t, *cj.Spec.FailedJobsHistoryLimit, int32(0), "a failed sweep stays to be read")
	}

	job := cj.Spec.JobTemplate.Spec
	if assert.NotNil(t, job.BackoffLimit) {
		assert.Equal(t, int32(0), *job.BackoffLimit, "the next minute is the retry")
	}
	if assert.NotNil(t, job.ActiveDeadlineSeconds) {
		assert.Greater(t, *job.ActiveDeadlineSeconds, int64(0))
		assert.Less(t, *job.ActiveDeadlineSeconds, int64(60), "a sweep ends before the next one is due")
	}

	pod := job.Template.Spec
	assert.Equal(t, saName, pod.ServiceAccountName)
	if assert.NotNil(t, pod.AutomountServiceAccountToken) {
		assert.True(t, *pod.AutomountServiceAccountToken, "the sweep talks to the API server as its ServiceAccount")
	}
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	if psc := pod.SecurityContext; assert.NotNil(t, psc) {
		if assert.NotNil(t, psc.RunAsNonRoot) {
			assert.True(t, *psc.RunAsNonRoot)
		}
		if assert.NotNil(t, psc.RunAsUser) {
			assert.Equal(t, int64(65532), *psc.RunAsUser)
		}
		if assert.NotNil(t, psc.SeccompProfile) {
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
		}
	}

	require.Len(t, pod.Containers, 1)
	assert.Empty(t, pod.InitContainers)
	c := pod.Containers[0]
	assert.Equal(t, "reaper", c.Name)
	assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper", strings.SplitN(c.Image, ":", 2)[0])
	assert.Contains(t, c.Image, ":", "the images: entry sets a tag")
	assert.Equal(t, []string{"/runner-reaper"}, c.Command)
	assert.Equal(t, []string{"sweep"}, c.Args)

	require.Len(t, c.EnvFrom, 1)
	if assert.NotNil(t, c.EnvFrom[0].ConfigMapRef) {
		assert.Equal(t, m.Config.Name, c.EnvFrom[0].ConfigMapRef.Name)
	}
	assert.Empty(t, c.EnvFrom[0].Prefix, "the config's keys are the REAPER_* names themselves")
	require.Len(t, c.Env, 1, "the token is the only variable not from the ConfigMap")
	assert.Equal(t, "REAPER_GITHUB_TOKEN", c.Env[0].Name)
	assert.Empty(t, c.Env[0].Value, "no secret in the manifest")
	if vf := c.Env[0].ValueFrom; assert.NotNil(t, vf) && assert.NotNil(t, vf.SecretKeyRef) {
		assert.Equal(t, "runner-reaper-github", vf.SecretKeyRef.Name)
		assert.Equal(t, "token", vf.SecretKeyRef.Key)
		assert.Nil(t, vf.SecretKeyRef.Optional, "a missing Secret stops the pod rather than sweeping unauthenticated")
	}

	req, lim := c.Resources.Requests, c.Resources.Limits
	assert.False(t, req.Cpu().IsZero(), "a cpu request")
	assert.False(t, req.Memory().IsZero(), "a memory request")
	assert.False(t, lim.Memory().IsZero(), "a memory limit")
	assert.LessOrEqual(t, lim.Memory().Value(), int64(256<<20), "small")

	if sc := c.SecurityContext; assert.NotNil(t, sc) {
		if assert.NotNil(t, sc.AllowPrivilegeEscalation) {
			assert.False(t, *sc.AllowPrivilegeEscalation)
		}
		if assert.NotNil(t, sc.ReadOnlyRootFilesystem) {
			assert.True(t, *sc.ReadOnlyRootFilesystem)
		}
		if assert.NotNil(t, sc.RunAsNonRoot) {
			assert.True(t, *sc.RunAsNonRoot)
		}
		if assert.NotNil(t, sc.Capabilities) {
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Empty(t, sc.Capabilities.Add)
		}
		assert.Nil(t, sc.Privileged)
	}
	assert.Empty(t, pod.Volumes, "nothing to write to: the ledger is a ConfigMap")
}

func TestShippedConfigStartsInDryRun(t *testing.T) {
	m := render(t, false)
	d := m.Config.Data
	assert.Equal(t, "true", d["REAPER_DRY_RUN"], "the shipped default deletes nothing")
	assert.Equal(t, shippedNamespace, d["REAPER_NAMESPACES"])
	assert.Equal(t, "configmap:"+shippedNamespace+"/"+ledgerName, d["REAPER_LEDGER"])
	assert.NotEmpty(t, d["REAPER_SCOPES"])
	assert.NotContains(t, d, "REAPER_DELETE_SERVICE_ACCOUNT", "only the component turns it on")
	for k := range d {
		assert.True(t, strings.HasPrefix(k, "REAPER_"), "%s: the reaper reads only REAPER_* names", k)
		assert.NotContains(t, k, "TOKEN", "no secret in the ConfigMap")
		assert.NotContains(t, k, "PRIVATE_KEY", "no secret in the ConfigMap")
	}
	assert.Empty(t, m.Ledger.Data, "the ledger ships empty")
	assert.Empty(t, m.Ledger.BinaryData, "the ledger ships empty")
	for _, obj := range m.Kinds {
		assert.False(t, strings.HasPrefix(obj, "Secret/"), "no Secret is shipped: %s", obj)
	}

	mc := render(t, true)
	assert.Equal(t, "true", mc.Config.Data["REAPER_DELETE_SERVICE_ACCOUNT"])
	assert.Equal(t, "true", mc.Config.Data["REAPER_DRY_RUN"], "the component leaves dry-run alone")
}

// rule names one permission: "verb resource" plus its resourceNames.
// leastPrivilege is what the sweep's own tests grant (testenv.LeastPrivilege):
// the shipped Role must be exactly that.
var leastPrivilege = testenv.Permissions(testenv.LeastPrivilege())

func TestRoleIsExactlyTheSweepsActions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		withComponent bool
		want          []string
	}{
		{"base", false, leastPrivilege},
		{"with delete-serviceaccounts", true, append([]string{"delete serviceaccounts"}, leastPrivilege...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, tc.withComponent)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			assert.Equal(t, want, testenv.Permissions(m.rules()))
			for _, r := range m.rules() {
				assert.Len(t, r.Verbs, 1, "one verb per rule, so one can be dropped: %v", r)
				assert.Len(t, r.Resources, 1, "one resource per rule: %v", r)
				assert.Empty(t, r.NonResourceURLs)
				for _, s := range append(append(r.Verbs, r.Resources...), r.APIGroups...) {
					assert.NotContains(t, s, "*", "no wildcard: %v", r)
				}
			}
			for _, obj := range m.Kinds {
				assert.False(t, strings.HasPrefix(obj, "Cluster"), "nothing cluster-scoped: %s", obj)
			}
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.Role.Name}, m.Binding.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: m.SA.Name, Namespace: shippedNamespace}}, m.Binding.Subjects)
			require.NotNil(t, m.LogRole, "the base includes components/runner-log")
			require.NotNil(t, m.LogBinding)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.LogRole.Name}, m.LogBinding.RoleRef)
			assert.Equal(t, m.Binding.Subjects, m.LogBinding.Subjects, "the same ServiceAccount")
			assert.Equal(t, m.SA.Name, m.CronJob.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName)
			for _, obj := range []metav1.Object{m.SA, m.Role, m.Binding, m.LogRole, m.LogBinding, m.Config, m.Ledger, m.CronJob} {
				assert.Equal(t, shippedNamespace, obj.GetNamespace(), obj.GetName())
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 3-5. The real binary, with the manifest's identity and Role.

// world is one namespace holding the manifest's RBAC objects, a dead runner
// pod and a zombie, with a simulated GitHub beside it.
type world struct {
	t     *testing.T
	env   *testenv.Env
	ns    string
	sim   *ghsim.Sim
	reap  map[string]string // the binary's environment
	bin   string
	zomID int64
}

type worldOpts struct {
	// dropRule removes the Role rule "verb resource" (e.g. "list pods");
	// empty keeps the manifest's Role as it is.
	dropRule string
	// noLedger leaves the manifest's ledger ConfigMap out, so that the
	// sweep must create it.
	noLedger bool
	// serviceAccountFor creates a ServiceAccount named like each of these
	// pods, as a pool of bare pods gives each runner one.
	serviceAccountFor []string
}

// installManifest creates the manifest's ServiceAccount, Role (less the
// rule dropRule names, if any) and RoleBinding in ns, and its ledger
// ConfigMap when ledger is true, and returns a kubeconfig for exactly the
// identity the CronJob's pod has, as RBAC sees it.
func installManifest(t *testing.T, ns string, m manifest, dropRule string, ledger bool) string {
	t.Helper()
	env := plane.Env(t)
	ctx := context.Background()
	sa := m.SA.DeepCopy()
	sa.Namespace = ns
	_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	require.NoError(t, err)

	roles := []*rbacv1.Role{m.Role.DeepCopy()}
	bindings := []*rbacv1.RoleBinding{m.Binding.DeepCopy()}
	if m.LogRole != nil {
		roles = append(roles, m.LogRole.DeepCopy())
		bindings = append(bindings, m.LogBinding.DeepCopy())
	}
	// dropRule names one rule, or several joined by " and ", of either
	// Role.
	for _, drop := range strings.Split(dropRule, " and ") {
		if drop == "" {
			continue
		}
		dropped := 0
		for _, role := range roles {
			var kept []rbacv1.PolicyRule
			for _, r := range role.Rules {
				p := testenv.Permission(r)
				if len(p) == 1 && (p[0] == drop || strings.HasPrefix(p[0], drop+" ")) {
					dropped++
					continue
				}
				kept = append(kept, r)
			}
			role.Rules = kept
		}
		require.Equal(t, 1, dropped, "exactly one rule grants %q", drop)
	}
	for _, role := range roles {
		role.Namespace = ns
		_, err = env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, rb := range bindings {
		rb.Namespace = ns
		require.Len(t, rb.Subjects, 1)
		rb.Subjects[0].Namespace = ns
		_, err = env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	if ledger {
		l := m.Ledger.DeepCopy()
		l.Namespace = ns
		_, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, l, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	kubeconfig, err := env.ServiceAccountKubeconfig(t.TempDir(), ns, sa.Name)
	require.NoError(t, err)
	return kubeconfig
}

func newWorld(t *testing.T, bin string, m manifest, o worldOpts) *world {
	t.Helper()
	env := plane.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "cronjob")
	w := &world{t: t, env: env, ns: ns, bin: bin}

	require.Len(t, m.Binding.Subjects, 1)
	require.Equal(t, shippedNamespace, m.Binding.Subjects[0].Namespace)
	kubeconfig := installManifest(t, ns, m, o.dropRule, !o.noLedger)

	// GitHub: one org, the zombie's registration offline.
	w.sim = ghsim.New(ghsim.Options{Token: token})
	url, err := w.sim.Start()
	require.NoError(t, err)
	t.Cleanup(w.sim.Close)
	w.sim.AddScope(scope)
	w.zomID = w.sim.AddRunner(scope, ghsim.Runner{Name: "acme-zombie", Status: "offline"}).ID

	// The fleet: a runner OOM-killed in a Failed pod, and a zombie.
	// A pool that gives each pod a ServiceAccount of its own runs the pod
	// as the same-named one: the one REAPER_DELETE_SERVICE_ACCOUNT removes.
	deadSA := ""
	if slices.Contains(o.serviceAccountFor, "acme-dead") {
		deadSA = "acme-dead"
	}
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "acme-dead", Org: "acme", ServiceAccount: deadSA, PodState: testenv.PodState{
		Phase: corev1.PodFailed, Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}})
	env.RunnerPod(t, ns, testenv.RunnerPod{Name: "acme-zombie", Org: "acme", PodState: testenv.Running()})
	for _, name := range o.serviceAccountFor {
		_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The rendered config, moved to ns and pointed at the sim.
	w.reap = map[string]string{}
	for k, v := range m.Config.Data {
		w.reap[k] = v
	}
	require.Equal(t, shippedNamespace, w.reap["REAPER_NAMESPACES"])
	require.Equal(t, "configmap:"+shippedNamespace+"/"+ledgerName, w.reap["REAPER_LEDGER"])
	for k, v := range map[string]string{
		"KUBECONFIG":            kubeconfig,
		"REAPER_NAMESPACES":     ns,
		"REAPER_LEDGER":         "configmap:" + ns + "/" + ledgerName,
		"REAPER_DRY_RUN":        "false",
		"REAPER_SCOPES":         scope,
		"REAPER_GITHUB_API_URL": url,
		"REAPER_GITHUB_TOKEN":   token,
		"REAPER_CONFIRM_AFTER":  "1s",
	} {
		w.reap[k] = v
	}
	return w
}

// sweep runs `runner-reaper sweep` as the CronJob's container does.
func (w *world) sweep() testenv.Run {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := testenv.RunBinary(ctx, w.bin, w.reap, "sweep")
	require.NoError(t, err)
	assert.NotContains(t, run.Stdout+run.Stderr, token, "safety rule 5: no secret in any line")
	return run
}

func (w *world) exists(get func(context.Context, string, metav1.GetOptions) error, name string) bool {
	err := get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(w.t, err)
	return true
}

func (w *world) podExists(name string) bool {
	w.t.Helper()
	return w.env.PodExists(w.t, w.ns, name)
}

func (w *world) serviceAccountExists(name string) bool {
	return w.exists(func(ctx context.Context, n string, o metav1.GetOptions) error {
		_, err := w.env.Client.CoreV1().ServiceAccounts(w.ns).Get(ctx, n, o)
		return err
	}, name)
}

func (w *world) registered(id int64) bool {
	for _, r := range w.sim.Runners(scope) {
		if r.ID == id {
			return true
		}
	}
	return false
}

// reapedEvents returns the pods the sweep recorded a RunnerReaped Event on.
func (w *world) reapedEvents() []string {
	evs, err := w.env.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	var pods []string
	for _, e := range evs.Items {
		if e.Reason == "RunnerReaped" {
			pods = append(pods, e.InvolvedObject.Name)
		}
	}
	sort.Strings(pods)
	return pods
}

// output is everything a run printed, with JSON's escaped quotes undone,
// so a refusal reads as the API server wrote it.
func output(r testenv.Run) string {
	return strings.ReplaceAll(r.Stdout+"\n"+r.Stderr, `\"`, `"`)
}

func describe(r testenv.Run) string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// TestSweepAsTheCronJob runs the very binary the CronJob runs, built once
// for all of its subtests (each in its own namespace with its own simulator,
// in parallel), as the manifest's ServiceAccount with the manifest's Role.
func TestSweepAsTheCronJob(t *testing.T) {
	// Every case sweeps on the control plane: start it (or skip in
	// -short) before spending time on building the binary.
	plane.Env(t)
	bin, err := testenv.BuildBinary(t.TempDir())
	require.NoError(t, err)
	t.Run("the manifest's Role does the whole job", func(t *testing.T) {
		t.Parallel()
		wholeJob(t, bin)
	})
	t.Run("each Role rule is needed and its refusal reported", func(t *testing.T) {
		eachRuleNeeded(t, bin)
	})
	t.Run("delete-serviceaccounts component", func(t *testing.T) {
		deleteServiceAccounts(t, bin)
	})
	t.Run("without the runner-log right", func(t *testing.T) {
		t.Parallel()
		noLogRight(t, bin)
	})
}

// Without get on pods/log the read of a runner's log is refused: the
// sweep says so once, naming the right and how to grant it, and goes on by
// today's rules (the confirmed zombie goes), exiting 0.
func noLogRight(t *testing.T, bin string) {
	w := newWorld(t, bin, render(t, false), worldOpts{dropRule: "get pods/log"})
	first := w.sweep()
	require.Equal(t, 0, first.Code, describe(first))
	time.Sleep(1500 * time.Millisecond)
	second := w.sweep()
	require.Equal(t, 0, second.Code, describe(second))
	assert.False(t, w.podExists("acme-zombie"), "no evidence either way: today's rules")
	assert.Len(t, second.Lines(`"msg":"runner logs not readable"`, `"right":"get pods/log"`, `"runners":1`, `REAPER_READ_RUNNER_LOG=false`), 1, describe(second))
	assert.Len(t, second.Lines(`"pod":"acme-zombie"`, `"runner_log":"unread"`, `cannot get resource \"pods/log\"`), 1, describe(second))
}

// The manifest's Role is enough for the whole job, run as the manifest's
// ServiceAccount: the terminal pod in the first sweep, the zombie (its
// registration, then its pod) in the second once confirm-after has passed.
func wholeJob(t *testing.T, bin string) {
	env := plane.Env(t)
	m := render(t, false)
	w := newWorld(t, bin, m, worldOpts{})

	first := w.sweep()
	require.Equal(t, 0, first.Code, describe(first))
	assert.False(t, w.podExists("acme-dead"), "the terminal pod goes at once")
	assert.True(t, w.podExists("acme-zombie"), "a zombie waits for confirmation")
	assert.True(t, w.registered(w.zomID))
	assert.Len(t, first.Lines(`"msg":"action"`, `"verdict":"terminal"`, `"pod":"acme-dead"`, `"result":"deleted"`, `"exit_class":"oom-host"`, `"dry_run":false`), 1, describe(first))
	assert.Len(t, first.Lines(`"msg":"sweep"`), 1, describe(first))

	time.Sleep(1500 * time.Millisecond)
	second := w.sweep()
	require.Equal(t, 0, second.Code, describe(second))
	assert.False(t, w.podExists("acme-zombie"), "the confirmed zombie's pod is gone")
	assert.False(t, w.registered(w.zomID), "and its registration first")
	assert.Len(t, second.Lines(`"msg":"action"`, `"verdict":"zombie"`, `"pod":"acme-zombie"`, `"action":"delete-registration-then-pod"`, `"result":"deleted"`), 1, describe(second))
	// Its log was read first (this control plane has no kubelet, so the
	// API server answers an empty log, which says nothing either way).
	assert.Len(t, second.Lines(`"pod":"acme-zombie"`, `"runner_log":"silent"`), 1, describe(second))
	assert.NotContains(t, first.Stdout+second.Stdout, "event_error")
	assert.Equal(t, []string{"acme-dead", "acme-zombie"}, w.reapedEvents(), "one Event per action, on its pod")

	ledger, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, ledger.Data, "the sweeps kept their marks in the manifest's ledger")
}

// Safety rule 5: with any one rule of the manifest's Role taken away, the
// sweep says which action was refused and does not end quietly: it exits 1
// where it could not observe or act, and for a missing Event it removes the
// pod and puts event_error on the action line. The pods can be observed two
// ways, a watch-list or pages: without the watch right the sweep warns and
// reads pages; only without both can it not observe.
func eachRuleNeeded(t *testing.T, bin string) {
	m := render(t, false)
	for _, tc := range []struct {
		drop     string
		noLedger bool
		code     int      // the exit status
		line     []string // fragments one stdout line holds: what the sweep was doing; NS is the namespace
		want     string   // the refusal in the output, quotes unescaped; NS is the namespace
		deadGone bool     // the terminal pod was removed
		events   []string // the pods a RunnerReaped Event was recorded on
	}{
		{drop: "watch pods", code: 0, deadGone: true, events: []string{"acme-dead"},
			line: []string{`"msg":"pods listed in pages: the API server gave no watch-list"`, `"namespace":"NS"`},
			want: `pods is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot watch resource "pods"`},
		{drop: "list pods and watch pods", code: 1,
			line: []string{`"msg":"sweep"`, `"status":1`, `"error":"observe pods: list pods in NS: `},
			want: `pods is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot list resource "pods"`},
		{drop: "delete pods", code: 1,
			line: []string{`"msg":"action"`, `"pod":"acme-dead"`, `"action":"delete-pod"`, `"result":"error"`},
			want: `the Kubernetes write would be refused, so nothing was changed: dry-run delete pod NS/acme-dead: pods "acme-dead" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot delete resource "pods"`,
			// The pre-flight (a server-side dry-run delete) is refused
			// before any write: no Event for an action that cannot
			// happen.
		},
		{drop: "create events", code: 0, deadGone: true,
			line: []string{`"msg":"action"`, `"pod":"acme-dead"`, `"result":"deleted"`, `"event_error":`},
			want: `"event_error":"record event RunnerReaped on pod NS/acme-dead: events is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot create resource "events"`},
		{drop: "get configmaps", code: 1,
			line: []string{`"msg":"sweep"`, `"status":1`, `"error":"load ledger: get ledger configmap NS/runner-reaper-ledger: `},
			want: `configmaps "runner-reaper-ledger" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot get resource "configmaps"`},
		{drop: "update configmaps", code: 1,
			line: []string{`"msg":"sweep"`, `"status":1`, `"error":"save ledger before acting (no action taken): update ledger configmap NS/runner-reaper-ledger: `},
			want: `configmaps "runner-reaper-ledger" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot update resource "configmaps"`},
		{drop: "create configmaps", noLedger: true, code: 1,
			line: []string{`"msg":"sweep"`, `"status":1`, `"error":"save ledger before acting (no action taken): create ledger configmap NS/runner-reaper-ledger: `},
			want: `configmaps is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot create resource "configmaps"`},
	} {
		t.Run("without "+tc.drop, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, bin, m, worldOpts{dropRule: tc.drop, noLedger: tc.noLedger})
			run := w.sweep()
			out := output(run)
			assert.Equal(t, tc.code, run.Code, describe(run))
			var line []string
			for _, f := range tc.line {
				line = append(line, strings.ReplaceAll(f, "NS", w.ns))
			}
			assert.Len(t, run.Lines(line...), 1, "one line holds %q: %s", line, describe(run))
			assert.Contains(t, out, strings.ReplaceAll(tc.want, "NS", w.ns), describe(run))
			assert.Equal(t, tc.deadGone, !w.podExists("acme-dead"), describe(run))
			assert.True(t, w.podExists("acme-zombie"), "nothing unconfirmed is touched")
			assert.True(t, w.registered(w.zomID))
			assert.Equal(t, tc.events, w.reapedEvents())
			if tc.code != 0 {
				assert.Len(t, run.Lines(`"msg":"sweep"`), 1, "a failed sweep still reports: %s", describe(run))
			}
		})
	}
}

// The component's rule and setting together: a reaped bare pod's
// same-named ServiceAccount goes with it, and without the rule the delete is
// refused and reported.
func deleteServiceAccounts(t *testing.T, bin string) {
	withComponent := render(t, true)
	base := render(t, false)
	require.Equal(t, "true", withComponent.Config.Data["REAPER_DELETE_SERVICE_ACCOUNT"])
	// The setting without the permission: the component's config with the
	// base's Role.
	settingOnly := withComponent
	settingOnly.Role, settingOnly.LogRole = base.Role, base.LogRole

	for _, tc := range []struct {
		name    string
		m       manifest
		code    int
		want    string
		saGone  bool
		podGone bool
	}{
		{"component", withComponent, 0, `"serviceaccount_result":"deleted"`, true, true},
		// The pre-flight proves the ServiceAccount delete too, so
		// without its rule nothing is deleted: not a pod whose
		// ServiceAccount would then be left behind.
		{"setting without the rule", settingOnly, 1,
			`dry-run delete service account NS/acme-dead: serviceaccounts "acme-dead" is forbidden: User "system:serviceaccount:NS:runner-reaper" cannot delete resource "serviceaccounts"`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, bin, tc.m, worldOpts{serviceAccountFor: []string{"acme-dead"}})
			run := w.sweep()
			assert.Equal(t, tc.code, run.Code, describe(run))
			assert.Contains(t, output(run), strings.ReplaceAll(tc.want, "NS", w.ns), describe(run))
			assert.Equal(t, tc.podGone, !w.podExists("acme-dead"))
			assert.Equal(t, tc.saGone, !w.serviceAccountExists("acme-dead"))
			assert.True(t, w.serviceAccountExists(saName), "the reaper's own ServiceAccount is not a runner's")
		})
	}
}
