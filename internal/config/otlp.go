package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// OTLP is where and how a sweep's metrics are exported over OTLP/HTTP,
// read from the OpenTelemetry SDK's OTEL_EXPORTER_OTLP_* variables as the
// SDK's own exporter reads them: a metrics-specific variable replaces the
// general one, and a value is set when it is not blank.
type OTLP struct {
	// URL is the metrics endpoint: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as
	// it is (its root when it has no path), or OTEL_EXPORTER_OTLP_ENDPOINT
	// with /v1/metrics joined on.
	URL string
	// Headers are the request's extra headers. Secrets: their values are
	// in Push.HeaderValues too, for the log to redact.
	Headers map[string]string
	// Timeout bounds the export (OTEL_EXPORTER_OTLP_TIMEOUT, in
	// milliseconds; the SDK's default 10 s); 0 means no bound of its own.
	Timeout time.Duration
	// Gzip is OTEL_EXPORTER_OTLP_COMPRESSION=gzip.
	Gzip bool
	// Resource are OTEL_RESOURCE_ATTRIBUTES' attributes, their values
	// URL-decoded.
	Resource map[string]string
}

// otlpDefaultTimeout is the SDK's OTEL_EXPORTER_OTLP_TIMEOUT default.
const otlpDefaultTimeout = 10 * time.Second

// otlpVar is the metrics-specific variable of an OTEL_EXPORTER_OTLP_
// setting where it is set, else the general one: its name and its value,
// trimmed; "" for neither.
func otlpVar(getenv func(string) string, setting string) (name, value string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_METRICS_" + setting, "OTEL_EXPORTER_OTLP_" + setting} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return name, v
		}
	}
	return "", ""
}

// readOTLP reads the export's settings, nil when no endpoint is set, and
// the values of every header variable for the log to redact. The SDK would
// log a bad variable (a header's value and all) and export without it, or
// nowhere: here it stops the start, as a bad REAPER_ variable does, and the
// message never quotes a header's value, which is likely a credential.
func readOTLP(getenv func(string) string, otel func(name, what, example string)) (*OTLP, []string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(name)); v != "" && v != "http/protobuf" {
			otel(name, fmt.Sprintf("%q is not supported: runner-reaper exports OTLP over HTTP only", v), "http/protobuf")
		}
	}
	var secrets []string
	headers := map[string]map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"} {
		h, values, why := otlpHeaders(getenv(name))
		if why != "" {
			otel(name, why, "Authorization=Bearer%20TOKEN,X-Scope-OrgID=fleet")
		}
		headers[name], secrets = h, append(secrets, values...)
	}
	// The export's client is the reaper's own (it follows no redirect and
	// bounds what it reads), and trusts the system's roots: the SDK's TLS
	// file variables are refused rather than ignored.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_KEY",
		"OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY"} {
		if strings.TrimSpace(getenv(name)) != "" {
			otel(name, "is not supported: the export trusts the system's roots (add a CA with SSL_CERT_FILE) and sends no client certificate", "SSL_CERT_FILE=/etc/ssl/certs/internal-ca.pem")
		}
	}
	o := &OTLP{Timeout: otlpDefaultTimeout}
	if name, v := otlpVar(getenv, "TIMEOUT"); name != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > int64(time.Hour/time.Millisecond) {
			otel(name, fmt.Sprintf("%q is not a whole number of milliseconds from 0 to 3600000", v), "10000")
		}
		o.Timeout = time.Duration(min(max(ms, 0), int64(time.Hour/time.Millisecond))) * time.Millisecond
	}
	if name, v := otlpVar(getenv, "COMPRESSION"); name != "" {
		switch v {
		case "gzip":
			o.Gzip = true
		case "none":
		default:
			otel(name, fmt.Sprintf("%q is not a compression the export knows: gzip or none", v), "gzip")
		}
	}
	name, endpoint := otlpVar(getenv, "ENDPOINT")
	for _, n := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			if why := pushURLProblem(v); why != "" {
				otel(n, why, "http://otel-collector.monitoring:4318")
			}
		}
	}
	if name == "" {
		return nil, secrets
	}
	u, err := url.Parse(endpoint)
	if err != nil || pushURLProblem(endpoint) != "" {
		return nil, secrets // refused above
	}
	if name == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" {
		// The SDK uses a signal's own endpoint as it is, but for an
		// empty path, which is the root.
		if u.Path == "" {
			u.Path = "/"
		}
	} else {
		u.Path = path.Join(u.Path, "/v1/metrics")
	}
	// The SDK builds its URL from the decoded path, so an escaped slash
	// (%2F) is sent as a slash: so here.
	u.RawPath = ""
	o.URL = u.String()
	if iname, v := otlpVar(getenv, "INSECURE"); iname != "" {
		// The SDK takes INSECURE over the endpoint's scheme: true sends
		// plain http (an Authorization in the clear) to an https URL,
		// anything else https to an http one. Only agreement is taken.
		switch insecure := strings.ToLower(v); {
		case insecure != "true" && insecure != "false":
			otel(iname, fmt.Sprintf("%q is neither true nor false", v), "false")
		case (insecure == "true") != (u.Scheme == "http"):
			otel(iname, fmt.Sprintf("is %s but %s is %s: the SDK would send to it over %s; the export takes the scheme from the endpoint, and this must agree with it or be unset",
				insecure, name, u.Scheme, map[bool]string{true: "plain http", false: "https"}[insecure == "true"]), strconv.FormatBool(u.Scheme == "http"))
		}
	}
	o.Headers = headers["OTEL_EXPORTER_OTLP_HEADERS"]
	if mh := headers["OTEL_EXPORTER_OTLP_METRICS_HEADERS"]; strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS")) != "" {
		o.Headers = mh
	}
	res, why := resourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if why != "" {
		otel("OTEL_RESOURCE_ATTRIBUTES", why, "deployment.environment=production,k8s.cluster.name=eu-west")
	}
	o.Resource = res
	return o, secrets
}

