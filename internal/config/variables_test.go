package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/state"
)

// The record's description gives the floor of records kept before any
// list cache as a number: the number state keeps.
func TestHistorySizeNamesTheRecordFloor(t *testing.T) {
	vars, err := Variables()
	require.NoError(t, err)
	for _, v := range vars {
		if v.Names[0] == "REAPER_HISTORY_SIZE" {
			assert.Contains(t, strings.Join(v.Description, " "), fmt.Sprintf("the newest %d go first", state.RecordFloor))
			return
		}
	}
	t.Fatal("no REAPER_HISTORY_SIZE")
}

// Variables is everything Load can read and nothing else: the variable of
// every field of spec (envconfig reads no other REAPER_ name, and refuses
// any other), and every name readOTLP asks for, with an endpoint set and
// without. A field added to spec is in the list without another word.
func TestVariablesAreWhatLoadReads(t *testing.T) {
	var want []string
	st := reflect.TypeOf(spec{})
	for i := range st.NumField() {
		want = append(want, key(st.Field(i).Name))
	}
	asked := map[string]bool{}
	for _, env := range []map[string]string{{}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}} {
		readOTLP(func(name string) string { asked[name] = true; return env[name] }, func(string, string, string) {})
	}
	for name := range asked {
		want = append(want, name)
	}

	vars, err := Variables()
	require.NoError(t, err)
	var got []string
	group := 1
	for _, v := range vars {
		got = append(got, v.Names...)
		assert.NotEmpty(t, v.Summary(), "%s has a summary", v.Names[0])
		assert.GreaterOrEqual(t, v.Group, group, "%s: groups come in order", v.Names[0])
		group = v.Group
	}
	assert.ElementsMatch(t, want, got)
	assert.Equal(t, "REAPER_SCOPES", vars[0].Names[0], "spec's order")
	assert.Equal(t, 1, vars[0].Group)
}

// A blank line before a field's comment starts a group; a field's
// comment, however long, does not; its paragraphs are kept apart.
func TestSpecFieldsGroupsAtBlankLines(t *testing.T) {
	src := `package config

type spec struct {
	// A is first.
	//
	// Its second paragraph.
	A string
	// B goes with A,
	// on two lines.
	B, C int

	// D starts a group.
	D bool
	E bool

	F bool
}
`
	fields, err := specFields([]byte(src))
	require.NoError(t, err)
	type row struct {
		name  string
		doc   []string
		group int
	}
	var got []row
	for _, f := range fields {
		got = append(got, row(f))
	}
	assert.Equal(t, []row{
		{"A", []string{"A is first.", "Its second paragraph."}, 1},
		{"B", []string{"B goes with A, on two lines."}, 1},
		{"C", []string{"B goes with A, on two lines."}, 1},
		{"D", []string{"D starts a group."}, 2},
		{"E", nil, 2},
		{"F", nil, 3},
	}, got)

	_, err = specFields([]byte("package config\n\ntype other struct{ A int }\n"))
	assert.ErrorContains(t, err, "no struct spec")
}

// A summary is the description's first sentence as a terminal shows it.
func TestSummaryIsTheFirstSentenceInPlainText(t *testing.T) {
	cases := map[string]struct{ desc, want string }{
		"one sentence":                {"Most actions per sweep.", "Most actions per sweep."},
		"stops at the first":          {"How long a stamp may stand. Longer is refused.", "How long a stamp may stand."},
		"a full stop in code":         {"Names follow `a.b`, `.` and `..`. More.", "Names follow a.b, . and ... "},
		"a full stop in parentheses":  {"A share (NaN. and infinities are refused). Then.", "A share (NaN. and infinities are refused)."},
		"a link keeps its text":       {"Exits 3 ([safety rule 12](design.md#safety-rules)). Then.", "Exits 3 (safety rule 12)."},
		"no full stop":                {"`gzip` or `none`", "gzip or none"},
		"a decimal point is no stop":  {"About 0.5 s a page. Then.", "About 0.5 s a page."},
		"a stop at the end of a span": {"From `a:b`. Then.", "From a:b."},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Variable{Description: []string{c.desc}}.Summary()
			assert.Equal(t, strings.TrimSpace(c.want), got)
		})
	}
	assert.Empty(t, Variable{}.Summary())
}
