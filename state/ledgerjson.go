package state

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// The ledger's JSON keys, as Ledger's field tags spell them. WriteLedger
// and ReadLedger write and read these fields one by one, so a field added
// to Ledger must be added to both (TestLedgerJSONCoversEveryField fails
// until it is).
const (
	marksField     = "marks"
	listsField     = "lists"
	nextScopeField = "next_scope"
	streaksField   = "streaks"
	historyField   = "history"
	loopsField     = "loops"
)

// WriteLedger writes l as the JSON object json.Marshal makes of it (the
// same fields, omitted when empty as the tags say, map keys sorted), laid
// out for a person: indented as json.MarshalIndent indents it with two
// spaces, but each scope's list cache and each record of an action on one
// line of its own, which reads better than the thousands of lines they
// are indented (and is half the bytes). indent is the indentation of the
// line the object starts on.
//
// It writes as it goes. json.MarshalIndent built the whole document
// twice, once compact and once indented, before any of it was written,
// and a save comes at the end of the sweep, when the sweep holds the
// most: at 100,000 registrations in 1,000 scopes, a file of 15 MB. Here
// the largest piece built at once is one scope's cache, and the file is
// 6.6 MB.
func WriteLedger(w io.Writer, l Ledger, indent string) error {
	inner := indent + "  "
	fields := 0
	field := func(name string) error {
		sep := ",\n"
		if fields == 0 {
			sep = "{\n"
		}
		fields++
		_, err := fmt.Fprintf(w, "%s%s%q: ", sep, inner, name)
		return err
	}
	// marks has no omitempty: a nil map is null, as json.Marshal writes it.
	if err := field(marksField); err != nil {
		return err
	}
	if err := writeEntries(w, l.Marks, inner, true); err != nil {
		return err
	}
	if len(l.Lists) > 0 {
		if err := field(listsField); err != nil {
			return err
		}
		if err := writeEntries(w, l.Lists, inner, false); err != nil {
			return err
		}
	}
	if l.NextScope != "" {
		if err := field(nextScopeField); err != nil {
			return err
		}
		if err := json.NewEncoder(lineless{w}).Encode(l.NextScope); err != nil {
			return err
		}
	}
	if err := field(streaksField); err != nil {
		return err
	}
	b, err := json.MarshalIndent(l.Streaks, inner, "  ")
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if len(l.History) > 0 {
		if err := field(historyField); err != nil {
			return err
		}
		if err := writeRecords(w, l.History, inner); err != nil {
			return err
		}
	}
	if len(l.Loops) > 0 {
		// A group a line: at most a few dozen entries each.
		if err := field(loopsField); err != nil {
			return err
		}
		if err := writeEntries(w, l.Loops, inner, false); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "\n%s}", indent)
	return err
}

