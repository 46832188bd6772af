package config

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// otelVars are the OpenTelemetry SDK's variables the reaper reads, cleared
// for each case so that the machine's own environment cannot leak in.
var otelVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE",
	"OTEL_RESOURCE_ATTRIBUTES"}

// otlpTo is the export the SDK's defaults give for url.
func otlpTo(url string) *OTLP { return &OTLP{URL: url, Timeout: 10 * time.Second} }

func TestLoadPush(t *testing.T) {
	const ledger = "file:runner-reaper-ledger.json"
	at := func(o *OTLP, f func(*OTLP)) *OTLP { f(o); return o }
	cases := []struct {
		name string
		env  map[string]string
		want Push
		bad  string // the variable refused, if any
	}{
		{name: "nothing pushed by default; the instance is the ledger", env: minimal(),
			want: Push{Instance: ledger}},
		{name: "a pushgateway and an instance",
			env:  with(minimal(), "REAPER_PUSHGATEWAY_URL", "http://pushgateway.monitoring:9091", "REAPER_METRICS_INSTANCE", "eu-west.1"),
			want: Push{PushgatewayURL: "http://pushgateway.monitoring:9091", Instance: "eu-west.1"}},
		{name: "the instance follows the ledger",
			env:  with(minimal(), "REAPER_LEDGER", "configmap:arc/ledger-b", "REAPER_PUSHGATEWAY_URL", "https://pgw.example.com/"),
			want: Push{PushgatewayURL: "https://pgw.example.com/", Instance: "configmap:arc/ledger-b"}},
		{name: "OTLP by the SDK's endpoint, the signal's path joined on", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
			want: Push{Instance: ledger, OTLP: otlpTo("http://127.0.0.1:4318/v1/metrics")}},
		{name: "the base endpoint's own path is kept", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", " https://otel.example.com/otlp/ "),
			want: Push{Instance: ledger, OTLP: otlpTo("https://otel.example.com/otlp/v1/metrics")}},
		{name: "OTLP by the metrics endpoint, as it is, over http/protobuf",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://otel.example.com/api/v1/otlp/v1/metrics", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
			want: Push{Instance: ledger, OTLP: otlpTo("https://otel.example.com/api/v1/otlp/v1/metrics")}},
		{name: "a metrics endpoint without a path is the root", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://otel:4318"),
			want: Push{Instance: ledger, OTLP: otlpTo("http://otel:4318/")}},
		{name: "the metrics endpoint wins over the base",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics:4318/m"),
			want: Push{Instance: ledger, OTLP: otlpTo("http://metrics:4318/m")}},
		{name: "a blank endpoint is unset", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "  "),
			want: Push{Instance: ledger}},
		{name: "an endpoint without a scheme", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4318"), bad: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "an endpoint with a password", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://u:hunter2@otel:4318"), bad: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"},
		{name: "a bad base endpoint is refused though the metrics one is good",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4318", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://otel:4318"), bad: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "gRPC is not spoken", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), bad: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "nor is JSON", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json"), bad: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"},
		{name: "headers are secrets, listed for the log to redact",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20hunter2hunter2,X-Scope-OrgID=fleet"),
			want: Push{Instance: ledger, OTLP: at(otlpTo("http://127.0.0.1:4318/v1/metrics"), func(o *OTLP) {
				o.Headers = map[string]string{"Authorization": "Bearer hunter2hunter2", "X-Scope-OrgID": "fleet"}
			}), HeaderValues: []string{"Bearer hunter2hunter2", "Bearer%20hunter2hunter2", "fleet", "fleet"}}},
		{name: "the metrics headers replace the base headers, and both are secrets",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=base,X-Base=1",
				"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "Authorization= metrics "),
			want: Push{Instance: ledger, OTLP: at(otlpTo("http://127.0.0.1:4318/v1/metrics"), func(o *OTLP) {
				o.Headers = map[string]string{"Authorization": "metrics"}
			}), HeaderValues: []string{"base", "base", "1", "1", "metrics", "metrics"}}},
		{name: "a header value that is not URL-encoded", env: with(minimal(), "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer hunter2%zz"), bad: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "a header value that decodes to a line break", env: with(minimal(), "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=hunter2%0AX-Evil:1"), bad: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "a header pair without a name", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "=hunter2"), bad: "OTEL_EXPORTER_OTLP_METRICS_HEADERS"},
		{name: "a TLS file the export would not use", env: with(minimal(), "OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"), bad: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{name: "the timeout in milliseconds, the metrics one first, and gzip",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_TIMEOUT", "500",
				"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "2500", "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
			want: Push{Instance: ledger, OTLP: &OTLP{URL: "http://otel:4318/v1/metrics", Timeout: 2500 * time.Millisecond, Gzip: true}}},
		{name: "no timeout of its own, no compression",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_TIMEOUT", "0", "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "none", "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
			want: Push{Instance: ledger, OTLP: &OTLP{URL: "http://otel:4318/v1/metrics"}}},
		{name: "a timeout with a unit", env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_TIMEOUT", "10s"), bad: "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{name: "a negative timeout", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "-1"), bad: "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"},
		{name: "a compression the export does not know", env: with(minimal(), "OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"), bad: "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{name: "insecure agreeing with the endpoint",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_INSECURE", "TRUE"),
			want: Push{Instance: ledger, OTLP: otlpTo("http://otel:4318/v1/metrics")}},
		{name: "insecure would send an https endpoint's headers in the clear",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel:4318", "OTEL_EXPORTER_OTLP_INSECURE", "true"), bad: "OTEL_EXPORTER_OTLP_INSECURE"},
		{name: "not insecure would send an http endpoint https",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_METRICS_INSECURE", "false"), bad: "OTEL_EXPORTER_OTLP_METRICS_INSECURE"},
		{name: "insecure neither true nor false",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel:4318", "OTEL_EXPORTER_OTLP_INSECURE", "yes"), bad: "OTEL_EXPORTER_OTLP_INSECURE"},
		{name: "an escaped slash in the path is sent as a slash, as the SDK sends it",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://otel:4318/a%2Fb"),
			want: Push{Instance: ledger, OTLP: otlpTo("http://otel:4318/a/b")}},
		{name: "a tab is a header value's own",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_EXPORTER_OTLP_HEADERS", "X-Note=a%09b"),
			want: Push{Instance: ledger, OTLP: at(otlpTo("http://otel:4318/v1/metrics"), func(o *OTLP) { o.Headers = map[string]string{"X-Note": "a\tb"} }),
				HeaderValues: []string{"a\tb", "a%09b"}}},
		{name: "a header value that decodes to a carriage return", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "Authorization=hunter2%0DX-Evil:%201"), bad: "OTEL_EXPORTER_OTLP_METRICS_HEADERS"},
		{name: "a header named twice in two cases", env: with(minimal(), "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=hunter2a,authorization=hunter2b"), bad: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "a timeout over an hour", env: with(minimal(), "OTEL_EXPORTER_OTLP_TIMEOUT", "3600001"), bad: "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{name: "a metrics TLS file", env: with(minimal(), "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE", "/etc/c.pem"), bad: "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE"},
		{name: "a resource attribute that is not UTF-8",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_RESOURCE_ATTRIBUTES", "team=%FF"), bad: "OTEL_RESOURCE_ATTRIBUTES"},
		{name: "resource attributes, URL-decoded",
			env:  with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, team = ci%20infra"),
			want: Push{Instance: ledger, OTLP: at(otlpTo("http://otel:4318/v1/metrics"), func(o *OTLP) { o.Resource = map[string]string{"deployment.environment": "prod", "team": "ci infra"} })}},
		{name: "resource attributes are not read without an export", env: with(minimal(), "OTEL_RESOURCE_ATTRIBUTES", "not-a-pair"),
			want: Push{Instance: ledger}},
		{name: "a resource attribute without a value",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_RESOURCE_ATTRIBUTES", "team=ci,not-a-pair"), bad: "OTEL_RESOURCE_ATTRIBUTES"},
		{name: "a resource attribute not URL-encoded",
			env: with(minimal(), "OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318", "OTEL_RESOURCE_ATTRIBUTES", "team=100%"), bad: "OTEL_RESOURCE_ATTRIBUTES"},
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
