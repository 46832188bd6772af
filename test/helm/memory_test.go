package helm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/internal/memlimit"
)

// shippedFleet is the fleet the shipped memory limit must fit: 50,000
// runner pods, each with its registration (and, with REAPER_ARC_LEAKS, its
// EphemeralRunner, which the formula's per-pod cost includes).
var shippedFleet = memlimit.Fleet{Pods: 50_000, Registrations: 50_000}

// The chart's default memory request and limit come from the README's
// formula (memlimit.Default): the limit fits 50,000 pods with the peak at
// most 80% of it, and the request is the limit, so that the node keeps for
// the sweep what the sweep may use. (TestChartGrantsWhatTheKustomizeBaseGrants
// and the CronJob comparison keep the kustomize base's the same.)
func TestShippedMemoryFitsFiftyThousandPods(t *testing.T) {
	objs, err := render(t, "runner-reaper", nil)
	require.NoError(t, err)
	c := container(t, objs)
	quantity := func(path ...string) int64 {
		s, found, err := unstructured.NestedString(c, path...)
		require.NoError(t, err)
		require.True(t, found, "%v is set", path)
		q, err := resource.ParseQuantity(s)
		require.NoError(t, err)
		return q.Value()
	}
	limit, request := quantity("resources", "limits", "memory"), quantity("resources", "requests", "memory")
	need := memlimit.Default().NeededMiB(shippedFleet) << 20
	assert.GreaterOrEqual(t, limit, need, "the formula needs %d MiB for %+v", need>>20, shippedFleet)
	assert.Equal(t, limit, request, "the request is the limit")
	_, fit := memlimit.Check(0, limit, shippedFleet, memlimit.Default())
	assert.GreaterOrEqual(t, fit.Pods, shippedFleet.Pods, "the limit fits at least the fleet")
}