// writeRecords writes h as a JSON array, a record a line, its lines
// indented under indent.
func writeRecords(w io.Writer, h []Record, indent string) error {
	for i, r := range h {
		sep := ",\n"
		if i == 0 {
			sep = "[\n"
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s%s  %s", sep, indent, b); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s]", indent)
	return err
}

// writeEntries writes m as a JSON object, its keys sorted as json.Marshal
// sorts them, each key and value through an encoder of its own so that no
// more than one entry is ever built at once. With indent "" it writes what
// json.Encoder writes, less the newline; otherwise an entry a line, the
// object's lines indented under indent, each value compact or, with
// indentValues, indented as json.MarshalIndent indents it. A nil map is
// null.
func writeEntries[V any](w io.Writer, m map[string]V, indent string, indentValues bool) error {
	if m == nil {
		_, err := io.WriteString(w, "null")
		return err
	}
	enc := json.NewEncoder(lineless{w})
	if indent != "" && indentValues {
		enc.SetIndent(indent+"  ", "  ")
	}
	sep, colon, end := ",", ":", "}"
	first := "{"
	if indent != "" {
		sep, colon = ",\n"+indent+"  ", ": "
		first = "{\n" + indent + "  "
		end = "\n" + indent + "}"
	}
	if len(m) == 0 {
		_, err := io.WriteString(w, "{}")
		return err
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		s := sep
		if i == 0 {
			s = first
		}
		if _, err := io.WriteString(w, s); err != nil {
			return err
		}
		if err := enc.Encode(k); err != nil {
			return err
		}
		if _, err := io.WriteString(w, colon); err != nil {
			return err
		}
		if err := enc.Encode(m[k]); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, end)
	return err
}

// ReadLedger reads from dec the ledger object that WriteLedger or
// json.Marshal wrote, strictly: a field Ledger does not have is refused
// as a decoder that disallows unknown fields refuses one, and dec should
// disallow them too, for the fields of the values within. Keys match
// fields, and repeated keys merge, as encoding/json matches and merges
// them.
//
// It reads as it goes: a json.Decoder holds a whole value in its buffer
// before decoding any of it, so the marks and the list caches, the bulk of
// a large ledger, are read an entry at a time. With keep false nothing is
// kept: each entry is checked and let go of before the next is read, for a
// caller that only needs to know the ledger is whole, and the ledger
// returned is empty. found is false when the value is JSON null, which is
// no ledger.
func ReadLedger(dec *json.Decoder, keep bool) (l Ledger, found bool, err error) {
	isNull, err := OpenObject(dec, "ledger")
	if err != nil || isNull {
		return Ledger{}, false, err
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return Ledger{}, true, err
		}
		switch {
		case strings.EqualFold(key, marksField):
			err = readEntries(dec, &l.Marks, keep, "mark")
		case strings.EqualFold(key, listsField):
			err = readEntries(dec, &l.Lists, keep, "list cache")
		case strings.EqualFold(key, nextScopeField):
			err = dec.Decode(&l.NextScope)
		case strings.EqualFold(key, streaksField):
			err = dec.Decode(&l.Streaks)
		case strings.EqualFold(key, historyField):
			// A thousand records at most: read whole. Decoded into the
			// field itself, a key given twice replaces, as encoding/json
			// replaces a slice.
			err = dec.Decode(&l.History)
		case strings.EqualFold(key, loopsField):
			err = readEntries(dec, &l.Loops, keep, "reap-loop group")
		default:
			err = fmt.Errorf("json: unknown field %q", key)
		}
		if err != nil {
			return Ledger{}, true, err
		}
	}
	if err := closeObject(dec); err != nil {
		return Ledger{}, true, err
	}
	if !keep {
		return Ledger{}, true, nil
	}
	return l, true, nil
}

// readEntries reads an object of values into *m an entry at a time, or
// with keep false only checks them. As encoding/json decodes into a map,
// null makes *m nil, a map already there is added to, and an entry given
// twice is the last one.
func readEntries[V any](dec *json.Decoder, m *map[string]V, keep bool, what string) error {
	isNull, err := OpenObject(dec, what+"s")
	if err != nil || isNull {
		if keep && isNull {
			*m = nil
		}
		return err
	}
	if keep && *m == nil {
		*m = map[string]V{}
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		var v V
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("%s %q: %w", what, key, err)
		}
		if keep {
			(*m)[key] = v
		}
	}
	return closeObject(dec)
}

// OpenObject reads the start of an object, or null, from dec. An error
// names what the object was to be, and what came instead as encoding/json
// names it. The file ledger opens its envelope with it too.
func OpenObject(dec *json.Decoder, what string) (isNull bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		return false, nil
	case nil:
		return true, nil
	}
	return false, fmt.Errorf("json: cannot unmarshal %s into the %s object", jsonKind(tok), what)
}

// objectKey reads the key of an object's next member.
func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("json: object key is %v, not a string", tok)
	}
	return key, nil
}

// closeObject reads the end of an object whose members were all read.
func closeObject(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('}') {
		return fmt.Errorf("json: expected the end of an object, found %v", tok)
	}
	return nil
}

// jsonKind names the kind of a token, as encoding/json's errors do.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('[') {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return "value"
}
