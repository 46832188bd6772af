package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// deploymentMode is values with mode: deployment.
func deploymentMode(values map[string]any) map[string]any { return with(values, "mode", "deployment") }

// typed converts a rendered object into its API type, refusing a field
// the type does not have.
func typed[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, o)
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true),
		"%s %s as its API type", o.GetKind(), o.GetName())
	return out
}

// selector is the chart's own pod labels, which select a release's pods.
var selector = map[string]string{"app.kubernetes.io/name": "runner-reaper", "app.kubernetes.io/instance": release}

// envVar is the container's variable name, or nil.
func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// With mode: deployment the chart renders no CronJob and a Deployment of
// `runner-reaper serve` that is the CronJob's pod (image, ServiceAccount,
// configuration, Secret, the restricted security context), with the
// replicas, rollout, spread, probes, variables, memory and grace period
// the long-running mode needs; a Service to scrape, a
// PodDisruptionBudget, and the Lease's Role. The ServiceMonitor is off by
// default.
func TestDeploymentModeRendersTheServeDeployment(t *testing.T) {
	cronObjs := mustRender(t, namespace, nil)
	objs := mustRender(t, namespace, deploymentMode(nil))
	assert.Equal(t, []string{
		"ConfigMap arc-runners/runner-reaper-config", "ConfigMap arc-runners/runner-reaper-ledger",
		"Deployment arc-runners/runner-reaper", "PodDisruptionBudget arc-runners/runner-reaper",
		"Role arc-runners/runner-reaper", "Role arc-runners/runner-reaper-lease", "Role arc-runners/runner-reaper-runner-log",
		"RoleBinding arc-runners/runner-reaper", "RoleBinding arc-runners/runner-reaper-lease", "RoleBinding arc-runners/runner-reaper-runner-log",
		"Service arc-runners/runner-reaper", "ServiceAccount arc-runners/runner-reaper",
	}, ids(objs), "no CronJob, and no ServiceMonitor unless asked for")

	cj := typed[batchv1.CronJob](t, theCronJob(t, cronObjs)).Spec.JobTemplate.Spec.Template
	d := typed[appsv1.Deployment](t, theDeployment(t, objs))

	require.NotNil(t, d.Spec.Replicas)
	assert.Equal(t, int32(2), *d.Spec.Replicas, "one leads, one stands by")
	require.NotNil(t, d.Spec.Selector)
	assert.Equal(t, selector, d.Spec.Selector.MatchLabels)
	assert.Equal(t, selector, d.Spec.Template.Labels, "the pod's labels are the selector's")
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	require.NotNil(t, d.Spec.Strategy.RollingUpdate)
	assert.Equal(t, intstr.FromInt32(1), *d.Spec.Strategy.RollingUpdate.MaxUnavailable, "one replica at a time")
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxSurge, "never a third replica")

	pod := d.Spec.Template.Spec
	cronPod := cj.Spec
	assert.Equal(t, cronPod.ServiceAccountName, pod.ServiceAccountName, "the CronJob's ServiceAccount")
	assert.Equal(t, cronPod.AutomountServiceAccountToken, pod.AutomountServiceAccountToken, "its token mounted as the CronJob's is")
	assert.Equal(t, cronPod.SecurityContext, pod.SecurityContext, "the CronJob's restricted pod security context")
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(60), *pod.TerminationGracePeriodSeconds)
	assert.Greater(t, *pod.TerminationGracePeriodSeconds, int64(reap.DefaultSpare.Seconds()), "after SIGTERM the action in flight has its spare, and the Lease is released after")
	assert.Equal(t, []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: d.Spec.Selector,
	}}, pod.TopologySpreadConstraints, "the replicas on different nodes where there is room")
	assert.Empty(t, pod.Volumes)

	require.Len(t, pod.Containers, 1)
	c, cc := pod.Containers[0], cronPod.Containers[0]
	assert.Equal(t, cc.Name, c.Name)
	assert.Equal(t, cc.Image, c.Image, "the CronJob's image")
	assert.Equal(t, cc.ImagePullPolicy, c.ImagePullPolicy)
	assert.Equal(t, []string{"/runner-reaper"}, c.Command)
	assert.Equal(t, []string{"serve"}, c.Args)
	assert.Equal(t, cc.EnvFrom, c.EnvFrom, "the CronJob's configuration")
	assert.Equal(t, cc.Env, c.Env[:len(cc.Env)], "the CronJob's credential, first")
	assert.Equal(t, cc.SecurityContext, c.SecurityContext, "the CronJob's container security context")
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.RunAsNonRoot)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)

	assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}, c.Ports)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("metrics")}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		}
	}
	assert.Equal(t, probe("/healthz"), c.LivenessProbe)
	assert.Equal(t, probe("/readyz"), c.ReadinessProbe)

	assert.Equal(t, "1m", envVar(c, "REAPER_INTERVAL").Value)
	assert.Equal(t, ":8080", envVar(c, "REAPER_LISTEN").Value, "the container port")
	assert.Equal(t, release, envVar(c, "REAPER_LEASE_NAME").Value, "the release's full name")
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	assert.Equal(t, fieldRef("metadata.namespace"), envVar(c, "REAPER_LEASE_NAMESPACE").ValueFrom, "the pod's namespace")
	assert.Equal(t, fieldRef("metadata.name"), envVar(c, "REAPER_IDENTITY").ValueFrom, "the pod's name")
	assert.Len(t, c.Env, len(cc.Env)+5, "the CronJob's variables and the five of the long-running mode")

	limit := resource.MustParse("256Mi")
	assert.Equal(t, 0, c.Resources.Limits.Memory().Cmp(limit), "a 256Mi memory limit: %v", c.Resources.Limits)
	assert.Equal(t, 0, c.Resources.Requests.Memory().Cmp(limit), "the request is the limit")
	assert.False(t, c.Resources.Requests.Cpu().IsZero(), "a cpu request")

	svc := typed[corev1.Service](t, find(objs, "Service", namespace, release))
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	assert.Equal(t, selector, svc.Spec.Selector)
	assert.True(t, svc.Spec.PublishNotReadyAddresses, "a replica whose stores are not synced is scraped too")
	assert.Equal(t, []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}}, svc.Spec.Ports)

	pdb := typed[policyv1.PodDisruptionBudget](t, find(objs, "PodDisruptionBudget", namespace, release))
	assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
	assert.Nil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, selector, pdb.Spec.Selector.MatchLabels)
	require.NotNil(t, pdb.Spec.UnhealthyPodEvictionPolicy)
	assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy, "a replica that is not ready may always go")
}

