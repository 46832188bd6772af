package config

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/docgen"
)

// The configuration reference, docs/configuration.md, is made here from
// the spec, so that it cannot drift from what the binary reads: each
// variable's name from its field (key), its default and example from the
// field's tags, its description from the field's comment in spec.go. The
// OpenTelemetry SDK's variables, which the spec does not declare, are
// described by otelVariables below, and checked against the names
// readOTLP asks for.

// variable is one documented variable.
type variable struct {
	// names are the variable's names: one for a REAPER_ variable, the
	// general and the metrics-specific one for most of the SDK's.
	names []string
	// dflt is what an unset variable means, in Markdown: a value in
	// backquotes, or words; "" for nothing at all.
	dflt string
	// example is a value that is right, as the error messages give it.
	example string
	// desc is the description, in Markdown, paragraphs apart.
	desc []string
}

// specComments reads spec.go's fields' comments, in order: each field's
// name and its comment's paragraphs, lines joined.
func specComments(t *testing.T) (fields []string, comments [][]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "spec.go", nil, parser.ParseComments)
	require.NoError(t, err)
	var st *ast.StructType
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "spec" {
			st, _ = ts.Type.(*ast.StructType)
		}
		return st == nil
	})
	require.NotNil(t, st, "spec.go declares the struct spec")
	for _, field := range st.Fields.List {
		var paras []string
		for _, p := range strings.Split(strings.TrimSpace(field.Doc.Text()), "\n\n") {
			if p = strings.Join(strings.Fields(p), " "); p != "" {
				paras = append(paras, p)
			}
		}
		for _, name := range field.Names {
			fields, comments = append(fields, name.Name), append(comments, paras)
		}
	}
	return fields, comments
}

// specVariables are the REAPER_ variables, in the spec's order.
func specVariables(t *testing.T) []variable {
	t.Helper()
	fields, comments := specComments(t)
	st := reflect.TypeOf(spec{})
	require.Equal(t, st.NumField(), len(fields), "spec.go's fields are spec's")
	var vars []variable
	for i := range st.NumField() {
		f := st.Field(i)
		require.Equal(t, f.Name, fields[i], "spec.go's field %d", i)
		v := variable{names: []string{key(f.Name)}, example: f.Tag.Get("example"), desc: comments[i]}
		if n := len(v.desc); n > 0 && strings.HasPrefix(v.desc[n-1], "Default:") {
			v.dflt = strings.TrimSpace(strings.TrimPrefix(v.desc[n-1], "Default:"))
			v.desc = v.desc[:n-1]
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			assert.Empty(t, v.dflt, "%s has a default tag and a Default paragraph in its comment: keep one", v.names[0])
			v.dflt = "`" + d + "`"
		}
		assert.NotEmpty(t, v.desc, "%s has no description: write it in the comment above the field %s in internal/config/spec.go", v.names[0], f.Name)
		assert.NotEmpty(t, v.example, "%s has no example tag", v.names[0])
		vars = append(vars, v)
	}
	return vars
}

// otelVariables are the OpenTelemetry SDK's variables that the OTLP export
// reads (readOTLP), the general name first.
func otelVariables() []variable {
	pair := func(setting string) []string {
		return []string{"OTEL_EXPORTER_OTLP_" + setting, "OTEL_EXPORTER_OTLP_METRICS_" + setting}
	}
	return []variable{
		{names: pair("ENDPOINT")[:1], dflt: "off", example: "http://otel-collector.monitoring:4318",
			desc: []string{"Export each sweep's metrics over OTLP/HTTP (protobuf) to this endpoint, with `/v1/metrics` joined on; `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` replaces it. An http(s) URL with no `user:password@`, query or fragment."}},
		{names: pair("ENDPOINT")[1:], dflt: "off", example: "http://otel-collector.monitoring:4318/v1/metrics",
			desc: []string{"Export each sweep's metrics over OTLP/HTTP (protobuf) to this endpoint as it is (its root when it has no path). An http(s) URL with no `user:password@`, query or fragment."}},
		{names: pair("HEADERS"), example: "Authorization=Bearer%20TOKEN,X-Scope-OrgID=fleet",
			desc: []string{"The export's extra headers: `KEY=VALUE` pairs separated by commas, each value URL-decoded; a name given twice (in any case) is refused. Their values are secrets, kept out of every line the reaper writes."}},
		{names: pair("TIMEOUT"), dflt: "`10000`", example: "10000",
			desc: []string{"Bounds the export, in milliseconds, 0 to 3600000; the push's own budget of 3 s is the shorter."}},
		{names: pair("COMPRESSION"), dflt: "`none`", example: "gzip",
			desc: []string{"`gzip` or `none`."}},
		{names: pair("PROTOCOL"), dflt: "`http/protobuf`", example: "http/protobuf",
			desc: []string{"`http/protobuf`, the only protocol the export speaks; any other value exits 2."}},
		{names: pair("INSECURE"), example: "false",
			desc: []string{"`true` or `false`, and only in agreement with the endpoint's scheme (`true` for `http`): the export takes the scheme from the endpoint, where the SDK would take this over it."}},
		{names: append(append(pair("CERTIFICATE"), pair("CLIENT_CERTIFICATE")...), pair("CLIENT_KEY")...),
			desc: []string{"Refused (exit 2): the export trusts the system's roots (add a CA with `SSL_CERT_FILE`) and sends no client certificate."}},
		{names: []string{"OTEL_RESOURCE_ATTRIBUTES"}, example: "deployment.environment=production,k8s.cluster.name=eu-west",
			desc: []string{"The export's resource attributes: `KEY=VALUE` pairs separated by commas, each value URL-decoded, UTF-8. `service.name` (`runner-reaper`) and `service.instance.id` (the push's instance) are the reaper's own and replace any given here."}},
	}
}

