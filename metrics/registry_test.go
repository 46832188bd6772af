package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The registry holds each sample as a gauge under its family's name, help
// and labels, the long-running mode's own families too; a name the table
// does not have, or labels that do not fit, are refused.
func TestRegistry(t *testing.T) {
	reg, err := Registry([]Sample{
		{PromKubeRequests, nil, 12},
		{PromLeader, nil, 1},
		{PromStoreObjects, []string{"pods"}, 30_000},
		{PromStoreObjects, []string{"ephemeralrunners"}, 29_000},
	})
	require.NoError(t, err)
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		got[f.GetName()] = f
		assert.Equal(t, dto.MetricType_GAUGE, f.GetType(), f.GetName())
		assert.NotEmpty(t, f.GetHelp(), f.GetName())
	}
	require.Len(t, got, 3)
	assert.Equal(t, 12.0, got[PromKubeRequests].GetMetric()[0].GetGauge().GetValue())
	assert.Equal(t, 1.0, got[PromLeader].GetMetric()[0].GetGauge().GetValue())
	objects := map[string]float64{}
	for _, m := range got[PromStoreObjects].GetMetric() {
		require.Len(t, m.GetLabel(), 1)
		assert.Equal(t, "resource", m.GetLabel()[0].GetName())
		objects[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	assert.Equal(t, map[string]float64{"pods": 30_000, "ephemeralrunners": 29_000}, objects)

	for _, tc := range []struct {
		name   string
		sample Sample
	}{
		{"a name not in the table", Sample{"runner_reaper_nothing", nil, 1}},
		{"a label too few", Sample{PromWatchLive, nil, 1}},
		{"a label too many", Sample{PromLeader, []string{"x"}, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Registry([]Sample{tc.sample})
			assert.Error(t, err)
		})
	}
}