// Every deployment value reaches the Deployment (or the object it
// belongs to), and the binary's start-up rules the template can see
// across values hold: the Service's port and the probes' are the
// container's, the Role names the Lease the pod leads on.
func TestDeploymentValuesReachTheirObjects(t *testing.T) {
	values := deploymentMode(map[string]any{
		"deployment": map[string]any{
			"replicas": 3, "interval": "2m", "port": 9090, "leaseName": "fleet-a-leader", "terminationGracePeriodSeconds": 120,
			"resources": map[string]any{"limits": map[string]any{"memory": "384Mi"}, "requests": map[string]any{"cpu": "50m", "memory": "384Mi"}},
			"pdb":       map[string]any{"enabled": true, "minAvailable": 2},
		},
		"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "15s",
			"labels": map[string]any{"release": "kube-prometheus-stack"}}},
	})
	objs := mustRender(t, namespace, values)
	d := typed[appsv1.Deployment](t, theDeployment(t, objs))
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, int64(120), *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "2m", envVar(c, "REAPER_INTERVAL").Value)
	assert.Equal(t, ":9090", envVar(c, "REAPER_LISTEN").Value)
	assert.Equal(t, int32(9090), c.Ports[0].ContainerPort)
	assert.Equal(t, "metrics", c.Ports[0].Name, "the probes and the Service find it by name")
	assert.Equal(t, "fleet-a-leader", envVar(c, "REAPER_LEASE_NAME").Value)
	assert.Equal(t, "384Mi", c.Resources.Limits.Memory().String())
	assert.Equal(t, "50m", c.Resources.Requests.Cpu().String())

	svc := typed[corev1.Service](t, find(objs, "Service", namespace, release))
	assert.Equal(t, int32(9090), svc.Spec.Ports[0].Port)
	pdb := typed[policyv1.PodDisruptionBudget](t, find(objs, "PodDisruptionBudget", namespace, release))
	assert.Equal(t, intstr.FromInt32(2), *pdb.Spec.MinAvailable)
	role := typed[rbacv1.Role](t, find(objs, "Role", namespace, release+"-lease"))
	assert.Contains(t, testenv.Permissions(role.Rules), "update leases.coordination.k8s.io fleet-a-leader")

	sm := find(objs, "ServiceMonitor", namespace, release)
	require.NotNil(t, sm, "the ServiceMonitor")
	assert.Equal(t, "kube-prometheus-stack", sm.GetLabels()["release"])
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	assert.Equal(t, "15s", endpoints[0].(map[string]any)["interval"])

	// Without a PodDisruptionBudget, none; one replica then renders.
	objs = mustRender(t, namespace, with(with(values, "deployment.pdb.enabled", false), "deployment.replicas", 1))
	assert.Nil(t, find(objs, "PodDisruptionBudget", namespace, release))
	assert.Equal(t, int32(1), *typed[appsv1.Deployment](t, theDeployment(t, objs)).Spec.Replicas)
}

