package kube

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The reflector's watch of the EphemeralRunners is read as the CronJob's
// watch-list is (watchEvents, readER), not through the dynamic client:
// decoding each runner into Unstructured's maps and reading the view from
// them cost about eight times the CPU of reading the view straight from
// its JSON, which at a large fleet's churn was more than the long-running
// mode's whole budget. The decoder hands the reflector each runner as its
// item, the view already made, which the store's transform keeps as it is.

// erMemo is the memo a feed's views share (scope keys, finalizer lists),
// used from the reflector's goroutine (lists, through erKind) and from a
// watch's decoder, and from a stopped watch's decoder still reading its
// last event: hence the lock.
type erMemo struct {
	mu   sync.Mutex
	memo *listMemo
}

func newERMemo(githubHost string) *erMemo {
	return &erMemo{memo: newListMemo(githubHost, nil)}
}

// view is o's view, as ListEphemeralRunners makes it.
func (m *erMemo) view(o *erObject) fleet.EphemeralRunner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return o.view(m.memo)
}

// erWatchDecoder is a watch.Decoder of a JSON watch stream of
// EphemeralRunners, for watch.NewStreamWatcher: ADDED, MODIFIED and
// DELETED give the runner's *erItem, BOOKMARK its resourceVersion and the
// annotation that ends a watch-list's initial events (all the reflector
// reads of it), ERROR the *metav1.Status, so that the reflector sees a
// 410 Gone as expired and lists again. Anything else, an object that is
// not an EphemeralRunner or a stream that is not JSON watch events, is an
// error, on which the StreamWatcher ends the watch with an ERROR event.
type erWatchDecoder struct {
	body   io.Closer
	r      *bodyReader
	events *watchEvents
	memo   *erMemo
	o      erObject // every event's object is read into it
}

func newERWatchDecoder(body io.ReadCloser, memo *erMemo) *erWatchDecoder {
	r := &bodyReader{r: body}
	return &erWatchDecoder{body: body, r: r, events: newWatchEvents(r), memo: memo}
}

// Decode reads the next event. It returns io.EOF itself when the stream
// ended between two events, and io.ErrUnexpectedEOF itself when it ended
// within one, for the StreamWatcher to take as it takes client-go's own
// decoder's; a failed read, the error the body's read gave.
func (d *erWatchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var typ watch.EventType
	var obj runtime.Object
	err := d.events.next(func(t string, od *jsontext.Decoder) error {
		typ = watch.EventType(t)
		switch typ {
		case watch.Added, watch.Modified, watch.Deleted:
			if err := readWatchedER(od, &d.o); err != nil {
				return fmt.Errorf("a %s event: %w", typ, err)
			}
			obj = &erItem{d.memo.view(&d.o)}
		case watch.Bookmark:
			rv, end, err := readBookmark(od)
			if err != nil {
				return fmt.Errorf("a BOOKMARK event: %w", err)
			}
			obj = bookmarkObject(rv, end)
		case watch.Error:
			st, err := readStatus(od)
			if err != nil {
				return fmt.Errorf("an ERROR event: %w", err)
			}
			obj = st
		default:
			return fmt.Errorf("a watch event of type %q", t)
		}
		return nil
	})
	switch {
	case err == nil:
		return typ, obj, nil
	case err == io.EOF: //nolint:errorlint // io.EOF itself is how next says the stream ended between events
		return "", nil, io.EOF
	case d.r.err != nil:
		return "", nil, d.r.err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "", nil, io.ErrUnexpectedEOF
	}
	return "", nil, err
}

// Close closes the body, which ends a Decode waiting on it.
func (d *erWatchDecoder) Close() { _ = d.body.Close() } // the watch is over: nothing to report

// bookmarkObject is what the reflector reads of a bookmark: its
// resourceVersion, and whether it ends a watch-list's initial events.
func bookmarkObject(rv string, end bool) *metav1.PartialObjectMetadata {
	b := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv},
	}
	if end {
		b.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return b
}
