package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The EphemeralRunners are read from their JSON with jsontext, token by
// token, rather than decoded into a struct by encoding/json. An
// EphemeralRunner is mostly a pod template and managed fields that its
// view never reads, and encoding/json's scanner ran twice over every one of
// those bytes (once to find the item's end, once to skip what no field
// wanted): at 100,000 runners, 0.9 GB of JSON and about 6 s of the sweep's
// CPU. jsontext validates the same bytes once, several times faster, and
// skips a value without building it.
//
// Each field is read as Unstructured's getters read it, which is what the
// dynamic client gave before: a field of the wrong type is zero and never
// fails the list, names match exactly, and of a name given twice in one
// object the last is the one read. The syntax is checked as strictly as
// encoding/json checked it, but for invalid UTF-8 in a string, which
// Unstructured read as U+FFFD and so does this.

// newERDecoder reads JSON from r as the API server's decoder would accept
// it: a name given twice is allowed (the last wins), and so is invalid
// UTF-8.
func newERDecoder(r io.Reader) *jsontext.Decoder {
	d := new(jsontext.Decoder)
	resetERDecoder(d, &boundedReader{r: r, d: d})
	return d
}

// maxERValue bounds the bytes the decoder holds at once: it holds a value
// it reads or skips whole, and etcd stores no object over 1.5 MiB, so a
// larger value is no EphemeralRunner. A server (or a proxy) that streams
// an endless string must not make the reaper buffer it until the kernel
// kills it without a report.
const maxERValue = 8 << 20