// md is Markdown written in a raw string: ^ stands for the backquote.
func md(s string) string { return strings.ReplaceAll(s, "^", "`") }

var configurationIntro = md(`Every variable starts with ^REAPER_^; an unknown ^REAPER_^ variable (a typo)
is refused. Unprefixed names are never read. Durations are Go durations
(^90s^, ^5m^, ^1h^). Every bad value fails at start-up with the variable's
name, what is wrong and an example, exit status 2, before anything is listed;
the problems come in a fixed order, so the same environment always gives
the same message. A value that cannot be parsed at all (^REAPER_MAX_ACTIONS=ten^)
is reported alone; fix it and the others follow. Besides the rules below:
every duration must be positive, ^REAPER_MAX_ACTIONS^ and
^REAPER_MASS_SUSPICION_MIN^ at least 1, ^REAPER_MASS_SUSPICION_FRACTION^
above 0 and at most 1, ^REAPER_KUBE_CONCURRENCY^ 1 to 64;
^REAPER_ARC_REMOVE_FINALIZERS^ needs ^REAPER_ARC_LEAKS^, which needs a selector
that matches ^actions-ephemeral-runner=True^; ^REAPER_EKS_CLUSTER^,
^REAPER_METRICS_NAMESPACE^ (not ^AWS/...^) and ^REAPER_GITHUB_SECRET_ARN^
follow AWS's own rules.

Kubernetes access: with ^REAPER_EKS_CLUSTER^, EKS from outside; else
in-cluster inside a pod; else ^KUBECONFIG^ or ^~/.kube/config^.
`)

var otelIntro = md(`Each sweep's metrics are exported over OTLP/HTTP when an endpoint is set,
configured by the OpenTelemetry SDK's own variables, read as the SDK's
exporter reads them: a metrics-specific variable replaces the general one,
and a value is set when it is not blank. A bad one stops the start (exit
2), as a bad ^REAPER_^ variable does, and the message never quotes a
header's value.
`)

// configurationReference is docs/configuration.md: the REAPER_ variables
// indexed, then each in a section of its own; the SDK's in a table.
func configurationReference(reaper, otel []variable) []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated by `make docs` from internal/config: spec.go (each field's comment and tags)\n")
	b.WriteString("     and reference_test.go. Edit those, not this file. -->\n\n")
	b.WriteString("# Configuration\n\n")
	b.WriteString(md("runner-reaper reads its configuration from the environment: the\n^REAPER_^ variables, and the OpenTelemetry SDK's for the OTLP export.\n\n"))
	b.WriteString(configurationIntro)
	b.WriteString("\n| variable | default |\n| --- | --- |\n")
	for _, v := range reaper {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", v.names[0], strings.ToLower(v.names[0]), cell(orNone(v.dflt)))
	}
	b.WriteString("| `OTEL_*` | see [OpenTelemetry's variables](#opentelemetrys-variables) |\n")
	b.WriteString("\n## The `REAPER_` variables\n")
	for _, v := range reaper {
		fmt.Fprintf(&b, "\n### `%s`\n\n", v.names[0])
		for _, p := range v.desc {
			b.WriteString(wrap(p) + "\n\n")
		}
		fmt.Fprintf(&b, "- Default: %s\n- Example: `%s=%s`\n", orNone(v.dflt), v.names[0], v.example)
	}
	b.WriteString("\n## OpenTelemetry's variables\n\n")
	b.WriteString(otelIntro)
	b.WriteString("\n| variable | default | example | meaning |\n| --- | --- | --- | --- |\n")
	for _, v := range otel {
		names := make([]string, len(v.names))
		for i, n := range v.names {
			names[i] = "`" + n + "`"
		}
		example := ""
		if v.example != "" {
			example = "`" + v.example + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(names, ", "), cell(orNone(v.dflt)), cell(example), cell(strings.Join(v.desc, " ")))
	}
	return b.Bytes()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// wrap breaks a paragraph into lines of at most 76 characters where it
// can (Markdown reads a line break inside a code span as a space).
func wrap(p string) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(p) {
		switch {
		case i == 0:
		case n+1+len(w) > 76:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// cell is a table cell's text: a | would end the cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// The reference is what spec.go and the OTLP export's variables say.
func TestConfigurationReference(t *testing.T) {
	docgen.Check(t, "docs/configuration.md", "internal/config (spec.go and reference_test.go)",
		configurationReference(specVariables(t), otelVariables()))
}

// The SDK's variables the reference describes are the ones readOTLP reads:
// every one it asks for, with no endpoint set and with one, is described,
// and nothing else is.
func TestReferenceDescribesEveryOTLPVariable(t *testing.T) {
	asked := map[string]bool{}
	for _, env := range []map[string]string{{}, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}} {
		readOTLP(func(name string) string { asked[name] = true; return env[name] }, func(string, string, string) {})
	}
	var read, described []string
	for name := range asked {
		read = append(read, name)
	}
	for _, v := range otelVariables() {
		described = append(described, v.names...)
	}
	sort.Strings(read)
	sort.Strings(described)
	assert.Equal(t, read, described)
}
