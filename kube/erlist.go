package kube

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ephemeralRunnerPage lists one page of EphemeralRunners in ns (all
// namespaces when ns is empty) and appends their views to out. It sends
// the request c.dyn's List sends, over c.dyn's own REST client (the same
// URL and query, rate limiter, counted HTTP client, user agent and Status
// errors), but decodes the answer into erObject as it streams in, instead
// of into Unstructured: an EphemeralRunner is mostly its pod template and
// managedFields, which Unstructured built as maps only for the view to drop
// them, and the page's bytes, which Do reads whole, are never held.
func (c *Client) ephemeralRunnerPage(ctx context.Context, ns string, opts metav1.ListOptions, memo *listMemo, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
	path, err := ephemeralRunnersPath(ns)
	if err != nil {
		return out, "", err
	}
	body, err := streamRetrying(ctx, func() *rest.Request {
		return c.arc.Get().AbsPath(path...).
			SpecificallyVersionedParams(&opts, metav1.ParameterCodec, schema.GroupVersion{Version: "v1"}).
			// JSON even where client-go's feature gates would take
			// CBOR: JSON is all readEphemeralRunnerPage reads.
			SetHeader("Accept", "application/json")
	})
	if err != nil {
		return out, "", err
	}
	defer func() { _ = body.Close() }() // read to its end or given up on: nothing to report
	r := &bodyReader{r: body}
	out, cont, err := readEphemeralRunnerPage(r, memo, out)
	if err != nil {
		if r.err != nil {
			err = r.err
		}
		return out, "", fmt.Errorf("read the page: %w", err)
	}
	return out, cont, nil
}

// ephemeralRunnersPath is the absolute path of the EphemeralRunners in ns
// (of all namespaces when ns is empty), for the pages and the watch-list
// alike. It makes the dynamic client's own check: a name that is not one
// path segment would list somewhere else.
func ephemeralRunnersPath(ns string) ([]string, error) {
	if msgs := rest.IsValidPathSegmentName(ns); len(msgs) != 0 {
		return nil, fmt.Errorf("invalid namespace %q: %v", ns, msgs)
	}
	path := []string{"apis", ephemeralRunners.Group, ephemeralRunners.Version}
	if ns != "" {
		path = append(path, "namespaces", ns)
	}
	return append(path, ephemeralRunners.Resource), nil
}

// bodyReader remembers the first error reading the body returned, so that
// a page cut short says why (ErrTimeout, a dropped connection) in its
// error's chain whatever the JSON decoder wraps it in: encoding/json built
// with GOEXPERIMENT=jsonv2 keeps only its text.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// streamRetries is how many times client-go's Do sends a request again
// (rest.Request's default maxRetries).
const streamRetries = 10

// streamRetrying sends the request newRequest builds with Stream and, when
// it fails as Do would have retried it, a GET whose connection was reset
// or closed before any answer, sends it again a second later, up to
// streamRetries times, as Do does. Stream alone retries only the answers
// that ask for it (Retry-After), so without this a connection the API
// server drops while it restarts would fail a list that the dynamic
// client's List finished.
func streamRetrying(ctx context.Context, newRequest func() *rest.Request) (io.ReadCloser, error) {
	for attempt := 1; ; attempt++ {
		body, err := newRequest().Stream(ctx)
		if err == nil || attempt > streamRetries ||
			!(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
			return body, err
		}
		wait := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, err
		case <-wait.C:
		}
	}
}

// maxMemoKeys bounds listMemo's config URLs; past it, a URL is parsed
// each time.
const maxMemoKeys = 1024

// maxMemoFinalizers bounds listMemo's finalizer lists; past it, a list
// is copied for its view.
const maxMemoFinalizers = 16