// The ServiceMonitor scrapes the Service's port named metrics, selects the
// Service by the release's own labels, and gives every series the
// instance label a Pushgateway's grouping key would have given it
// (metrics.instance, by default NAMESPACE.FULLNAME), so that the shipped
// alerts, all per instance, see one reaper however many replicas.
func TestServiceMonitorScrapesTheServiceAsTheReapersInstance(t *testing.T) {
	scraped := deploymentMode(map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	for _, c := range []struct {
		name     string
		values   map[string]any
		instance string
	}{
		{"the default instance", scraped, namespace + "." + release},
		{"metrics.instance", with(scraped, "metrics.instance", "fleet-a"), "fleet-a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := mustRender(t, namespace, c.values)
			sm := find(objs, "ServiceMonitor", namespace, release)
			require.NotNil(t, sm)
			assert.Equal(t, "monitoring.coreos.com/v1", sm.GetAPIVersion())
			svc := find(objs, "Service", namespace, release)
			require.NotNil(t, svc)
			want, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			for k, v := range want {
				assert.Equal(t, v, svc.GetLabels()[k], "the ServiceMonitor selects the Service by %s", k)
			}
			assert.Equal(t, selector, want, "by the release's own labels")
			assert.Equal(t, []any{map[string]any{
				"port": "metrics", "path": "/metrics", "interval": "30s",
				"relabelings": []any{map[string]any{"action": "replace", "targetLabel": "instance", "replacement": c.instance}},
			}}, sm.Object["spec"].(map[string]any)["endpoints"])
			assert.Equal(t, c.instance, podEnv(t, objs, tokenSecret())["REAPER_METRICS_INSTANCE"], "the instance a push would have")
		})
	}
}

// stdout is `helm template`'s output for values, as bytes.
func stdout(t *testing.T, values map[string]any, extra ...string) string {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace, "--values", valuesFile(t, installable(values))}, extra...)
	out, stderr, err := helm(t, helmEnv(t), args...)
	require.NoError(t, err, stderr)
	return out
}

