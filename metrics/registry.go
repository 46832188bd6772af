package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry holds samples as gauges under the names and help of Families,
// for a push (metrics/push) and for the long-running mode's /metrics
// alike: each value is the last sweep's, or the process's state now, so
// none is a counter. A sample of a family the table does not have, or with
// the wrong labels, is an error.
func Registry(samples []Sample) (*prometheus.Registry, error) {
	fams := map[string]Family{}
	for _, f := range Families() {
		fams[f.Name] = f
	}
	reg := prometheus.NewRegistry()
	vecs := map[string]*prometheus.GaugeVec{}
	for _, s := range samples {
		v, ok := vecs[s.Name]
		if !ok {
			f, known := fams[s.Name]
			if !known {
				return nil, fmt.Errorf("metric %s is not in the table", s.Name)
			}
			v = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.Name, Help: f.Help}, f.Labels)
			if err := reg.Register(v); err != nil {
				return nil, fmt.Errorf("register %s: %w", s.Name, err)
			}
			vecs[s.Name] = v
		}
		g, err := v.GetMetricWithLabelValues(s.Labels...)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", s.Name, err)
		}
		g.Set(s.Value)
	}
	return reg, nil
}
