package state_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

// ledgers are the shapes WriteLedger and ReadLedger must agree with
// encoding/json on: every field empty, nil and present, and keys that
// encoding/json escapes.
func ledgers() map[string]state.Ledger {
	html := Lists(1, 2)
	html[`org:<a&b>`] = html["org:scope-0"]
	return map[string]state.Ledger{
		"zero":             {},
		"empty maps":       {Marks: map[string]fleet.Mark{}, Lists: map[string]state.ListCache{}},
		"marks only":       {Marks: Marks(3)},
		"sample":           Sample(),
		"escaped keys":     {Marks: map[string]fleet.Mark{"pod/<x>&": {Verdict: fleet.Zombie}}, Lists: html},
		"every field":      {Marks: Marks(2), Lists: Lists(3, 4), NextScope: "org:scope-1", Streaks: state.Streaks{Skips: map[string]int{"org:scope-2": 3}, Bound: 2}, History: History(3)},
		"history only":     {History: []state.Record{Record(1), {Verdict: "ghost", Evidence: "<a&b>\u2028\n", At: Epoch}}},
		"a nil page":       {Marks: Marks(1), Lists: map[string]state.ListCache{"org:a": {}, "org:b": {Pages: []state.CachedPage{{}}, Label: "team"}}},
		"next scope alone": {NextScope: `org:"quoted"`},
	}
}

// TestWriteLedgerIsMarshalsJSON: what WriteLedger writes is, but for its
// layout, exactly what json.Marshal makes of the ledger, and it is laid
// out as json.MarshalIndent lays it out, but for the list caches, which
// stand a scope a line, and the records of actions, a record a line.
func TestWriteLedgerIsMarshalsJSON(t *testing.T) {
	for name, l := range ledgers() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, state.WriteLedger(&buf, l, "  "))
			want, err := json.Marshal(l)
			require.NoError(t, err)
			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, buf.Bytes()), "%s", buf.String())
			assert.Equal(t, string(want), compact.String())

			rest := l
			rest.Lists, rest.History = nil, nil
			indented, err := json.MarshalIndent(rest, "  ", "  ")
			require.NoError(t, err)
			if len(l.Lists) == 0 && len(l.History) == 0 {
				assert.Equal(t, string(indented), buf.String(), "laid out as MarshalIndent lays it out")
				return
			}
			lines := strings.Split(string(indented), "\n")
			for _, line := range lines[:len(lines)-1] {
				// A field MarshalIndent wrote last may have the
				// history after it.
				line = strings.TrimSuffix(line, ",")
				ok := strings.Contains(buf.String(), line+"\n") || strings.Contains(buf.String(), line+",\n")
				assert.True(t, ok, "every line of the rest is MarshalIndent's: %q in\n%s", line, buf.String())
			}
			assert.True(t, strings.HasSuffix(buf.String(), "\n"+lines[len(lines)-1]), "and so is its end")
			for k, c := range l.Lists {
				kb, err := json.Marshal(k)
				require.NoError(t, err)
				cb, err := json.Marshal(c)
				require.NoError(t, err)
				assert.Contains(t, buf.String(), "\n      "+string(kb)+": "+string(cb), "a scope's cache on a line")
			}
			for i, r := range l.History {
				rb, err := json.Marshal(r)
				require.NoError(t, err)
				end := ",\n"
				if i == len(l.History)-1 {
					end = "\n    ]"
				}
				assert.Contains(t, buf.String(), "\n      "+string(rb)+end, "a record on a line")
			}
		})
	}
}

// TestReadLedgerReadsWhatJSONWrites: ReadLedger gives back the ledger from
// WriteLedger's layout and from json.Marshal's, and with keep false
// nothing of it.
func TestReadLedgerReadsWhatJSONWrites(t *testing.T) {
	for name, l := range ledgers() {
		t.Run(name, func(t *testing.T) {
			var written bytes.Buffer
			require.NoError(t, state.WriteLedger(&written, l, ""))
			marshalled, err := json.Marshal(l)
			require.NoError(t, err)
			var want state.Ledger
			require.NoError(t, json.Unmarshal(marshalled, &want))
			for _, in := range [][]byte{written.Bytes(), marshalled} {
				got, found, err := state.ReadLedger(strictDecoder(in), true)
				require.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, want, got)

				got, found, err = state.ReadLedger(strictDecoder(in), false)
				require.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, state.Ledger{}, got, "checked, not kept")
			}
		})
	}
}

