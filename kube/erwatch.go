package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// streamEphemeralRunners reads one namespace's EphemeralRunners (all
// namespaces' for "") as a watch-list, on streamPods' contract: one watch
// request with sendInitialEvents and resourceVersionMatch=NotOlderThan and
// no resourceVersion, a consistent read that the API server answers from
// its watch cache once that cache has caught up with etcd. A consistent
// page is read from etcd instead, each custom resource in it decoded and
// encoded again: over 10,000 EphemeralRunners in 10 namespaces, a sweep
// whose own CPU was 0.9 s took 8 s, waiting on 40 such pages, and at
// 100,000 the pages alone would outlast the sweep's 45 s deadline.
//
// Custom resources have no protobuf form, so the stream is JSON: one
// {"type","object"} event after another, read as the pages are
// (readEphemeralRunnerWatch), each ADDED object into erObject and its
// view, as readItems reads an item, and then dropped.
// Newlines between events are not relied on.
//
// The stream counts as complete only at the bookmark annotated
// k8s.io/initial-events-end. Anything else before it (an ERROR event, a
// change event, an object that is not an EphemeralRunner, a body that is
// not a stream of JSON watch events, the stream closing or stalling past
// the timeout) discards what arrived and returns errNoWatchList, so that
// a server that does not keep the contract costs a list in pages, never a
// partial one. A refusal, a Forbidden included, is errNoWatchList too:
// the pages then ask again, and give the error that fails the list, if
// any (a Role from before the watch right lists in pages, one refused
// request later). Only a cancelled sweep, or a server that did not answer
// the request at all (within the timeout, or at all: unanswered), ends the
// list here.
func (c *Client) streamEphemeralRunners(ctx context.Context, ns string, memo *listMemo, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
	start := len(out)
	path, err := ephemeralRunnersPath(ns)
	if err != nil {
		return out, err
	}
	send := true
	opts := metav1.ListOptions{
		SendInitialEvents:    &send,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		Watch:                true,
		// As in streamPods: the server ends the watch no later than the
		// client gives up on it, so that a plain watch (a proxy that
		// drops sendInitialEvents) ends cleanly and the pages are read.
		TimeoutSeconds: ptr.To(max(1, int64(math.Floor(c.timeout.Seconds())))),
	}
	body, err := c.arc.Get().AbsPath(path...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, schema.GroupVersion{Version: "v1"}).
		SetHeader("Accept", "application/json").
		Stream(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrTimeout) || unanswered(err) {
			return out[:start], err
		}
		return out[:start], noERWatchList(err)
	}
	defer func() { _ = body.Close() }() // read to its end or given up on: nothing to report
	r := &bodyReader{r: body}
	out, err = readEphemeralRunnerWatch(r, memo, out)
	if err != nil {
		if ctx.Err() != nil {
			return out[:start], ctx.Err()
		}
		if r.err != nil {
			// Why the stream broke (ErrTimeout, a dropped
			// connection), as ephemeralRunnerPage says it.
			err = r.err
		}
		return out[:start], noERWatchList(err)
	}
	return out, nil
}

// noERWatchList wraps err so that it is errNoWatchList, on which the
// caller reads pages, in words that name the EphemeralRunners' stream:
// errNoWatchList's own name the pods'.
func noERWatchList(err error) error { return &erWatchListError{err: err} }

// erWatchListError is an EphemeralRunner watch-list that was unavailable,
// and why.
type erWatchListError struct{ err error }

func (e *erWatchListError) Error() string {
	return "ephemeralrunner watch-list unavailable: " + e.err.Error()
}

func (e *erWatchListError) Unwrap() []error { return []error{errNoWatchList, e.err} }

// readEphemeralRunnerWatch reads a JSON watch-list of EphemeralRunners
// from r up to its initial-events-end bookmark and appends each ADDED
// object's view to out as soon as it is read, so that only a little of
// the stream is held at a time. What follows the bookmark is not read. Any
// error leaves in out what was appended before it, for the caller to
// drop. The events are read by watchEvents.
func readEphemeralRunnerWatch(r io.Reader, memo *listMemo, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
	events := newWatchEvents(r)
	// One object for the whole stream, as in readItems.
	var o erObject
	for {
		end := false
		err := events.next(func(typ string, od *jsontext.Decoder) error {
			switch typ {
			case string(watch.Added):
				if err := readWatchedER(od, &o); err != nil {
					return fmt.Errorf("an ADDED event: %w", err)
				}
				out = append(out, o.view(memo))
				return nil
			case string(watch.Bookmark):
				var err error
				if _, end, err = readBookmark(od); err != nil {
					return fmt.Errorf("a BOOKMARK event: %w", err)
				}
				return nil
			case string(watch.Error):
				st, err := readStatus(od)
				if err != nil {
					return fmt.Errorf("an ERROR event: %w", err)
				}
				return apierrors.FromObject(st)
			default:
				// Before its end bookmark a watch-list sends only the
				// current objects, as ADDED events.
				return fmt.Errorf("a %s event before the initial-events-end bookmark", typ)
			}
		})
		if err == io.EOF { //nolint:errorlint // io.EOF itself is how next says the stream ended between events
			return out, errors.New("the stream ended before its initial-events-end bookmark")
		}
		if err != nil {
			return out, err
		}
		if end {
			return out, nil
		}
	}
}