// A release of mode: cronjob renders exactly what it rendered before the
// chart had modes, byte for byte: with mode unset or set to cronjob alike,
// and whatever the values of the deployment mode say. (Each render here
// was compared with the same render of the chart before the modes when
// they came: identical, but for the shipped rules' two alerts of a
// Deployment, in the PrometheusRule of "every option".)
func TestCronJobModeRendersAsItDidBeforeTheModes(t *testing.T) {
	full := fullValues(t)
	everyDeploymentValue := map[string]any{
		"deployment": full["deployment"],
		"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": false, "interval": "10s", "labels": map[string]any{"team": "ci"}}},
	}
	for _, c := range []struct {
		name   string
		values map[string]any
	}{
		{"the defaults", map[string]any{}},
		{"every option", map[string]any{"arc": map[string]any{"enabled": true, "removeFinalizers": true}, "deleteServiceAccounts": true,
			"lambdaAccess": map[string]any{"enabled": true}, "namespaces": []any{namespace, "arc-runners-gpu"},
			"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}, "dashboard": map[string]any{"enabled": true}}}},
		{"ARC's App Secret", map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stdout(t, c.values)
			assert.Equal(t, before, stdout(t, with(c.values, "mode", "cronjob")), "mode: cronjob is the default")
			merged := deepCopy(c.values)
			for k, v := range everyDeploymentValue {
				if m, ok := merged[k].(map[string]any); ok {
					for mk, mv := range v.(map[string]any) {
						m[mk] = mv
					}
					continue
				}
				merged[k] = v
			}
			assert.Equal(t, before, stdout(t, merged), "no deployment value changes a byte of a CronJob's release")
			assert.NotContains(t, before, "coordination.k8s.io")
			assert.NotContains(t, before, "kind: Deployment")
		})
	}
}

// fullValues is testdata/full-values.yaml.
func fullValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "full-values.yaml"))
	require.NoError(t, err)
	var full map[string]any
	require.NoError(t, yaml.Unmarshal(b, &full))
	return full
}

// The Lease's rights come with mode: deployment only, in a Role of their
// own in the release's namespace that names the Lease the pod leads on:
// get and update that Lease, and create, which cannot be limited by name.
// The runners' Roles, in each namespace swept, are the CronJob's exactly,
// and already hold the watch on pods (and, with arc.enabled,
// EphemeralRunners) the replicas' watches need. The Lambda's group, which
// never leads, is bound to the runners' Role and not the Lease's.
func TestLeaseRightsOnlyInDeploymentMode(t *testing.T) {
	values := map[string]any{"arc": map[string]any{"enabled": true}, "lambdaAccess": map[string]any{"enabled": true},
		"namespaces": []any{namespace, "arc-runners-gpu"}}
	for _, c := range []struct {
		name, ns, lease string
		values          map[string]any
	}{
		{"the default Lease, beside the runners", namespace, release, values},
		{"a Lease of its own name, apart from the runners", "ops", "fleet-a-leader", with(values, "deployment.leaseName", "fleet-a-leader")},
	} {
		t.Run(c.name, func(t *testing.T) {
			cron := mustRender(t, c.ns, c.values)
			dep := mustRender(t, c.ns, deploymentMode(c.values))
			assert.NotContains(t, roleText(t, cron), "coordination.k8s.io", "no Lease right for a CronJob")
			assert.Nil(t, find(cron, "Role", c.ns, release+"-lease"))

			role := typed[rbacv1.Role](t, find(dep, "Role", c.ns, release+"-lease"))
			assert.Equal(t, []string{
				"create leases.coordination.k8s.io",
				"get leases.coordination.k8s.io " + c.lease,
				"update leases.coordination.k8s.io " + c.lease,
			}, testenv.Permissions(role.Rules))
			for _, r := range role.Rules {
				assert.Len(t, r.Verbs, 1, "one verb per rule, as the base: %v", r)
			}
			assert.Equal(t, c.lease, podEnv(t, dep, tokenSecret())["REAPER_LEASE_NAME"], "the Lease the pod leads on")
			rb := typed[rbacv1.RoleBinding](t, find(dep, "RoleBinding", c.ns, release+"-lease"))
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, rb.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: release, Namespace: c.ns}}, rb.Subjects,
				"the release's ServiceAccount only: not the Lambda's group")
			for _, o := range dep {
				if strings.Contains(o.GetName(), "lease") {
					assert.Equal(t, c.ns, o.GetNamespace(), "%s %s: the Lease's rights in the release's namespace only", o.GetKind(), o.GetName())
				}
			}

			// Every other RBAC object is the CronJob's, exactly.
			var cronRBAC, depRBAC []*unstructured.Unstructured
			for _, o := range cron {
				if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
					cronRBAC = append(cronRBAC, o)
				}
			}
			for _, o := range dep {
				if (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && o.GetName() != release+"-lease" {
					depRBAC = append(depRBAC, o)
				}
			}
			assert.Equal(t, cronRBAC, depRBAC, "the runners' and the ledger's Roles and bindings are the CronJob's")
			for _, ns := range []string{namespace, "arc-runners-gpu"} {
				perms := testenv.Permissions(typed[rbacv1.Role](t, find(dep, "Role", ns, release)).Rules)
				assert.Contains(t, perms, "watch pods", "the pods' watch in %s", ns)
				assert.Contains(t, perms, "watch ephemeralrunners.actions.github.com", "the EphemeralRunners' watch in %s", ns)
			}
		})
	}
}

