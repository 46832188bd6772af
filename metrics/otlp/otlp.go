// Package otlp exports a sweep's metrics over OTLP/HTTP (protobuf), for
// users whose metrics go through an OpenTelemetry Collector rather than a
// Pushgateway. Where to and how is the OpenTelemetry SDK's standard
// OTEL_EXPORTER_OTLP_* variables, read and checked by internal/config, so
// that the reaper is configured as every other OpenTelemetry program is.
//
// The request is built from OTLP's own generated messages and sent by the
// reaper's push client, not by the SDK's exporter: one set of gauges once a
// sweep needs no meter provider, and the exporter links gRPC and the SDK,
// whose code and initialisation kept about 7 MiB of the binary resident in
// every sweep, whether it exported or not (a fifth of a 10,000-runner
// sweep's peak).
//
// The names are the Prometheus names of metrics.Families, so that a backend
// that stores OTLP in Prometheus (Prometheus's own OTLP receiver, Mimir)
// shows the same series as a Pushgateway would. No unit is set: a
// translator that appends units would make runner_reaper_sweep_duration_
// seconds_seconds of a name that already says it.
package otlp

import (
	"context"
	"fmt"
	"time"

	"github.com/runner-reaper/runner-reaper/metrics/push"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Target is where a sweep's metrics go and how.
type Target struct {
	// URL is the metrics endpoint itself (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
	// as it is, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/metrics joined on).
	URL string
	// Headers are sent with the request: secrets, never formatted into an
	// error.
	Headers map[string]string
	// Timeout bounds the export, retries included; 0 leaves only the
	// context's deadline.
	Timeout time.Duration
	// Gzip compresses the request body.
	Gzip bool
	// Resource are OTEL_RESOURCE_ATTRIBUTES' attributes. service.name and
	// service.instance.id are the reaper's own and replace any given here.
	Resource map[string]string
}

// Export sends res's figures once, as gauges, with the resource attributes
// service.name=runner-reaper and service.instance.id=instance (plus the
// target's own), within timeout and ctx's deadline.
func Export(ctx context.Context, res sweep.Result, instance string, timeout time.Duration, t Target) error {
	now := time.Now()
	body, err := encode(request(res, instance, t.Resource, now))
	if err != nil {
		return fmt.Errorf("export metrics over otlp: %w", err)
	}
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	if err := send(ctx, push.Client(timeout), t, body); err != nil {
		return fmt.Errorf("export metrics over otlp to %s: %w", t.URL, err)
	}
	return nil
}