// watchEvents reads a JSON watch stream one event at a time. An event is
// {"type":...,"object":...}. The API server writes the type first, and
// the object is then read from the stream; an encoder that sorts its keys
// puts the object first, and it is then held, as raw JSON, until the type
// says what it is.
type watchEvents struct {
	d    *jsontext.Decoder
	held []byte            // an object that came before its type
	hd   *jsontext.Decoder // reads held
}

func newWatchEvents(r io.Reader) *watchEvents {
	return &watchEvents{d: newERDecoder(r), hd: new(jsontext.Decoder)}
}

// next reads the next event and calls event once with its type (never "")
// and a decoder at its object, for event to read the object whole. It
// returns io.EOF itself when the stream ended between two events, event's
// error, or why the stream is not one of watch events.
func (w *watchEvents) next(event func(typ string, od *jsontext.Decoder) error) error {
	d := w.d
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("the answer is not a stream of JSON watch events (%v)", tok)
	}
	var typ string
	typed, object, isHeld := false, false, false
	err = membersAfterBrace(d, func(name []byte) (err error) {
		switch string(name) {
		case "type":
			if typed {
				return errors.New("a watch event with two of its type")
			}
			typed = true
			raw, err := d.ReadValue()
			if err != nil {
				return fmt.Errorf("a watch event's type: %w", err)
			}
			if raw.Kind() != '"' && raw.Kind() != 'n' {
				return fmt.Errorf("a watch event's type is a %v, not a string", raw.Kind())
			}
			if typ = jsonString(raw); typ == "" {
				return errors.New("a watch event of type \"\"")
			}
			if isHeld {
				resetERDecoder(w.hd, bytes.NewReader(w.held))
				return event(typ, w.hd)
			}
			return nil
		case "object":
			if object {
				return errors.New("a watch event with two of its object")
			}
			object = true
			if typ == "" {
				raw, err := d.ReadValue()
				w.held, isHeld = append(w.held[:0], raw...), true
				return err
			}
			return event(typ, d)
		default:
			return skip(d)
		}
	})
	if err != nil {
		return err
	}
	if typ == "" || !object {
		return errors.New("a watch event without a type and an object")
	}
	return nil
}

// readWatchedER reads a watch event's object into o, as readER, and
// refuses one that is not an EphemeralRunner.
func readWatchedER(d *jsontext.Decoder, o *erObject) error {
	if err := readER(d, o); err != nil {
		return err
	}
	return isEphemeralRunner(o.APIVersion, o.Kind)
}

// readStatus reads an ERROR event's object: a v1 Status, and nothing else.
func readStatus(d *jsontext.Decoder) (*metav1.Status, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	var st metav1.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	if st.Kind != "Status" || (st.APIVersion != "v1" && st.APIVersion != "meta.k8s.io/v1") {
		return nil, fmt.Errorf("a %q %q where a v1 Status belongs", st.APIVersion, st.Kind)
	}
	return &st, nil
}

// readBookmark reads a BOOKMARK event's object, of which only its
// resourceVersion and the annotation that ends the initial events matter,
// and says whether it has that annotation. It must say it is one of the
// EphemeralRunners asked for.
func readBookmark(d *jsontext.Decoder) (rv string, end bool, err error) {
	var apiVersion, kind string
	if d.PeekKind() != '{' {
		return "", false, fmt.Errorf("a %v, not an object", d.PeekKind())
	}
	err = members(d, func(name []byte) (err error) {
		switch string(name) {
		case "apiVersion":
			apiVersion, err = looseString(d)
		case "kind":
			kind, err = looseString(d)
		case "metadata":
			rv, end = "", false
			return members(d, func(name []byte) (err error) {
				if string(name) == "resourceVersion" {
					rv, err = looseString(d)
					return err
				}
				if string(name) != "annotations" {
					return skip(d)
				}
				// As GetAnnotations reads them: a map of strings
				// only, else none.
				end = false
				strs := true
				err = members(d, func(name []byte) error {
					isEnd := string(name) == metav1.InitialEventsAnnotationKey
					raw, err := d.ReadValue()
					if err != nil {
						return err
					}
					if raw.Kind() != '"' {
						strs = false
					} else if isEnd {
						end = jsonString(raw) == "true"
					}
					return nil
				})
				end = end && strs
				return err
			})
		default:
			err = skip(d)
		}
		return err
	})
	if err != nil {
		return "", false, err
	}
	if err := isEphemeralRunner(apiVersion, kind); err != nil {
		return "", false, err
	}
	return rv, end, nil
}

// isEphemeralRunner refuses an object that does not say it is one of the
// EphemeralRunners asked for, as streamPods refuses an object that is not
// a v1 Pod: a watch-list of them holds nothing else, and the API server
// writes the type of every object it streams.
func isEphemeralRunner(apiVersion, kind string) error {
	if apiVersion != fleet.EphemeralRunnerAPIVersion || kind != fleet.EphemeralRunnerKind {
		return fmt.Errorf("a %q %q where a %s %s belongs", apiVersion, kind, fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind)
	}
	return nil
}