// A mode the chart does not have is refused by the schema, naming the two
// it has; with the schema skipped, by the template, rather than rendering
// no workload at all.
func TestSchemaRefusesAnUnknownMode(t *testing.T) {
	for _, mode := range []any{"daemon", "Deployment", "", true} {
		_, err := render(t, namespace, map[string]any{"mode": mode})
		require.Error(t, err, "mode %#v", mode)
		all := refusals(t, err)
		assert.Contains(t, keysOf(all), "/mode", "refused at /mode")
		_, err = render(t, namespace, map[string]any{"mode": mode}, "--skip-schema-validation")
		require.Error(t, err, "mode %#v with the schema skipped", mode)
		assert.Contains(t, err.Error(), "mode must be cronjob or deployment")
	}
	_, err := render(t, namespace, map[string]any{"mode": "daemon"})
	assert.Contains(t, err.Error(), "- at '/mode': value must be one of 'cronjob', 'deployment'")
}

// deploymentOptions are the kustomize base with components/deployment,
// and the components that change what the Deployment runs or is granted,
// in either order where both orders are allowed, beside the chart's values
// that stand for them with mode: deployment.
func deploymentOptions() []option {
	arc := map[string]any{"arc": map[string]any{"enabled": true}}
	arcSecret := func(testing.TB) secretData { return secretData{"github_token": "ghp_arc_layout_token"} }
	return []option{
		{name: "deployment", values: deploymentMode(nil), components: []string{"components/deployment"}},
		{name: "arc, deployment", values: deploymentMode(arc), components: []string{"components/arc", "components/deployment"}},
		{name: "deployment, arc", values: deploymentMode(arc), components: []string{"components/deployment", "components/arc"}},
		{name: "arc-secret, deployment", values: deploymentMode(map[string]any{"github": map[string]any{"secretLayout": "arc"}}),
			components: []string{"components/arc-secret", "components/deployment"}, secret: arcSecret},
		{name: "deployment, arc-secret", values: deploymentMode(map[string]any{"github": map[string]any{"secretLayout": "arc"}}),
			components: []string{"components/deployment", "components/arc-secret"}, secret: arcSecret},
		{name: "arc-secret-app, deployment", values: deploymentMode(map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}}),
			components: []string{"components/arc-secret-app", "components/deployment"}, secret: arcAppSecret},
		{name: "deployment, arc-secret-app", values: deploymentMode(map[string]any{"github": map[string]any{"secretLayout": "arc", "auth": "app"}}),
			components: []string{"components/deployment", "components/arc-secret-app"}, secret: arcAppSecret},
		{name: "lambda-access, deployment", values: deploymentMode(map[string]any{"lambdaAccess": map[string]any{"enabled": true}}),
			components: []string{"components/lambda-access", "components/deployment"}},
		{name: "deployment, runner-log-off", values: deploymentMode(map[string]any{"runnerLog": map[string]any{"enabled": false}}),
			components: []string{"components/deployment", "components/runner-log-off"}},
	}
}

