package kube

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// unanswered reports whether a request's error is one no HTTP answer came
// with (the connection refused, a name that does not resolve, a TLS
// handshake refused): the API server cannot be reached, which no list in
// pages cures, and which is not the API server declining a watch-list.
func unanswered(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}

// errNoWatchList is wrapped by streamPods' error when the API server did
// not give a complete watch-list (it refused the request, the reaper may
// not watch pods, or the stream ended or broke the contract before its
// end bookmark). The caller lists the pods in pages instead; nothing the
// stream delivered is kept.
var errNoWatchList = errors.New("pod watch-list unavailable")

// streamPods reads one namespace's pods (all namespaces' for "") as a
// watch-list (KEP-3157): one watch request with sendInitialEvents and
// resourceVersionMatch=NotOlderThan and no resourceVersion, which the API
// contract makes a consistent read, answered from the API server's watch
// cache once that cache has caught up with etcd. The pods arrive one
// event at a time and each is reduced to its view and dropped, so neither
// side holds the whole fleet: over 10,000 ARC runner pods it took about
// 0.4 s where 40 consistent pages, each of which the API server reads from
// etcd and decodes again, took 2 s.
//
// The stream is read a frame at a time (see readFrame) rather than through
// client-go's watch decoder, which copied each 10 KB event twice and
// handed it over a channel: each pod's bytes are trimmed (trimmer.pod) and
// decoded in place, so a pod costs a few kilobytes of garbage.
//
// The stream counts as complete only at the bookmark annotated
// k8s.io/initial-events-end. Anything else before it (an ERROR event, a
// change event, an object that is not a pod, bytes that are not a
// protobuf watch stream, the stream closing) discards what arrived and
// returns errNoWatchList, so a server that does not keep the contract
// costs a page list, never a partial one.
func (c *Client) streamPods(ctx context.Context, ns, selector string, m Mapping, out *views) (err error) {
	start := out.len()
	defer func() {
		if err != nil {
			out.truncate(start)
		}
	}()
	send := true
	opts := metav1.ListOptions{
		LabelSelector:        selector,
		SendInitialEvents:    &send,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		Watch:                true,
		// The server ends the watch no later than the client gives up on
		// it, so that a stream that never reaches its end bookmark (a
		// proxy that drops sendInitialEvents makes a plain watch of it)
		// ends cleanly and the pods are read in pages.
		TimeoutSeconds: ptr.To(max(1, int64(math.Floor(c.timeout.Seconds())))),
	}
	body, err := c.cs.rest.Get().
		SetHeader("Accept", watchStreamType).
		NamespaceIfScoped(ns, ns != "").
		Resource("pods").
		VersionedParams(&opts, c.cs.params).
		Stream(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrTimeout) || unanswered(err) {
			return err
		}
		return fmt.Errorf("%w: %w", errNoWatchList, err)
	}
	defer func() { _ = body.Close() }() // read to its end or given up on: nothing to report
	r := bufio.NewReaderSize(body, 64<<10)
	if first, err := r.Peek(1); err == nil && (first[0] == '{' || first[0] == '[') {
		return fmt.Errorf("%w: the answer is JSON, not a protobuf watch stream", errNoWatchList)
	}
	// One frame buffer, one trimmer and one pod for the whole stream: a
	// view copies only strings, which decoding allocates afresh.
	var frame, trimmed []byte
	t := trimmer{keys: m.keys()}
	var p corev1.Pod
	for {
		frame, err = readFrame(r, frame)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended before its initial-events-end bookmark")
			}
			return fmt.Errorf("%w: %w", errNoWatchList, err)
		}
		kind, obj, err := watchEvent(frame)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoWatchList, err)
		}
		switch kind {
		case string(watch.Added), string(watch.Bookmark):
			resetPod(&p)
			trimmed, err = t.decodePod(obj, trimmed[:0], &p)
			if err != nil {
				return fmt.Errorf("%w: a %s event: %w", errNoWatchList, kind, err)
			}
			if kind == string(watch.Added) {
				out.add(m.View(&p))
			} else if p.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				return nil
			}
		case string(watch.Error):
			var st metav1.Status
			if err := decodeEnveloped(obj, "Status", &st); err != nil {
				return fmt.Errorf("%w: an ERROR event: %w", errNoWatchList, err)
			}
			return fmt.Errorf("%w: %w", errNoWatchList, apierrors.FromObject(&st))
		default:
			// Before its end bookmark a watch-list sends only the
			// current objects, as ADDED events.
			return fmt.Errorf("%w: a %s event before the initial-events-end bookmark", errNoWatchList, kind)
		}
	}
}