// listMemo is what one list of EphemeralRunners remembers from item to
// item, so that the views of a fleet share what its runners repeat:
//   - the scope key of each config URL: a fleet's EphemeralRunners name a
//     handful, each parsed once rather than once per runner;
//   - each distinct list of finalizers: nearly every runner of a fleet
//     carries ARC's same two, and one slice of them for all its views
//     keeps 32 bytes a runner, 3 MB of 100,000, off the heap;
//   - the pods listed before, by their owner's UID: ARC names a pod as its
//     EphemeralRunner, so the runner's view can hold the pod view's copies
//     of its name and UID instead of its own. That keeps about 90 bytes a
//     runner, 9 MB of 100,000, off the heap while it is at its highest.
type listMemo struct {
	githubHost string
	keys       map[string]string
	finalizers [][]string
	pods       []fleet.Pod
	owned      []int32
}

// newListMemo is the memo of one list, which will share strings with pods.
// pods are read, never written, and must not change while the list is
// read.
func newListMemo(githubHost string, pods []fleet.Pod) *listMemo {
	m := &listMemo{githubHost: githubHost, keys: map[string]string{}, pods: pods}
	for i := range min(len(pods), math.MaxInt32) {
		if o := pods[i].Owner; o != nil && o.UID != "" {
			m.owned = append(m.owned, int32(i))
		}
	}
	slices.SortFunc(m.owned, func(a, b int32) int { return strings.Compare(pods[a].Owner.UID, pods[b].Owner.UID) })
	return m
}

// room is an empty slice with room for a view of each EphemeralRunner the
// pods name as their owner (nil when they name none), for the list's views
// to be appended to. Grown by append instead, 100,000 views would be
// copied a dozen times, the last time while the heap is at its highest,
// and keep up to a quarter of their 21 MB spare. Pods owned by anything
// else cost no room. A pod whose runner is gone (deleted between the two
// lists) costs one view's room, 160 bytes, for the sweep; runners whose
// pods the selector does not match grow the slice by append.
func (s *listMemo) room() []fleet.EphemeralRunner {
	if n := s.expected(); n > 0 {
		return make([]fleet.EphemeralRunner, 0, n)
	}
	return nil
}

// expected is how many distinct EphemeralRunners the pods name as their
// owners.
func (s *listMemo) expected() int {
	n := 0
	for k, i := range s.owned {
		o := s.pods[i].Owner
		if o.APIVersion == fleet.EphemeralRunnerAPIVersion && o.Kind == fleet.EphemeralRunnerKind &&
			(k == 0 || s.pods[s.owned[k-1]].Owner.UID != o.UID) {
			n++
		}
	}
	return n
}

// shared is name and uid in strings a pod's view already holds, when a pod
// names as its owner an object of that UID (and that name); otherwise they
// themselves. The strings are equal either way: only where their bytes are
// kept changes.
func (s *listMemo) shared(name, uid string) (string, string) {
	i, found := slices.BinarySearchFunc(s.owned, uid, func(k int32, uid string) int {
		return strings.Compare(s.pods[k].Owner.UID, uid)
	})
	if !found {
		return name, uid
	}
	o := s.pods[s.owned[i]].Owner
	if o.Name == name {
		name = o.Name
	}
	return name, o.UID
}

func (s *listMemo) key(configURL string) string {
	if k, ok := s.keys[configURL]; ok {
		return k
	}
	k := intern(scopeKeyOfConfigURL(configURL, s.githubHost))
	if len(s.keys) < maxMemoKeys {
		s.keys[configURL] = k
	}
	return k
}

// sharedFinalizers is names as a slice the views of this list share with
// every other runner that has the same finalizers in the same order; nil
// when there are none. names itself is never kept: the decoder reuses it
// for the next item. The slice is full (its capacity its length), so that
// an append to one view's copies it instead of writing into the others';
// fleet.EphemeralRunner.Finalizers says that no one writes to it.
func (s *listMemo) sharedFinalizers(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	for _, f := range s.finalizers {
		if slices.Equal(f, names) {
			return f
		}
	}
	f := internAll(names)
	if len(s.finalizers) < maxMemoFinalizers {
		s.finalizers = append(s.finalizers, f)
	}
	return f
}

// internAll is names interned, in a slice of their exact length; nil when
// there are none.
func internAll(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = intern(n)
	}
	return out
}
