package cronjob_test

// components/deployment and components/servicemonitor proven like the
// base: what they render is accepted by a real API server under the
// restricted Pod Security Standard; the Deployment is the CronJob's pod
// (its image, ServiceAccount, configuration, Secret and security
// context, as the base and the components before it leave them) running
// `runner-reaper serve`, with the long-running mode's replicas, rollout,
// probes and variables; the Role is the base's, and the Lease's rights
// are a Role of their own that names the Lease.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	deploymentComponent     = "deployment"
	serviceMonitorComponent = "servicemonitor"
	leaseRBACName           = "runner-reaper-lease"
	leaseName               = "runner-reaper"
)

// served is one rendering of the base with components/deployment, its
// objects by kind and name, each decoded strictly into its API type.
type served struct {
	YAML       []byte
	Kinds      []string // kind/name, in order
	Objects    map[string]*unstructured.Unstructured
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	PDB        *policyv1.PodDisruptionBudget
	Role       *rbacv1.Role // the base's
	LeaseRole  *rbacv1.Role
	Binding    *rbacv1.RoleBinding // the base's
	LeaseBind  *rbacv1.RoleBinding
	Config     *corev1.ConfigMap
}

// strictInto decodes a document into v, refusing a field v's type does not
// have.
func strictInto(t testing.TB, doc []byte, v any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(doc, v), "strict decode:\n%s", doc)
}

// renderServed renders k (a kustomization of the base) and decodes it.
func renderServed(t testing.TB, k testenv.Kustomization) served {
	t.Helper()
	out := testenv.Kustomize(t, k)
	s := served{YAML: out, Objects: map[string]*unstructured.Unstructured{}}
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
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		key := u.GetKind() + "/" + u.GetName()
		require.NotContains(t, s.Objects, key, "rendered twice")
		s.Objects[key] = u
		s.Kinds = append(s.Kinds, key)
		switch key {
		case "Deployment/runner-reaper":
			s.Deployment = &appsv1.Deployment{}
			strictInto(t, doc, s.Deployment)
		case "Service/runner-reaper":
			s.Service = &corev1.Service{}
			strictInto(t, doc, s.Service)
		case "PodDisruptionBudget/runner-reaper":
			s.PDB = &policyv1.PodDisruptionBudget{}
			strictInto(t, doc, s.PDB)
		case "Role/runner-reaper":
			s.Role = &rbacv1.Role{}
			strictInto(t, doc, s.Role)
		case "Role/" + leaseRBACName:
			s.LeaseRole = &rbacv1.Role{}
			strictInto(t, doc, s.LeaseRole)
		case "RoleBinding/runner-reaper":
			s.Binding = &rbacv1.RoleBinding{}
			strictInto(t, doc, s.Binding)
		case "RoleBinding/" + leaseRBACName:
			s.LeaseBind = &rbacv1.RoleBinding{}
			strictInto(t, doc, s.LeaseBind)
		case "ConfigMap/runner-reaper-config":
			s.Config = &corev1.ConfigMap{}
			strictInto(t, doc, s.Config)
		}
	}
	return s
}

// renderDeployment renders the base with the named components (directories
// under components/), in order.
func renderDeployment(t testing.TB, components ...string) served {
	t.Helper()
	k := testenv.Kustomization{Base: baseDir(t)}
	for _, c := range components {
		k.Components = append(k.Components, filepath.Join("components", c))
	}
	return renderServed(t, k)
}

