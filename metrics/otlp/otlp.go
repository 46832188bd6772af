// Package otlp exports a sweep's metrics over OTLP/HTTP, for users whose
// metrics go through an OpenTelemetry Collector rather than a Pushgateway.
// The exporter reads the SDK's standard OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, timeout, TLS), so that the reaper configures it as
// every other OpenTelemetry program is configured.
//
// The names are the Prometheus names of metrics.Families, so that a backend
// that stores OTLP in Prometheus (Prometheus's own OTLP receiver, Mimir)
// shows the same series as a Pushgateway would. No unit is set: a
// translator that appends units would make runner_reaper_sweep_duration_
// seconds_seconds of a name that already says it.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/metrics/push"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Export sends res's figures once, as gauges, with the resource attributes
// service.name=runner-reaper and service.instance.id=instance (plus any in
// OTEL_RESOURCE_ATTRIBUTES).
func Export(ctx context.Context, res sweep.Result, instance string, timeout time.Duration) error {
	rm, err := collect(ctx, res, instance)
	if err != nil {
		return fmt.Errorf("export metrics over otlp: %w", err)
	}
	// The push's client: no redirect followed, the answer bounded. The
	// SDK's own retries stop at ctx's deadline.
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithHTTPClient(push.Client(timeout)))
	if err != nil {
		return fmt.Errorf("export metrics over otlp: %w", err)
	}
	err = exp.Export(ctx, rm)
	if serr := exp.Shutdown(ctx); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("export metrics over otlp: %w", err)
	}
	return nil
}

// collect records the samples on a meter read by hand: one export per
// sweep, no periodic reader and no goroutine left behind.
func collect(ctx context.Context, res sweep.Result, instance string) (*metricdata.ResourceMetrics, error) {
	r, err := resource.New(ctx, resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", "runner-reaper"), attribute.String("service.instance.id", instance)))
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(r))
	meter := provider.Meter("github.com/runner-reaper/runner-reaper")
	fams := map[string]metrics.Family{}
	for _, f := range metrics.Families() {
		fams[f.Name] = f
	}
	gauges := map[string]metric.Float64Gauge{}
	for _, s := range append(metrics.Samples(res), metrics.SuccessSamples(res)...) {
		f := fams[s.Name]
		g, ok := gauges[s.Name]
		if !ok {
			if g, err = meter.Float64Gauge(s.Name, metric.WithDescription(f.Help)); err != nil {
				return nil, fmt.Errorf("gauge %s: %w", s.Name, err)
			}
			gauges[s.Name] = g
		}
		attrs := make([]attribute.KeyValue, 0, len(s.Labels))
		for i, l := range s.Labels {
			attrs = append(attrs, attribute.String(f.Labels[i], l))
		}
		g.Record(ctx, s.Value, metric.WithAttributes(attrs...))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	return &rm, nil
}
