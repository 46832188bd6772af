package config

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strings"
)

// specSource is spec.go itself: its fields' comments are the variables'
// descriptions, for `runner-reaper help` as for docs/configuration.md, so
// that the binary describes what it reads in the words the reference uses,
// and neither can drift from the struct envconfig reads.
//
//go:embed spec.go
var specSource []byte

// Variable is one environment variable the configuration reads, as the
// reference and the CLI's help describe it.
type Variable struct {
	// Names are its names: one for a REAPER_ variable; the general and the
	// metrics-specific one for most of the OpenTelemetry SDK's.
	Names []string
	// Default is what leaving it unset means, in Markdown: a value in
	// backquotes, or words; "" for nothing at all.
	Default string
	// Example is a value that is right, as the error messages give it.
	Example string
	// Description is what it does, in Markdown, paragraphs apart.
	Description []string
	// Group numbers the variables that belong together: spec.go keeps
	// them a blank line apart from the next group, and the SDK's come
	// last, in a group of their own.
	Group int
}

// KubernetesAccess says how the reaper reaches the cluster, in Markdown:
// the variables outside the REAPER_ prefix that choose it.
const KubernetesAccess = "Kubernetes access: with `REAPER_EKS_CLUSTER`, EKS from outside; else\n" +
	"in-cluster inside a pod; else `KUBECONFIG` or `~/.kube/config`."

// Variables are every variable Load reads: the REAPER_ ones in spec.go's
// order, then the OpenTelemetry SDK's that the OTLP export reads.
func Variables() ([]Variable, error) {
	vars, err := reaperVariables()
	if err != nil {
		return nil, err
	}
	last := 0
	if len(vars) > 0 {
		last = vars[len(vars)-1].Group
	}
	for _, v := range otelVariables() {
		v.Group = last + 1
		vars = append(vars, v)
	}
	return vars, nil
}

// reaperVariables are the REAPER_ variables, in spec's order: each name
// from its field (key), default and example from the field's tags, the
// description from the field's comment in spec.go, whose last paragraph
// "Default: ..." says what unset means where no default tag gives a value.
func reaperVariables() ([]Variable, error) {
	fields, err := specFields(specSource)
	if err != nil {
		return nil, err
	}
	st := reflect.TypeOf(spec{})
	if st.NumField() != len(fields) {
		return nil, fmt.Errorf("spec.go declares %d fields, spec has %d", len(fields), st.NumField())
	}
	vars := make([]Variable, 0, len(fields))
	for i, sf := range fields {
		f := st.Field(i)
		if f.Name != sf.name {
			return nil, fmt.Errorf("spec.go's field %d is %s, spec's is %s", i, sf.name, f.Name)
		}
		v := Variable{Names: []string{key(f.Name)}, Example: f.Tag.Get("example"), Description: sf.doc, Group: sf.group}
		if n := len(v.Description); n > 0 && strings.HasPrefix(v.Description[n-1], "Default:") {
			v.Default = strings.TrimSpace(strings.TrimPrefix(v.Description[n-1], "Default:"))
			v.Description = v.Description[:n-1]
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			if v.Default != "" {
				return nil, fmt.Errorf("%s has a default tag and a Default paragraph in its comment: keep one", v.Names[0])
			}
			v.Default = "`" + d + "`"
		}
		vars = append(vars, v)
	}
	return vars, nil
}

// specField is one field of spec as spec.go declares it.
type specField struct {
	name string
	// doc is its comment's paragraphs, each one line.
	doc   []string
	group int
}

// specFields reads the fields of the struct spec in src (spec.go) in
// order, with their comments, and numbers their groups from 1: a blank
// line before a field's comment starts a new group.
func specFields(src []byte) ([]specField, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "spec.go", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("read spec.go: %w", err)
	}
	var st *ast.StructType
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "spec" {
			st, _ = ts.Type.(*ast.StructType)
		}
		return st == nil
	})
	if st == nil {
		return nil, fmt.Errorf("spec.go declares no struct spec")
	}
	var fields []specField
	group, prevEnd := 0, 0
	for _, field := range st.Fields.List {
		start := field.Pos()
		if field.Doc != nil {
			start = field.Doc.Pos()
		}
		if line := fset.Position(start).Line; group == 0 || line > prevEnd+1 {
			group++
		}
		prevEnd = fset.Position(field.End()).Line
		var paras []string
		for _, p := range strings.Split(strings.TrimSpace(field.Doc.Text()), "\n\n") {
			if p = strings.Join(strings.Fields(p), " "); p != "" {
				paras = append(paras, p)
			}
		}
		for _, name := range field.Names {
			fields = append(fields, specField{name: name.Name, doc: paras, group: group})
		}
	}
	return fields, nil
}

// Summary is the variable's description's first sentence, as plain text.
func (v Variable) Summary() string {
	if len(v.Description) == 0 {
		return ""
	}
	return Plain(firstSentence(v.Description[0]))
}

// firstSentence ends at the first full stop followed by a space, outside a
// code span and outside parentheses.
func firstSentence(p string) string {
	code, depth := false, 0
	for i, r := range p {
		switch {
		case r == '`':
			code = !code
		case code:
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case r == '.' && depth == 0 && (i+1 == len(p) || p[i+1] == ' '):
			return p[:i+1]
		}
	}
	return p
}

// mdLink is a Markdown link, whose text alone is kept in plain text.
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Plain is Markdown as plain text for a terminal: links become their
// text, code spans lose their backquotes, and line breaks are spaces.
func Plain(md string) string {
	s := mdLink.ReplaceAllString(md, "$1")
	s = strings.ReplaceAll(s, "`", "")
	return strings.Join(strings.Fields(s), " ")
}
