package helm

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// instancePattern is the binary's rule for REAPER_METRICS_INSTANCE
// (internal/config), which the chart's default must meet.
var instancePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// releaseInstance renders release rel in ns with the chart's defaults and
// returns the metrics instance the binary would push as, after checking
// that the binary accepts the whole configuration.
func releaseInstance(t *testing.T, rel, ns string) string {
	t.Helper()
	objs, err := renderRelease(t, rel, ns, nil)
	require.NoError(t, err)
	env := podEnv(t, objs, tokenSecret())
	c, err := load(t, ns, env)
	require.NoError(t, err, "the binary accepts what release %s in %s renders", rel, ns)
	assert.Equal(t, env["REAPER_METRICS_INSTANCE"], c.Push.Instance)
	assert.Regexp(t, instancePattern, c.Push.Instance)
	assert.NotRegexp(t, `[-.]$`, c.Push.Instance, "ends on a letter or digit")
	return c.Push.Instance
}

// Two releases push to a Pushgateway under two instances whenever they
// are two releases: of one name in two namespaces (which share a full
// name, so the full name alone made them one instance and each push
// replaced the other's), of two names in one namespace, and of names in
// namespaces that agree on more than the instance's 63 characters hold,
// which a hash of the whole tells apart.
func TestEachReleasePushesAsItsOwnInstance(t *testing.T) {
	longNS := strings.Repeat("n", 62)
	longRelease := strings.Repeat("r", 53)
	for _, c := range []struct {
		name string
		a, b [2]string // release, namespace
	}{
		{"one name, two namespaces", [2]string{release, namespace}, [2]string{release, "arc-runners-gpu"}},
		{"two names, one namespace", [2]string{release, namespace}, [2]string{"gpu", namespace}},
		{"long names, namespaces apart past the cut", [2]string{longRelease, longNS + "a"}, [2]string{longRelease, longNS + "b"}},
		{"two names apart past the cut, in a long namespace", [2]string{"alpha", longNS}, [2]string{"beta", longNS}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := releaseInstance(t, c.a[0], c.a[1])
			b := releaseInstance(t, c.b[0], c.b[1])
			assert.NotEqual(t, a, b, "two releases, two instances")
		})
	}
	assert.Equal(t, namespace+"."+release, releaseInstance(t, release, namespace), "NAMESPACE.FULLNAME while it fits")
}

// Release names up to Helm's 53 characters, cut to the 52 a CronJob's
// name allows wherever the cut falls (after a ".", inside a run of "-",
// inside the chart's name), give objects Kubernetes accepts: each name a
// DNS subdomain (the CronJob's at most 52 characters), each label a valid
// key and value, each reference naming an object rendered; and a
// configuration the binary accepts, REAPER_LEDGER included.
func TestLongReleaseNamesGiveValidObjects(t *testing.T) {
	for _, rel := range []string{
		strings.Repeat("a", 51) + ".b",             // the cut ends on "."
		"a" + strings.Repeat("-", 51) + "b",        // on a run of "-"
		strings.Repeat("a", 44),                    // on the "-" after "runner"
		strings.Repeat("r", 39) + "-runner-reaper", // holds the chart's name: itself, cut
		strings.Repeat("a", 24) + "." + strings.Repeat("b", 28),
		"a.b",
	} {
		require.Regexp(t, releaseName, rel, "a name Helm accepts")
		require.LessOrEqual(t, len(rel), 53, "a name Helm accepts")
		t.Run(rel, func(t *testing.T) {
			objs, err := renderRelease(t, rel, namespace, nil)
			require.NoError(t, err)
			names := map[string]bool{}
			for _, o := range objs {
				names[o.GetKind()+"/"+o.GetName()] = true
				assert.Empty(t, validation.IsDNS1123Subdomain(o.GetName()), "%s %q", o.GetKind(), o.GetName())
				if o.GetKind() == "CronJob" {
					assert.LessOrEqual(t, len(o.GetName()), 52, "a CronJob's name, which each Job's adds 11 to")
				}
				assertLabels(t, o.GetKind()+" "+o.GetName(), o.GetLabels())
			}
			cj := theCronJob(t, objs)
			podLabels, _, _ := unstructured.NestedStringMap(cj.Object, "spec", "jobTemplate", "spec", "template", "metadata", "labels")
			assertLabels(t, "the pod", podLabels)
			sa, _, _ := unstructured.NestedString(cj.Object, "spec", "jobTemplate", "spec", "template", "spec", "serviceAccountName")
			assert.True(t, names["ServiceAccount/"+sa], "the pod's ServiceAccount %q is rendered", sa)
			for _, o := range objs {
				if o.GetKind() == "RoleBinding" {
					ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
					assert.True(t, names["Role/"+ref], "%s binds the Role %q, which is rendered", o.GetName(), ref)
				}
			}
			c, err := load(t, namespace, podEnv(t, objs, tokenSecret()))
			require.NoError(t, err, "the binary accepts what release %s renders", rel)
			assert.True(t, names["ConfigMap/"+c.Ledger.Name], "the ledger %q is rendered", c.Ledger.Name)
		})
	}
}

// releaseName is Helm's rule for a release's name (at most 53 characters).
var releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// assertLabels checks labels as the API server does.
func assertLabels(t *testing.T, of string, labels map[string]string) {
	t.Helper()
	for k, v := range labels {
		assert.Empty(t, validation.IsQualifiedName(k), "%s: label key %q", of, k)
		assert.Empty(t, validation.IsValidLabelValue(v), "%s: label %s=%q", of, k, v)
	}
}
