package kube

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// defaultWatchTimeout is a watch's timeoutSeconds when the reflector sets
// none (it always does, between five and ten minutes).
const defaultWatchTimeout = 5 * time.Minute

type (
	listFunc  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
)

// trackedListWatch is the reflector's ListerWatcher over list and watch,
// telling the feed each list and watch it asks for, and how each ends.
//
// A watch must outlast the Client's timeout, which bounds every other
// request from dialling to its answer's last byte: cut at it, a watch would
// break every 30 seconds, and the reflector takes a broken watch for an
// error it relists after. Nor may its timeoutSeconds be set below the
// Client's timeout: the watch-list that fills the store streams the whole
// fleet, which at 100,000 runners takes longer. So a watch keeps the
// reflector's timeoutSeconds (five to ten minutes, spread so that a fleet
// of reapers does not re-watch at once), at which the API server ends it
// cleanly and the reflector watches again from its resourceVersion; the
// Client bounds its answer's headers by its timeout, as any request's, and
// its body by timeoutSeconds and one timeout more, which only a server or
// proxy that did not end it cuts. A stream that carries nothing in between
// is ended sooner, after StaleAfter (see trackedWatch).
func trackedListWatch[V any](f *feed[V], timeout time.Duration, list listFunc, watchFn watchFunc) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			gen := f.current()
			if opts.Continue == "" {
				gen = f.listing()
			}
			obj, err := list(ctx, opts)
			if err != nil {
				f.failed(gen, fmt.Sprintf("list: %v", err))
				return nil, err
			}
			f.answered(gen)
			return obj, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.TimeoutSeconds == nil || *opts.TimeoutSeconds <= 0 {
				seconds := int64(defaultWatchTimeout / time.Second)
				opts.TimeoutSeconds = &seconds
			}
			lasts := time.Duration(*opts.TimeoutSeconds) * time.Second
			_, clk := f.stale()
			tail := &streamTail{clock: clk}
			ctx = withStreamTail(withStreamBound(ctx, lasts+timeout), tail)
			initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			gen := f.watching(initial)
			w, err := watchFn(ctx, opts)
			if err != nil {
				f.failed(gen, fmt.Sprintf("watch: %v", err))
				return nil, err
			}
			// A watch-list's store stays relisting until it lands; a watch
			// resumed from a resourceVersion is open only once something
			// came on it (see feed.accepted).
			if initial {
				f.opened(gen)
			} else {
				f.accepted(gen)
			}
			return track(w, f, gen, tail, lasts), nil
		},
	}
}

// watchEnds is what a trackedWatch tells its feed.
type watchEnds interface {
	heard(gen uint64)
	failed(gen uint64, why string)
	expired(gen uint64)
	vouch(gen uint64)
	stale() (time.Duration, clock.Clock)
}

// trackedWatch passes a watch's events on to the reflector, and tells the
// feed of each (progress) and of the watch's end, before the reflector
// sees it: the stream closing, an ERROR event, or the reflector stopping
// it. A watch on which nothing came for StaleAfter, not even a bookmark,
// is stopped, so that the reflector watches again from its resourceVersion
// instead of waiting on a dead stream until its timeout.
type trackedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
	gen   uint64
	feed  watchEnds
	// tail is how the stream ended, and lasts its timeoutSeconds: see
	// expiredOnTime.
	tail  *streamTail
	lasts time.Duration
}

func track(w watch.Interface, f watchEnds, gen uint64, tail *streamTail, lasts time.Duration) *trackedWatch {
	t := &trackedWatch{inner: w, out: make(chan watch.Event), stop: make(chan struct{}), gen: gen, feed: f, tail: tail, lasts: lasts}
	// The silence is counted from the watch's opening, not from when its
	// goroutine first runs.
	after, clk := f.stale()
	go t.pump(clk.NewTimer(after), after, clk.NewTimer(firstWord))
	return t
}

func (t *trackedWatch) ResultChan() <-chan watch.Event { return t.out }