// withoutInstance is a copy of an object's spec without the chart's
// instance label wherever it selects or labels pods: the kustomize base's
// pods carry its name label alone.
func withoutInstance(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	require.NotNil(t, o)
	spec := deepCopy(o.Object["spec"].(map[string]any))
	const instance = "app.kubernetes.io/instance"
	for _, path := range [][]string{
		{"selector", "matchLabels", instance}, // Deployment, PodDisruptionBudget
		{"selector", instance},                // Service
		{"template", "metadata", "labels", instance},
	} {
		unstructured.RemoveNestedField(spec, path...)
	}
	if tsc, ok, _ := unstructured.NestedSlice(spec, "template", "spec", "topologySpreadConstraints"); ok {
		for _, c := range tsc {
			unstructured.RemoveNestedField(c.(map[string]any), "labelSelector", "matchLabels", instance)
		}
		require.NoError(t, unstructured.SetNestedSlice(spec, tsc, "template", "spec", "topologySpreadConstraints"))
	}
	return spec
}

// The chart with mode: deployment renders what the kustomize base renders
// with components/deployment (and each component beside it, in either
// order): the same objects, the same rights bound to the same subjects,
// and the same Deployment (its variables and their order included),
// Service and PodDisruptionBudget but for the chart's instance label. The
// ConfigMap the pod reads is the CronJob's, which
// TestChartGrantsWhatTheKustomizeBaseGrants compares.
func TestDeploymentModeIsTheKustomizeComponents(t *testing.T) {
	for _, o := range deploymentOptions() {
		t.Run(o.name, func(t *testing.T) {
			chart := mustRender(t, namespace, with(o.values, "image.tag", "latest"))
			kust := kustomize(t, o.components)
			require.Equal(t, ids(kust), ids(chart), "the same objects")
			for _, k := range kust {
				c := find(chart, k.GetKind(), k.GetNamespace(), k.GetName())
				switch k.GetKind() {
				case "Role":
					assert.Equal(t, rules(t, k), rules(t, c), "Role %s grants what the base grants, and no more", k.GetName())
				case "RoleBinding":
					assert.Equal(t, binding(t, k), binding(t, c), "RoleBinding %s binds the same", k.GetName())
				case "Deployment", "Service", "PodDisruptionBudget":
					assert.Equal(t, withoutInstance(t, k), withoutInstance(t, c), "the same %s, but for the chart's instance label", k.GetKind())
				}
			}
		})
	}
}