// The Deployment is the CronJob's pod running `runner-reaper serve`: the
// same image, ServiceAccount, configuration, Secret, and pod and container
// security contexts; two replicas, replaced one at a time without surge,
// spread over nodes; /healthz and /readyz on the port named metrics; the
// long-running mode's variables; 256Mi; time after SIGTERM for the sweep
// in flight to end and the Lease to be released. The CronJob is gone;
// everything else of the base is as it was, the Role included, which
// already holds the watch the replicas need.
func TestDeploymentComponentIsTheCronJobsPodServing(t *testing.T) {
	base := render(t, false)
	s := renderDeployment(t, deploymentComponent)
	assert.NotContains(t, s.Kinds, "CronJob/runner-reaper", "the Deployment takes the CronJob's place")
	var want []string
	for _, k := range base.Kinds {
		if k != "CronJob/runner-reaper" {
			want = append(want, k)
		}
	}
	want = append(want, "Deployment/runner-reaper", "Service/runner-reaper", "PodDisruptionBudget/runner-reaper",
		"Role/"+leaseRBACName, "RoleBinding/"+leaseRBACName)
	assert.ElementsMatch(t, want, s.Kinds)
	assert.Equal(t, base.Role, s.Role, "the base's Role, unchanged")
	assert.Equal(t, base.Binding, s.Binding)
	assert.Equal(t, base.Config, s.Config, "the base's configuration, unchanged")
	assert.Contains(t, testenv.Permissions(s.Role.Rules), "watch pods", "the watch the replicas' pod store needs")

	cron := base.CronJob.Spec.JobTemplate.Spec.Template.Spec
	d := s.Deployment
	require.NotNil(t, d)
	assert.Equal(t, shippedNamespace, d.Namespace)
	assert.Equal(t, "runner-reaper", d.Labels["app.kubernetes.io/name"])
	require.NotNil(t, d.Spec.Replicas)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	podLabels := map[string]string{"app.kubernetes.io/name": "runner-reaper"}
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: podLabels}, d.Spec.Selector)
	assert.Equal(t, podLabels, d.Spec.Template.Labels)
	assert.Equal(t, base.CronJob.Spec.JobTemplate.Spec.Template.Labels, d.Spec.Template.Labels, "the CronJob's pod labels")
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, intstr.FromInt32(1), *d.Spec.Strategy.RollingUpdate.MaxUnavailable)
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxSurge)

	pod := d.Spec.Template.Spec
	assert.Equal(t, cron.ServiceAccountName, pod.ServiceAccountName)
	assert.Equal(t, cron.AutomountServiceAccountToken, pod.AutomountServiceAccountToken)
	assert.Equal(t, cron.SecurityContext, pod.SecurityContext, "the CronJob's restricted pod security context")
	assert.Empty(t, pod.RestartPolicy, "a Deployment's pods restart (Always, the default)")
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(60), *pod.TerminationGracePeriodSeconds)
	assert.Greater(t, *pod.TerminationGracePeriodSeconds, int64(reap.DefaultSpare.Seconds()))
	assert.Equal(t, []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: podLabels}}}, pod.TopologySpreadConstraints)
	assert.Empty(t, pod.Volumes)

	require.Len(t, pod.Containers, 1)
	c, cc := pod.Containers[0], cron.Containers[0]
	assert.Equal(t, cc.Name, c.Name)
	assert.Equal(t, cc.Image, c.Image, "the CronJob's image, as the base's images: entry pins it")
	assert.Equal(t, []string{"/runner-reaper"}, c.Command)
	assert.Equal(t, []string{"serve"}, c.Args)
	assert.Equal(t, cc.EnvFrom, c.EnvFrom)
	assert.Equal(t, cc.Env, c.Env[:len(cc.Env)], "the CronJob's variables first: its Secret")
	assert.Equal(t, cc.SecurityContext, c.SecurityContext, "the CronJob's container security context")
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	assert.Equal(t, []corev1.EnvVar{
		{Name: "REAPER_INTERVAL", Value: "1m"},
		{Name: "REAPER_LISTEN", Value: ":8080"},
		{Name: "REAPER_LEASE_NAME", Value: leaseName},
		{Name: "REAPER_LEASE_NAMESPACE", ValueFrom: fieldRef("metadata.namespace")},
		{Name: "REAPER_IDENTITY", ValueFrom: fieldRef("metadata.name")},
	}, c.Env[len(cc.Env):])
	assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}, c.Ports)
	for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		require.NotNil(t, p, path)
		assert.Equal(t, &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("metrics")}, p.HTTPGet)
	}
	assert.Equal(t, "256Mi", c.Resources.Limits.Memory().String())
	assert.Equal(t, "256Mi", c.Resources.Requests.Memory().String(), "the request is the limit")

	require.NotNil(t, s.Service)
	assert.Equal(t, podLabels, s.Service.Spec.Selector)
	assert.True(t, s.Service.Spec.PublishNotReadyAddresses)
	assert.Equal(t, []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}}, s.Service.Spec.Ports)
	require.NotNil(t, s.PDB)
	assert.Equal(t, intstr.FromInt32(1), *s.PDB.Spec.MinAvailable)
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: podLabels}, s.PDB.Spec.Selector)
	assert.Equal(t, policyv1.AlwaysAllow, *s.PDB.Spec.UnhealthyPodEvictionPolicy)

	require.NotNil(t, s.LeaseRole)
	assert.Equal(t, []string{
		"create leases.coordination.k8s.io",
		"get leases.coordination.k8s.io " + leaseName,
		"update leases.coordination.k8s.io " + leaseName,
	}, testenv.Permissions(s.LeaseRole.Rules))
	require.NotNil(t, s.LeaseBind)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leaseRBACName}, s.LeaseBind.RoleRef)
	assert.Equal(t, s.Binding.Subjects, s.LeaseBind.Subjects, "the same ServiceAccount as the base's Role")
	for _, k := range s.Kinds {
		assert.Equal(t, shippedNamespace, s.Objects[k].GetNamespace(), k)
		assert.False(t, strings.HasPrefix(k, "Cluster"), "nothing cluster-scoped: %s", k)
	}
}