// boundedReader fails a read once the decoder holds more than maxERValue
// bytes it has not yet done with: those it was given (read) past the end
// of the last token or value it returned (InputOffset).
type boundedReader struct {
	r    io.Reader
	d    *jsontext.Decoder
	read int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	held := b.read - b.d.InputOffset()
	if held > maxERValue {
		return 0, fmt.Errorf("a JSON value of over %d bytes, more than any EphemeralRunner", maxERValue)
	}
	// No more at once than takes it past the bound: the decoder asks
	// for as much as its buffer, which doubles, has room for.
	if room := maxERValue - held + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

// resetERDecoder makes d read afresh from r, as newERDecoder's.
func resetERDecoder(d *jsontext.Decoder, r io.Reader) {
	d.Reset(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// erObject is what ListEphemeralRunners reads of an EphemeralRunner: the
// fields its view is made of, and the type that says what it is.
type erObject struct {
	APIVersion, Kind                     string
	Name, Namespace, UID                 string
	ResourceVersion                      string
	CreationTimestamp, DeletionTimestamp time.Time
	Finalizers                           []string
	GitHubConfigURL                      string
	Status                               erStatus
}

// erStatus is the part of an EphemeralRunner's status its view reads:
// ARC's phase and, once the listener recorded one, the job (see arcJob).
type erStatus struct {
	Phase, Reason, Message            string
	RunnerID, JobRequestID            int64
	JobRepositoryName, JobDisplayName string
	WorkflowRunID                     int64
	JobID                             string
}

// readER reads the object at d into o, which it clears first but for the
// finalizers' array, reused from one item to the next (the view never
// keeps it: see listMemo.sharedFinalizers).
// A null is an object with no fields, as Unstructured read it; any other
// value that is not an object fails.
func readER(d *jsontext.Decoder, o *erObject) error {
	*o = erObject{Finalizers: o.Finalizers[:0]}
	switch d.PeekKind() {
	case '{':
	case 'n':
		return skip(d)
	default:
		if err := skip(d); err != nil {
			return err
		}
		return errors.New("an EphemeralRunner that is not an object")
	}
	return members(d, func(name []byte) (err error) {
		switch string(name) {
		case "apiVersion":
			o.APIVersion, err = looseString(d)
		case "kind":
			o.Kind, err = looseString(d)
		case "metadata":
			o.Name, o.Namespace, o.UID, o.ResourceVersion = "", "", "", ""
			o.CreationTimestamp, o.DeletionTimestamp = time.Time{}, time.Time{}
			o.Finalizers = o.Finalizers[:0]
			err = members(d, func(name []byte) (err error) {
				switch string(name) {
				case "name":
					o.Name, err = looseString(d)
				case "namespace":
					o.Namespace, err = looseString(d)
				case "uid":
					o.UID, err = looseString(d)
				case "resourceVersion":
					o.ResourceVersion, err = looseString(d)
				case "creationTimestamp":
					o.CreationTimestamp, err = looseTime(d)
				case "deletionTimestamp":
					o.DeletionTimestamp, err = looseTime(d)
				case "finalizers":
					o.Finalizers, err = looseStrings(d, o.Finalizers[:0])
				default:
					err = skip(d)
				}
				return err
			})
		case "spec":
			o.GitHubConfigURL = ""
			err = members(d, func(name []byte) (err error) {
				if string(name) == "githubConfigUrl" {
					o.GitHubConfigURL, err = looseString(d)
					return err
				}
				return skip(d)
			})
		case "status":
			o.Status = erStatus{}
			err = members(d, func(name []byte) error { return readERStatus(d, name, &o.Status) })
		default:
			err = skip(d)
		}
		return err
	})
}

// readERStatus reads the status field name at d into s.
func readERStatus(d *jsontext.Decoder, name []byte, s *erStatus) (err error) {
	switch string(name) {
	case "phase":
		s.Phase, err = looseString(d)
	case "reason":
		s.Reason, err = looseString(d)
	case "message":
		s.Message, err = looseString(d)
	case "runnerId":
		s.RunnerID, err = looseInt(d)
	case "jobRequestId":
		s.JobRequestID, err = looseInt(d)
	case "jobRepositoryName":
		s.JobRepositoryName, err = looseString(d)
	case "workflowRunId":
		s.WorkflowRunID, err = looseInt(d)
	case "jobDisplayName":
		s.JobDisplayName, err = looseString(d)
	case "jobId":
		s.JobID, err = looseString(d)
	default:
		err = skip(d)
	}
	return err
}

// skip reads past the value at d. jsontext's SkipValue walks an object
// token by token; ReadValue's one pass over its bytes is several times
// faster, and the pod template it skips is most of an EphemeralRunner.
// The value is held whole meanwhile, as encoding/json held each item.
func skip(d *jsontext.Decoder) error {
	_, err := d.ReadValue()
	return err
}

// members calls f with the name of each member of the object at d, for f
// to read its value. A value that is not an object has no members, as
// Unstructured's getters find no field in it, and is skipped. f must read
// nothing before it has done with the name, which is only valid until the
// decoder's next read.
func members(d *jsontext.Decoder, f func(name []byte) error) error {
	if d.PeekKind() != '{' {
		return skip(d)
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	return membersAfterBrace(d, f)
}

// membersAfterBrace is members, the object's '{' already read.
func membersAfterBrace(d *jsontext.Decoder, f func(name []byte) error) error {
	for d.PeekKind() != '}' {
		raw, err := d.ReadValue()
		if err != nil {
			return err
		}
		if err := f(memberName(raw)); err != nil {
			return err
		}
	}
	_, err := d.ReadToken()
	return err
}

// memberName is the name a raw JSON string holds; without escapes, the
// raw bytes themselves, so that matching a name allocates nothing.
func memberName(raw jsontext.Value) []byte {
	if in := raw[1 : len(raw)-1]; bytes.IndexByte(in, '\\') < 0 {
		return in
	}
	return []byte(jsonString(raw))
}

// looseString reads a string of ARC's object as unstructured.NestedString
// reads it: "" when it is not a string.
func looseString(d *jsontext.Decoder) (string, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	return jsonString(raw), nil
}

// looseStrings reads a string list (the finalizers) into dst as
// unstructured.NestedStringSlice reads it: none when it is not an array
// of strings only.
func looseStrings(d *jsontext.Decoder, dst []string) ([]string, error) {
	if d.PeekKind() != '[' {
		return dst[:0], skip(d)
	}
	if _, err := d.ReadToken(); err != nil {
		return dst[:0], err
	}
	all := true
	for d.PeekKind() != ']' {
		raw, err := d.ReadValue()
		if err != nil {
			return dst[:0], err
		}
		if raw.Kind() != '"' {
			all = false
			continue
		}
		dst = append(dst, jsonString(raw))
	}
	if _, err := d.ReadToken(); err != nil {
		return dst[:0], err
	}
	if !all {
		return dst[:0], nil
	}
	return dst, nil
}

// looseInt reads an integer of ARC's status by nestedInt64's rule as it
// applied to Unstructured: apimachinery's JSON decoder made a number with
// no '.' that fits an int64 an int64 and any other number a float64, and
// nestedInt64 takes an int64, or a float64 that is a whole number (from a
// writer that sent 1.0). Anything else, a fraction, a string (even "7"),
// null or an object, is 0, and never an error: one runner's odd field must
// not fail the whole list.
func looseInt(d *jsontext.Decoder) (int64, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return 0, err
	}
	return jsonInt(raw), nil
}

// jsonInt is looseInt's rule over one whole, valid JSON value.
func jsonInt(b []byte) int64 {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return 0
	}
	s := string(b)
	if bytes.IndexByte(b, '.') < 0 {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == float64(int64(f)) {
		return int64(f)
	}
	return 0
}

// looseTime reads a metadata timestamp as Unstructured's getters read it:
// metav1.Time.UnmarshalQueryParameter over the string, zero when it is
// missing, null, not a string or not RFC 3339, and the zero time.Time when
// it is the zero time.
func looseTime(d *jsontext.Decoder) (time.Time, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return time.Time{}, err
	}
	var mt metav1.Time
	if mt.UnmarshalQueryParameter(jsonString(raw)) != nil || mt.IsZero() {
		return time.Time{}, nil //nolint:nilerr // an unreadable timestamp reads as none, as Unstructured's getters read it
	}
	return mt.Time, nil
}

// jsonString is the string the JSON value b holds, as encoding/json would
// decode it, or "" when b is not a string. b is one whole, valid value: the
// decoder checked it before handing it over.
func jsonString(b []byte) string {
	if len(b) < 2 || b[0] != '"' {
		return ""
	}
	if in := b[1 : len(b)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return ""
	}
	return s
}

// readEphemeralRunnerPage decodes one page of an EphemeralRunner list from
// r, appends each item's view to out as soon as the item is read, and
// returns the page's continue token, so that only a little of the page's
// bytes is held at a time. It takes what the dynamic client took: a JSON
// object of kind EphemeralRunnerList, whose items (none when missing or
// null) are objects. Anything else, a syntax error or a failed read fails
// the page.
func readEphemeralRunnerPage(r io.Reader, memo *listMemo, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
	d := newERDecoder(r)
	tok, err := d.ReadToken()
	if err == io.EOF { //nolint:errorlint // io.EOF itself is how the decoder says its input ended, as Read does; a wrapped one is an error
		return out, "", errors.New("an empty answer, not a list")
	} else if err != nil {
		return out, "", err
	} else if tok.Kind() != '{' {
		return out, "", fmt.Errorf("the answer is not a list object (%v)", tok)
	}
	start := len(out)
	var kind, cont string
	var o erObject
	err = membersAfterBrace(d, func(name []byte) (err error) {
		switch string(name) {
		case "kind":
			raw, err := d.ReadValue()
			if err == nil && raw.Kind() != '"' && raw.Kind() != 'n' {
				err = fmt.Errorf("the list's kind is a %v, not a string", raw.Kind())
			}
			kind = jsonString(raw)
			return err
		case "metadata":
			// A metadata of the wrong type has no continue token,
			// as it had none for Unstructured's GetContinue.
			cont = ""
			err = members(d, func(name []byte) (err error) {
				if string(name) == "continue" {
					cont, err = looseString(d)
					return err
				}
				return skip(d)
			})
		case "items":
			// A second items replaces the first, as the last of two
			// keys did in Unstructured's map.
			out, err = readItems(d, &o, memo, out[:start])
		default:
			if bytes.EqualFold(name, []byte("kind")) || bytes.EqualFold(name, []byte("apiVersion")) {
				// The dynamic client's serializer read the list's type
				// with encoding/json, whose names match in any case,
				// and refused a page whose type was not a string.
				what := string(name)
				raw, err := d.ReadValue()
				if err == nil && raw.Kind() != '"' && raw.Kind() != 'n' {
					err = fmt.Errorf("the list's %s is a %v, not a string", what, raw.Kind())
				}
				return err
			}
			err = skip(d)
		}
		return err
	})
	if err != nil {
		return out, "", err
	}
	// Read to the end, for the connection's sake too: a body closed
	// before its end cannot be reused.
	if tok, err := d.ReadToken(); err != io.EOF { //nolint:errorlint // io.EOF itself is how the decoder says its input ended, as Read does; a wrapped one is an error
		if err == nil {
			err = fmt.Errorf("data after the list (%v)", tok)
		}
		return out, "", err
	}
	// An EphemeralRunnerList and nothing else: a proxy's or a webhook's
	// object with a kind and no items would read as a complete, empty
	// list, and every pod's runner as podless.
	if kind != "EphemeralRunnerList" {
		return out, "", fmt.Errorf("the answer is a %q, not an EphemeralRunnerList", kind)
	}
	return out, cont, nil
}

// readItems reads a list's items, the decoder being at their value, and
// appends their views to out. o is the one object every item is read into.
func readItems(d *jsontext.Decoder, o *erObject, memo *listMemo, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
	switch d.PeekKind() {
	case 'n':
		return out, skip(d)
	case '[':
	default:
		raw, err := d.ReadValue()
		if err != nil {
			return out, err
		}
		return out, fmt.Errorf("items is not an array (%v)", raw.Kind())
	}
	if _, err := d.ReadToken(); err != nil {
		return out, err
	}
	for d.PeekKind() != ']' {
		if err := readER(d, o); err != nil {
			return out, err
		}
		out = append(out, o.view(memo))
	}
	_, err := d.ReadToken()
	return out, err
}