// The binary accepts, at start-up, what mode: deployment renders: with the
// chart's defaults, with every value set (the full values), and from the
// kustomize component; each environment is the CronJob's of the same
// values and the five variables of the long-running mode.
func TestBinaryAcceptsWhatDeploymentModeRenders(t *testing.T) {
	full := fullValues(t)
	app := appSecret(t)
	app["app.pem"] = app["private-key"]
	for _, c := range []struct {
		name       string
		cron, dep  []*unstructured.Unstructured
		secret     secretData
		leaseName  string
		listen     string
		interval   string
		identityOf string
	}{
		{name: "the defaults", cron: mustRender(t, namespace, nil), dep: mustRender(t, namespace, deploymentMode(nil)),
			secret: tokenSecret(), leaseName: release, listen: ":8080", interval: "1m", identityOf: release},
		{name: "the full values", cron: mustRender(t, namespace, full), dep: mustRender(t, namespace, deploymentMode(with(full, "monitoring.serviceMonitor.enabled", true))),
			secret: app, leaseName: "fleet-a-leader", listen: ":9090", interval: "2m", identityOf: "fleet-a-reaper"},
		{name: "the kustomize component", cron: kustomize(t, nil), dep: kustomize(t, []string{"components/deployment"}),
			secret: tokenSecret(), leaseName: release, listen: ":8080", interval: "1m", identityOf: release},
	} {
		t.Run(c.name, func(t *testing.T) {
			cronEnv, depEnv := podEnv(t, c.cron, c.secret), podEnv(t, c.dep, c.secret)
			serve := map[string]string{
				"REAPER_INTERVAL": c.interval, "REAPER_LISTEN": c.listen, "REAPER_LEASE_NAME": c.leaseName,
				"REAPER_LEASE_NAMESPACE": namespace, "REAPER_IDENTITY": podName(theDeployment(t, c.dep)),
			}
			assert.True(t, strings.HasPrefix(serve["REAPER_IDENTITY"], c.identityOf+"-"), "the pod's name")
			want := map[string]string{}
			for k, v := range cronEnv {
				want[k] = v
			}
			for k, v := range serve {
				want[k] = v
			}
			assert.Equal(t, want, depEnv, "the CronJob's environment and the long-running mode's")
			_, err := load(t, namespace, depEnv)
			require.NoError(t, err, "the binary accepts what mode: deployment renders")
		})
	}
}

// Release names up to Helm's 53 characters give, in mode: deployment too,
// objects Kubernetes accepts: the Service's name a DNS label, every other
// a DNS subdomain, every label valid, each reference naming an object
// rendered. A name the Service cannot take (a "." in it) is refused,
// saying how to name the objects instead.
func TestLongReleaseNamesInDeploymentMode(t *testing.T) {
	for _, rel := range []string{
		strings.Repeat("a", 51) + ".b", // the cut takes the "." away
		"a" + strings.Repeat("-", 51) + "b",
		strings.Repeat("a", 44),
		strings.Repeat("r", 39) + "-runner-reaper",
	} {
		t.Run(rel, func(t *testing.T) {
			objs, err := renderRelease(t, rel, namespace, deploymentMode(nil))
			require.NoError(t, err)
			names := map[string]bool{}
			for _, o := range objs {
				names[o.GetKind()+"/"+o.GetName()] = true
				if o.GetKind() == "Service" {
					assert.Empty(t, validation.IsDNS1035Label(o.GetName()), "Service %q", o.GetName())
				}
				assert.Empty(t, validation.IsDNS1123Subdomain(o.GetName()), "%s %q", o.GetKind(), o.GetName())
				assertLabels(t, o.GetKind()+" "+o.GetName(), o.GetLabels())
			}
			d := typed[appsv1.Deployment](t, theDeployment(t, objs))
			assertLabels(t, "the pod", d.Spec.Template.Labels)
			assert.True(t, names["ServiceAccount/"+d.Spec.Template.Spec.ServiceAccountName])
			for _, o := range objs {
				if o.GetKind() == "RoleBinding" {
					ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
					assert.True(t, names["Role/"+ref], "%s binds the Role %q, which is rendered", o.GetName(), ref)
				}
			}
		})
	}
	for _, rel := range []string{strings.Repeat("a", 24) + "." + strings.Repeat("b", 28), "a.b"} {
		_, err := renderRelease(t, rel, namespace, deploymentMode(nil))
		require.Error(t, err, "release %s", rel)
		assert.Contains(t, err.Error(), "a Service's name must start with a letter and hold only lower-case letters, digits and -: name the objects with fullnameOverride")
		_, err = renderRelease(t, rel, namespace, with(deploymentMode(nil), "fullnameOverride", "fleet-a"))
		assert.NoError(t, err, "release %s, its objects named fleet-a", rel)
	}
}