// The Deployment takes the image the base pins (`kustomize edit set image`
// in the base), and the Secret's keys as components/arc-secret and
// arc-secret-app set them, whichever side of components/deployment they
// are listed on; with components/arc, the Role the replicas share holds
// the EphemeralRunners' watch too; with components/lambda-access, the
// Lambda's group is not bound to the Lease.
func TestDeploymentComponentFollowsTheBaseAndItsComponents(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(baseDir(t))))
	kust := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(kust)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(b), "newTag: latest"))
	require.NoError(t, os.WriteFile(kust, []byte(strings.Replace(string(b), "newTag: latest", "newTag: v9.8.7", 1)), 0o600))
	pinned := renderServed(t, testenv.Kustomization{Base: dir, Components: []string{filepath.Join(dir, "components", deploymentComponent)}})
	assert.Equal(t, "ghcr.io/runner-reaper/runner-reaper:v9.8.7", pinned.Deployment.Spec.Template.Spec.Containers[0].Image)

	secretRef := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out[e.Name] = e.ValueFrom.SecretKeyRef.Key
			}
		}
		return out
	}
	token := map[string]string{"REAPER_GITHUB_TOKEN": "github_token"}
	app := map[string]string{"REAPER_GITHUB_APP_ID": "github_app_id", "REAPER_GITHUB_INSTALLATION_ID": "github_app_installation_id",
		"REAPER_GITHUB_PRIVATE_KEY": "github_app_private_key"}
	for _, tc := range []struct {
		components []string
		want       map[string]string
	}{
		{[]string{"arc-secret", deploymentComponent}, token},
		{[]string{deploymentComponent, "arc-secret"}, token},
		{[]string{"arc-secret-app", deploymentComponent}, app},
		{[]string{deploymentComponent, "arc-secret-app"}, app},
	} {
		t.Run(strings.Join(tc.components, ","), func(t *testing.T) {
			s := renderDeployment(t, tc.components...)
			c := s.Deployment.Spec.Template.Spec.Containers[0]
			assert.Equal(t, tc.want, secretRef(c))
			assert.Len(t, c.Env, len(tc.want)+5, "the Secret's variables and the long-running mode's, once each")
			assert.NotContains(t, s.Kinds, "CronJob/runner-reaper")
		})
	}

	for _, order := range [][]string{{arcComponent, deploymentComponent}, {deploymentComponent, arcComponent}} {
		s := renderDeployment(t, order...)
		assert.Contains(t, testenv.Permissions(s.Role.Rules), "watch ephemeralrunners.actions.github.com", "%v", order)
		assert.Equal(t, "true", s.Config.Data["REAPER_ARC_LEAKS"])
	}
	s := renderDeployment(t, "lambda-access", deploymentComponent)
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: shippedNamespace}}, s.LeaseBind.Subjects,
		"the Lambda never leads")
}

// An overlay's namespace moves every object the component adds with the
// base's, and the Lease's binding names its subject as the base's binding
// does.
func TestDeploymentComponentMovesWithTheOverlaysNamespace(t *testing.T) {
	s := renderServed(t, testenv.Kustomization{Base: baseDir(t), Namespace: "ci-runners",
		Components: []string{filepath.Join("components", deploymentComponent)}})
	for _, k := range s.Kinds {
		assert.Equal(t, "ci-runners", s.Objects[k].GetNamespace(), k)
	}
	assert.Equal(t, s.Binding.Subjects, s.LeaseBind.Subjects)
}

