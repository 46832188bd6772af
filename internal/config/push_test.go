package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// otelVars are the OpenTelemetry SDK's variables the reaper checks, cleared
// for each case so that the machine's own environment cannot leak in.
var otelVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY"}

func TestLoadPush(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Push
		bad  string // the variable refused, if any
	}{
		{name: "nothing pushed by default; the instance is the ledger", env: minimal(),
			want: Push{Instance: "file:runner-reaper-ledger.json"}},
		{name: "a pushgateway and an instance",
			env:  with(minimal(), "REAPER_PUSHGATEWAY_URL", "http://pushgateway.monitoring:9091", "REAPER_METRICS_INSTANCE", "eu-west.1"),
			want: Push{PushgatewayURL: "http://pushgateway.monitoring:9091", Instance: "eu-west.1"}},
		{name: "the instance follows the ledger",
			env:  with(minimal(), "REAPER_LEDGER", "configmap:arc/ledger-b", "REAPER_PUSHGATEWAY_URL", "https://pgw.example.com/"),
			want: Push{PushgatewayURL: "https://pgw.example.com/", Instance: "configmap:arc/ledger-b"}},
		{name: "OTLP by the SDK's endpoint", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
			want: Push{Instance: "file:runner-reaper-ledger.json", OTLP: true}},
		{name: "OTLP by the metrics endpoint, over http/protobuf",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://otel.example.com/v1/metrics", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
			want: Push{Instance: "file:runner-reaper-ledger.json", OTLP: true}},
		{name: "an endpoint without a scheme", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4318"), bad: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "an endpoint with a password", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://u:hunter2@otel:4318"), bad: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"},
		{name: "gRPC is not spoken", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), bad: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "nor is JSON", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json"), bad: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"},
		{name: "headers are secrets the log must not show",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20hunter2hunter2,X-Scope-OrgID=fleet"),
			want: Push{Instance: "file:runner-reaper-ledger.json", OTLP: true, HeaderValues: []string{"Bearer hunter2hunter2", "Bearer%20hunter2hunter2", "fleet", "fleet"}}},
		{name: "a header value that is not URL-encoded", env: with(minimal(), "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer hunter2%zz"), bad: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "a header pair without a name", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "=hunter2"), bad: "OTEL_EXPORTER_OTLP_METRICS_HEADERS"},
		{name: "a TLS file the export would not use", env: with(minimal(), "OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"), bad: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{name: "a pushgateway with a password", env: with(minimal(), "REAPER_PUSHGATEWAY_URL", "http://u:hunter2@pgw:9091"), bad: "REAPER_PUSHGATEWAY_URL"},
		{name: "an instance with a slash", env: with(minimal(), "REAPER_METRICS_INSTANCE", "eu/west"), bad: "REAPER_METRICS_INSTANCE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range otelVars {
				t.Setenv(v, "")
			}
			setenv(t, tc.env)
			c, err := Load(false, "")
			if tc.bad == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, c.Push)
				return
			}
			require.Error(t, err)
			var ce *Error
			require.True(t, errors.As(err, &ce), "%T", err)
			require.Len(t, ce.Problems, 1, "%v", err)
			assert.Equal(t, tc.bad, ce.Problems[0].Var)
			assert.NotEmpty(t, ce.Problems[0].Example)
			assert.NotContains(t, err.Error(), "hunter2", "a refused URL is never quoted")
		})
	}
}