// watchStreamType asks for the API server's protobuf watch stream: each
// event a frame of a 4-byte big-endian length and a metav1.WatchEvent,
// whose object is a protobuf-enveloped object. Every kube-apiserver serves
// core/v1 so; an answer in any other form fails to parse and the pods are
// read in pages.
const watchStreamType = "application/vnd.kubernetes.protobuf;stream=watch"

// maxFrame bounds one watch event: etcd refuses objects over 1.5 MiB, so a
// larger frame is not a pod, and a hostile length must not make the reaper
// allocate it.
const maxFrame = 4 << 20

// readFrame reads one length-prefixed frame into buf (reused, grown as
// needed).
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return buf, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return buf, fmt.Errorf("a watch event of %d bytes, over the %d a pod can be", n, maxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf, err
	}
	return buf, nil
}

// watchEvent parses a metav1.WatchEvent (type 1, object 2: a RawExtension
// whose raw 1 is the enveloped object) without copying.
func watchEvent(frame []byte) (kind string, obj []byte, err error) {
	var ext []byte
	err = eachField(frame, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case 1:
				kind = string(value)
			case 2:
				ext = value
			}
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("a watch event: %w", err)
	}
	err = eachField(ext, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == 1 && typ == protowire.BytesType {
			obj = value
		}
		return nil
	})
	if err != nil || kind == "" || obj == nil {
		return "", nil, fmt.Errorf("a watch event without a type and an object: %w", cmp.Or(err, errMalformed))
	}
	return kind, obj, nil
}

// resetPod clears p for the next pod of a stream but keeps the arrays of
// its containers, container statuses and owner references, into which
// the next pod's are decoded, and its label and annotation maps, emptied:
// the generated decoder appends each element as a zero value before it
// decodes it, and adds to a map it finds, so nothing of the last pod's is
// read, and a pod's largest garbage is made once a stream. View copies
// nothing out of them but strings.
func resetPod(p *corev1.Pod) {
	containers, statuses, owners := keptSlice(p.Spec.Containers), keptSlice(p.Status.ContainerStatuses), keptSlice(p.OwnerReferences)
	labels, annotations := keptMap(p.Labels), keptMap(p.Annotations)
	*p = corev1.Pod{}
	p.Spec.Containers, p.Status.ContainerStatuses, p.OwnerReferences = containers, statuses, owners
	p.Labels, p.Annotations = labels, annotations
}

// keepAtMost bounds what resetPod keeps: a pod's few containers, owners
// and trimmed labels fit, and a hostile pod of a hundred thousand
// containers does not hold its array for the rest of the stream.
const keepAtMost = 16

// keptSlice is s emptied for reuse, or nil when its array is larger than
// keepAtMost elements.
func keptSlice[E any](s []E) []E {
	if cap(s) > keepAtMost {
		return nil
	}
	return s[:0]
}

// keptMap is m emptied for reuse, or nil when it held more than
// keepAtMost entries (a map does not shrink when emptied).
func keptMap(m map[string]string) map[string]string {
	if len(m) > keepAtMost {
		return nil
	}
	clear(m)
	return m
}

// decodePod decodes the enveloped v1 Pod in obj into p, trimmed (see
// trimmer.pod) through the scratch buffer buf, which it returns for reuse.
func (t *trimmer) decodePod(obj, buf []byte, p *corev1.Pod) ([]byte, error) {
	raw, err := envelope(obj, "Pod")
	if err != nil {
		return buf, err
	}
	buf, err = t.pod(buf, raw)
	if err != nil {
		return buf, err
	}
	return buf, p.Unmarshal(buf)
}

// decodeEnveloped decodes the enveloped v1 object of kind in obj into into.
func decodeEnveloped(obj []byte, kind string, into interface{ Unmarshal([]byte) error }) error {
	raw, err := envelope(obj, kind)
	if err != nil {
		return err
	}
	return into.Unmarshal(raw)
}

// envelope is the raw message of the protobuf envelope in obj, which must
// hold a v1 object of kind.
func envelope(obj []byte, kind string) ([]byte, error) {
	apiVersion, gotKind, raw, ok := parseEnvelope(obj)
	if !ok {
		return nil, fmt.Errorf("%w: not a protobuf-enveloped object", errMalformed)
	}
	if apiVersion != "v1" || gotKind != kind {
		return nil, fmt.Errorf("a %s %s where a v1 %s belongs", apiVersion, gotKind, kind)
	}
	return raw, nil
}