// otlpHeaders reads the SDK's header list, KEY=VALUE pairs separated by
// commas, each value URL-decoded and trimmed: the headers, and every value
// as written and as decoded, for the log to redact.
func otlpHeaders(v string) (map[string]string, []string, string) {
	if strings.TrimSpace(v) == "" {
		return nil, nil, ""
	}
	headers, seen := map[string]string{}, map[string]bool{}
	var values []string
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) }) {
			return nil, nil, fmt.Sprintf("pair %d is not KEY=VALUE with a header name as KEY", i+1)
		}
		// Names are case-blind: two spellings of one would be sent as
		// whichever the map gave last.
		if seen[http.CanonicalHeaderKey(k)] {
			return nil, nil, fmt.Sprintf("pair %d names %s again", i+1, k)
		}
		seen[http.CanonicalHeaderKey(k)] = true
		un, err := url.PathUnescape(val)
		if err != nil {
			return nil, nil, fmt.Sprintf("the value of pair %d (%s) is not URL-encoded", i+1, k)
		}
		un = strings.TrimSpace(un)
		if strings.ContainsFunc(un, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			return nil, nil, fmt.Sprintf("the value of pair %d (%s) decodes to a control character, which no header may carry", i+1, k)
		}
		headers[k] = un
		values = append(values, un, strings.TrimSpace(val))
	}
	return headers, values, ""
}

// resourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: KEY=VALUE pairs
// separated by commas, each value URL-decoded.
func resourceAttributes(v string) (map[string]string, string) {
	if strings.TrimSpace(v) == "" {
		return nil, ""
	}
	attrs := map[string]string{}
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Sprintf("pair %d is not KEY=VALUE", i+1)
		}
		un, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Sprintf("the value of pair %d (%s) is not URL-encoded", i+1, k)
		}
		// Protobuf strings are UTF-8: anything else would fail every
		// export, not the start.
		if !utf8.ValidString(k) || !utf8.ValidString(un) {
			return nil, fmt.Sprintf("pair %d is not UTF-8 once decoded", i+1)
		}
		attrs[k] = un
	}
	return attrs, ""
}

// otelVariables are the OpenTelemetry SDK's variables that the OTLP export
// reads (readOTLP), the general name first, as the reference and the
// CLI's help describe them.
func otelVariables() []Variable {
	pair := func(setting string) []string {
		return []string{"OTEL_EXPORTER_OTLP_" + setting, "OTEL_EXPORTER_OTLP_METRICS_" + setting}
	}
	return []Variable{
		{Names: pair("ENDPOINT")[:1], Default: "off", Example: "http://otel-collector.monitoring:4318",
			Description: []string{"Export each sweep's metrics over OTLP/HTTP (protobuf) to this endpoint, with `/v1/metrics` joined on; `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` replaces it. An http(s) URL with no `user:password@`, query or fragment."}},
		{Names: pair("ENDPOINT")[1:], Default: "off", Example: "http://otel-collector.monitoring:4318/v1/metrics",
			Description: []string{"Export each sweep's metrics over OTLP/HTTP (protobuf) to this endpoint as it is (its root when it has no path). An http(s) URL with no `user:password@`, query or fragment."}},
		{Names: pair("HEADERS"), Example: "Authorization=Bearer%20TOKEN,X-Scope-OrgID=fleet",
			Description: []string{"The export's extra headers: `KEY=VALUE` pairs separated by commas, each value URL-decoded; a name given twice (in any case) is refused. Their values are secrets, kept out of every line the reaper writes."}},
		{Names: pair("TIMEOUT"), Default: "`10000`", Example: "10000",
			Description: []string{"Bounds the export, in milliseconds, 0 to 3600000; the push's own budget of 3 s is the shorter."}},
		{Names: pair("COMPRESSION"), Default: "`none`", Example: "gzip",
			Description: []string{"`gzip` or `none`."}},
		{Names: pair("PROTOCOL"), Default: "`http/protobuf`", Example: "http/protobuf",
			Description: []string{"`http/protobuf`, the only protocol the export speaks; any other value exits 2."}},
		{Names: pair("INSECURE"), Example: "false",
			Description: []string{"`true` or `false`, and only in agreement with the endpoint's scheme (`true` for `http`): the export takes the scheme from the endpoint, where the SDK would take this over it."}},
		{Names: append(append(pair("CERTIFICATE"), pair("CLIENT_CERTIFICATE")...), pair("CLIENT_KEY")...),
			Description: []string{"Refused (exit 2): the export trusts the system's roots (add a CA with `SSL_CERT_FILE`) and sends no client certificate."}},
		{Names: []string{"OTEL_RESOURCE_ATTRIBUTES"}, Example: "deployment.environment=production,k8s.cluster.name=eu-west",
			Description: []string{"The export's resource attributes: `KEY=VALUE` pairs separated by commas, each value URL-decoded, UTF-8. `service.name` (`runner-reaper`) and `service.instance.id` (the push's instance) are the reaper's own and replace any given here."}},
	}
}