// What the base renders with components/deployment (and with
// components/arc beside it) is accepted by a real API server in a
// namespace that enforces the restricted Pod Security Standard, with no
// warning; the same Deployment without its security contexts is warned
// about, so the check is live.
func TestDeploymentComponentIsAcceptedByTheAPIServer(t *testing.T) {
	shippedNamespaceExists(t)
	for _, components := range [][]string{{deploymentComponent}, {arcComponent, deploymentComponent}} {
		t.Run(strings.Join(components, ","), func(t *testing.T) {
			s := renderDeployment(t, components...)
			stdout, stderr, err := serverDryRun(t, s.YAML)
			require.NoError(t, err, "kubectl apply --dry-run=server:\n%s%s", stdout, stderr)
			for _, obj := range s.Kinds {
				kind, name, _ := strings.Cut(obj, "/")
				assert.Regexp(t, `(?i)`+kind+`[^ ]*/`+name+` (created|configured|unchanged) \(server dry run\)`, stdout)
			}
			assert.NotContains(t, stderr, "PodSecurity")
			assert.NotContains(t, strings.ToLower(stderr), "warning")
		})
	}
	t.Run("control: the Deployment without its security contexts is warned about", func(t *testing.T) {
		d := renderDeployment(t, deploymentComponent).Deployment.DeepCopy()
		d.Spec.Template.Spec.SecurityContext = nil
		d.Spec.Template.Spec.Containers[0].SecurityContext = nil
		d.APIVersion, d.Kind = "apps/v1", "Deployment"
		b, err := yaml.Marshal(d)
		require.NoError(t, err)
		_, stderr, err := serverDryRun(t, b)
		require.NoError(t, err)
		assert.Contains(t, stderr, `would violate PodSecurity "restricted`)
	})
}

// components/servicemonitor adds a ServiceMonitor that selects the
// component's Service by its labels and scrapes its port named metrics,
// giving every series the instance NAMESPACE.SERVICE, as the Helm chart's
// default; without components/deployment listed before it, the build
// fails rather than ship a ServiceMonitor with nothing to scrape.
func TestServiceMonitorComponent(t *testing.T) {
	s := renderDeployment(t, deploymentComponent, serviceMonitorComponent)
	sm := s.Objects["ServiceMonitor/runner-reaper"]
	require.NotNil(t, sm, "a ServiceMonitor")
	assert.Equal(t, "monitoring.coreos.com/v1", sm.GetAPIVersion())
	assert.Equal(t, shippedNamespace, sm.GetNamespace())
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	require.NotEmpty(t, selector)
	for k, v := range selector {
		assert.Equal(t, v, s.Service.Labels[k], "the ServiceMonitor selects the Service by %s", k)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	assert.Equal(t, map[string]any{
		"port": s.Service.Spec.Ports[0].Name, "path": "/metrics", "interval": "30s",
		"relabelings": []any{map[string]any{"action": "replace", "separator": ".", "targetLabel": "instance",
			"sourceLabels": []any{"__meta_kubernetes_namespace", "__meta_kubernetes_service_name"}}},
	}, endpoints[0])

	for _, components := range [][]string{{serviceMonitorComponent}, {serviceMonitorComponent, deploymentComponent}} {
		k := testenv.Kustomization{Base: baseDir(t)}
		for _, c := range components {
			k.Components = append(k.Components, filepath.Join("components", c))
		}
		_, err := testenv.KustomizeErr(t, k)
		require.Error(t, err, "%v", components)
		assert.Contains(t, err.Error(), "nothing selected by Service")
	}
}

// The Helm chart's mode: deployment, rendered by the real helm, is
// accepted by the same API server under the restricted Pod Security
// Standard, with no warning: its Deployment, Service, PodDisruptionBudget
// and Lease Role as the chart writes them (test/helm compares them with
// this component's).
func TestChartsDeploymentModeIsAcceptedByTheAPIServer(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	helm := filepath.Join(root, ".cache", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		if testing.Short() {
			t.Skipf("helm is not built (%s); `make helm` builds it, `make test` runs this", helm)
		}
		t.Fatalf("helm is not built: run `make helm`: %v", err)
	}
	shippedNamespaceExists(t)
	home := t.TempDir()
	cmd := exec.Command(helm, "template", "runner-reaper", filepath.Join(root, "charts", "runner-reaper"), "--namespace", shippedNamespace,
		"--set", "scopes={org:acme},image.tag=v1.2.3,mode=deployment,arc.enabled=true")
	cmd.Env = []string{"HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home,
		"KUBECONFIG=" + filepath.Join(home, "kubeconfig")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "helm template: %s", errOut.String())
	require.Contains(t, out.String(), "kind: Deployment")
	stdout, stderr, err := serverDryRun(t, out.Bytes())
	require.NoError(t, err, "kubectl apply --dry-run=server:\n%s%s", stdout, stderr)
	for _, kind := range []string{"deployment.apps", "service", "poddisruptionbudget.policy", "role.rbac.authorization.k8s.io"} {
		assert.Contains(t, stdout, kind+"/runner-reaper", "the chart's %s", kind)
	}
	assert.NotContains(t, stdout, "cronjob")
	assert.NotContains(t, strings.ToLower(stderr), "warning")
}
