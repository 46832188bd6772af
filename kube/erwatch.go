package kube

import (
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
// {"type","object"} event after another, decoded with the json.Decoder
// the pages use (readEphemeralRunnerWatch), each ADDED object into
// erObject and its view, as readItems decodes an item, and then dropped.
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
// the request at all within the timeout, ends the list here.
func (c *Client) streamEphemeralRunners(ctx context.Context, ns string, scopes *scopeKeys, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
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
		if ctx.Err() != nil || errors.Is(err, ErrTimeout) {
			return out[:start], err
		}
		return out[:start], noERWatchList(err)
	}
	defer body.Close()
	r := &bodyReader{r: body}
	out, err = readEphemeralRunnerWatch(r, scopes, out)
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

// readEphemeralRunnerWatch decodes a JSON watch-list of EphemeralRunners
// from r up to its initial-events-end bookmark and appends each ADDED
// object's view to out as soon as it is decoded, so that only one event's
// bytes are held at a time. What follows the bookmark is not read. Any
// error leaves in out what was appended before it, for the caller to
// drop.
//
// An event is {"type":...,"object":...}. The API server writes the type
// first, and the object is then decoded as it is read; an encoder that
// sorts its keys puts the object first, and it is then held, as raw JSON,
// until the type says what it is.
func readEphemeralRunnerWatch(r io.Reader, scopes *scopeKeys, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
	dec := json.NewDecoder(r)
	// One object for the whole stream, as in readItems.
	var o erWatchObject
	// event reads one event's object through decode, appends an ADDED
	// object's view to out, and says whether it was the end bookmark.
	event := func(typ string, decode func(any) error) (end bool, err error) {
		switch typ {
		case string(watch.Added):
			fins := o.Metadata.Finalizers[:0]
			o = erWatchObject{}
			o.Metadata.Finalizers = fins
			if err := decode(&o); err != nil && !fieldTypeError(err) {
				return false, fmt.Errorf("an ADDED event: %w", err)
			}
			if err := isEphemeralRunner(o.APIVersion, o.Kind); err != nil {
				return false, fmt.Errorf("an ADDED event: %w", err)
			}
			out = append(out, o.view(scopes))
			return false, nil
		case string(watch.Bookmark):
			var b erBookmark
			if err := decode(&b); err != nil {
				return false, fmt.Errorf("a BOOKMARK event: %w", err)
			}
			if err := isEphemeralRunner(b.APIVersion, b.Kind); err != nil {
				return false, fmt.Errorf("a BOOKMARK event: %w", err)
			}
			return b.Metadata.Annotations[metav1.InitialEventsAnnotationKey] == "true", nil
		case string(watch.Error):
			var st metav1.Status
			if err := decode(&st); err != nil {
				return false, fmt.Errorf("an ERROR event: %w", err)
			}
			if st.Kind != "Status" || (st.APIVersion != "v1" && st.APIVersion != "meta.k8s.io/v1") {
				return false, fmt.Errorf("an ERROR event: a %q %q where a v1 Status belongs", st.APIVersion, st.Kind)
			}
			return false, apierrors.FromObject(&st)
		default:
			// Before its end bookmark a watch-list sends only the
			// current objects, as ADDED events.
			return false, fmt.Errorf("a %s event before the initial-events-end bookmark", typ)
		}
	}
	var held json.RawMessage // an object that came before its type
	unmarshalHeld := func(v any) error { return json.Unmarshal(held, v) }
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out, errors.New("the stream ended before its initial-events-end bookmark")
		}
		if err != nil {
			return out, err
		}
		if tok != json.Delim('{') {
			return out, fmt.Errorf("the answer is not a stream of JSON watch events (%v)", tok)
		}
		var typ string
		object, isHeld := false, false
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return out, err
			}
			end := false
			switch {
			case key == "type" && typ == "":
				if err := dec.Decode(&typ); err != nil {
					return out, fmt.Errorf("a watch event's type: %w", err)
				}
				if typ == "" {
					return out, errors.New("a watch event of type \"\"")
				}
				if isHeld {
					end, err = event(typ, unmarshalHeld)
				}
			case key == "object" && !object:
				object = true
				if typ == "" {
					isHeld = true
					err = dec.Decode(&held)
				} else {
					end, err = event(typ, dec.Decode)
				}
			case key == "type" || key == "object":
				return out, fmt.Errorf("a watch event with two of its %s", key)
			default:
				err = dec.Decode(&skipValue{})
			}
			if err != nil || end {
				return out, err
			}
		}
		if typ == "" || !object {
			return out, errors.New("a watch event without a type and an object")
		}
		if _, err := dec.Token(); err != nil {
			return out, err
		}
	}
}

// erWatchObject is an ADDED event's object: what erObject reads, and the
// type that says it is an EphemeralRunner.
type erWatchObject struct {
	APIVersion looseString `json:"apiVersion"`
	Kind       looseString `json:"kind"`
	erObject
}

// erBookmark is a BOOKMARK event's object, of which only the annotation
// that ends the initial events matters.
type erBookmark struct {
	APIVersion looseString `json:"apiVersion"`
	Kind       looseString `json:"kind"`
	Metadata   struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// isEphemeralRunner refuses an object that does not say it is one of the
// EphemeralRunners asked for, as streamPods refuses an object that is not
// a v1 Pod: a watch-list of them holds nothing else, and the API server
// writes the type of every object it streams.
func isEphemeralRunner(apiVersion, kind looseString) error {
	if string(apiVersion) != fleet.EphemeralRunnerAPIVersion || string(kind) != fleet.EphemeralRunnerKind {
		return fmt.Errorf("a %q %q where a %s %s belongs", string(apiVersion), string(kind), fleet.EphemeralRunnerAPIVersion, fleet.EphemeralRunnerKind)
	}
	return nil
}