func (t *trackedWatch) Stop() {
	t.once.Do(func() {
		t.feed.failed(t.gen, "the watch was stopped")
		close(t.stop)
		t.inner.Stop()
	})
}

// pump also tells the feed once the watch has run firstWord without an
// error or an end (see feed.vouch).
func (t *trackedWatch) pump(idle clock.Timer, after time.Duration, first clock.Timer) {
	defer close(t.out)
	defer idle.Stop()
	defer first.Stop()
	in := t.inner.ResultChan()
	firstC := first.C()
	for {
		select {
		case <-firstC:
			t.feed.vouch(t.gen)
			firstC = nil
		case ev, ok := <-in:
			if !ok {
				if t.expiredOnTime() {
					t.feed.expired(t.gen)
				} else {
					t.feed.failed(t.gen, "the stream ended")
				}
				return
			}
			if ev.Type == watch.Error {
				t.feed.failed(t.gen, "an ERROR event: "+apierrors.FromObject(ev.Object).Error())
			} else {
				t.feed.heard(t.gen)
			}
			select {
			case t.out <- ev:
			case <-t.stop:
				return
			}
			// The time the reflector took over the event is not the
			// stream's silence.
			rearm(idle, after)
		case <-idle.C():
			t.feed.failed(t.gen, fmt.Sprintf("no event or bookmark for %s: watching again", after))
			t.inner.Stop()
		case <-t.stop:
			return
		}
	}
}

// expiredOnTime says whether the stream ended as the API server ends a
// watch at its timeoutSeconds: its body ended cleanly, and no sooner than
// timeoutSeconds after the request was sent (the server's timer starts
// once it has the request, after the dial and any queueing there, so a
// clean end within that much of the due time is taken for it too).
// Anything else, a connection reset or closed, a GOAWAY, a clean end
// before then (a server shutting down, or dropping a watcher too slow to
// keep up), is a cut.
func (t *trackedWatch) expiredOnTime() bool {
	sent, ended, clean := t.tail.endedCleanly()
	return clean && !sent.IsZero() && !ended.Before(sent.Add(t.lasts))
}

// rearm makes t fire d from now, and not before.
func rearm(t clock.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C():
	default:
	}
	t.Reset(d)
}

// The requests, through the Client's own clients.

// podLister lists pods as ListPods' pages do: protobuf, trimmed to what
// View reads.
func (c *Client) podLister(ns, selector string) listFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		opts.LabelSelector = selector
		list, err := c.cs.listPods(ctx, ns, opts)
		if err != nil {
			return nil, err
		}
		return list, nil
	}
}

// podWatcher watches pods in protobuf, each event's pod decoded whole by
// client-go's watch decoder.
func (c *Client) podWatcher(ns, selector string) watchFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.LabelSelector = selector
		opts.Watch = true
		return c.cs.pods(ns).req(c.cs.rest.Get).VersionedParams(&opts, c.cs.params).Watch(ctx)
	}
}

// erLister lists EphemeralRunners through the dynamic client, as
// Unstructured.
func (c *Client) erLister(ns string) listFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := c.dyn.Resource(ephemeralRunners).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return list, nil
	}
}

// erWatcher watches EphemeralRunners, each event read from the JSON
// stream by erWatchDecoder, its runner's view made with memo. Like
// client-go's Watch, it takes no token of the Client's rate limiter: a
// watch is one long request, and a relist's pages take theirs.
func (c *Client) erWatcher(ns string, memo *erMemo) watchFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		path, err := ephemeralRunnersPath(ns)
		if err != nil {
			return nil, err
		}
		opts.Watch = true
		body, err := c.arc.Get().AbsPath(path...).
			SpecificallyVersionedParams(&opts, metav1.ParameterCodec, schema.GroupVersion{Version: "v1"}).
			SetHeader("Accept", "application/json").
			Throttle(nil).
			Stream(ctx)
		if err != nil {
			return nil, err
		}
		return watch.NewStreamWatcher(newERWatchDecoder(body, memo),
			apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
	}
}