// TestReadLedgerIsStrict: ReadLedger refuses what a strict json.Decoder
// refuses, reads what it reads, and decodes the same values.
func TestReadLedgerIsStrict(t *testing.T) {
	cases := []struct {
		name, in string
		err      string // "" when it reads
	}{
		{"null", `null`, ""},
		{"keys in another case", `{"MARKS":{},"Lists":{"org:a":{"trimmed":[]}},"Next_Scope":"org:a"}`, ""},
		{"a null list cache", `{"marks":{},"lists":null}`, ""},
		{"a null history", `{"marks":{},"history":null}`, ""},
		{"a history twice is replaced", `{"history":[{"verdict":"zombie"},{"verdict":"terminal"}],"History":[{"verdict":"ghost"}]}`, ""},
		{"an unknown field in a record", `{"history":[{"verdict":"zombie","colour":"red"}]}`, `unknown field "colour"`},
		{"an unknown field in a record's job", `{"history":[{"verdict":"zombie","job":{"repository":"a/b","sha":"x"}}]}`, `unknown field "sha"`},
		{"a history of another shape", `{"history":{"verdict":"zombie"}}`, "cannot unmarshal object"},
		{"a key twice is replaced", `{"lists":{"org:a":{"label":"x"},"org:a":{"trimmed":[]}}}`, ""},
		{"a mark twice is replaced", `{"marks":{"pod/a":{"verdict":"zombie","scope":"org:a"},"pod/a":{"verdict":"ghost"}}}`, ""},
		{"fields twice merge", `{"marks":{"pod/a":{"verdict":"zombie"}},"lists":{"org:a":{}},"marks":{"pod/b":{"verdict":"ghost"}},"lists":{"org:b":{}}}`, ""},
		{"null marks after marks", `{"marks":{"pod/a":{"verdict":"zombie"}},"marks":null}`, ""},
		{"an unknown field in a mark", `{"marks":{"pod/a":{"verdict":"zombie","color":"red"}}}`, `unknown field "color"`},
		{"a mark of another shape", `{"marks":{"pod/a":[]}}`, "cannot unmarshal array"},
		{"an unknown field", `{"marks":{},"notes":1}`, `unknown field "notes"`},
		{"an unknown field in a cache", `{"lists":{"org:a":{"trimmed":[],"pages":[]}}}`, `unknown field "pages"`},
		{"an unknown field in a registration", `{"lists":{"org:a":{"trimmed":[{"runners":[{"i":1,"x":2}]}]}}}`, `unknown field "x"`},
		{"lists of another shape", `{"lists":[1]}`, "cannot unmarshal array"},
		{"a cache of another shape", `{"lists":{"org:a":7}}`, "cannot unmarshal number"},
		{"an array", `[]`, "cannot unmarshal array"},
		{"a string", `"ledger"`, "cannot unmarshal string"},
		{"cut short", `{"marks":{},"lists":{"org:a":{"trimmed":[]}`, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := state.ReadLedger(strictDecoder([]byte(c.in)), true)
			var want state.Ledger
			dec := strictDecoder([]byte(c.in))
			wantErr := dec.Decode(&want)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				assert.Error(t, wantErr, "encoding/json refuses it too")
				return
			}
			require.NoError(t, err)
			require.NoError(t, wantErr)
			assert.Equal(t, want, got)
		})
	}
}

// TestLedgerJSONCoversEveryField: WriteLedger and ReadLedger name Ledger's
// fields one by one; a field added to Ledger must be added to them, or
// it would be lost by the file ledger at every save.
func TestLedgerJSONCoversEveryField(t *testing.T) {
	var names []string
	typ := reflect.TypeFor[state.Ledger]()
	for i := range typ.NumField() {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		names = append(names, tag)
	}
	assert.Equal(t, []string{"marks", "lists", "next_scope", "streaks", "history", "loops"}, names,
		"Ledger's fields changed: WriteLedger and ReadLedger must write and read the new ones")
}

func strictDecoder(b []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec
}
