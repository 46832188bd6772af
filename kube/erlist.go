package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

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
func (c *Client) ephemeralRunnerPage(ctx context.Context, ns string, opts metav1.ListOptions, scopes *scopeKeys, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
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
	defer body.Close()
	r := &bodyReader{r: body}
	out, cont, err := readEphemeralRunnerPage(r, scopes, out)
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

// erObject is what ListEphemeralRunners reads of an EphemeralRunner: the
// fields its view is made of. encoding/json scans past everything else
// (spec.spec, a whole pod template, and metadata.managedFields are most of
// the object) without building it.
//
// The fields are read as Unstructured's getters read them, so that a field
// of the wrong type is zero and never fails the list: spec and status
// through looseString and looseInt, timestamps through looseTime, and
// anything else of the wrong type (a status that is not an object) by
// fieldTypeError. Metadata's other fields are the API server's, of the
// types it validated. Two things read otherwise than Unstructured read
// them, and only in JSON no API server sends for a structural CRD, whose
// unknown fields it prunes: a key repeated in one object is merged where
// Unstructured kept the last, and a key is matched ignoring case.
// (sigs.k8s.io/json's case-sensitive decoder has its own type errors,
// which the lenient reading above cannot tell apart.)
type erObject struct {
	Metadata struct {
		Name              string    `json:"name"`
		Namespace         string    `json:"namespace"`
		UID               string    `json:"uid"`
		ResourceVersion   string    `json:"resourceVersion"`
		CreationTimestamp looseTime `json:"creationTimestamp"`
		DeletionTimestamp looseTime `json:"deletionTimestamp"`
		Finalizers        []string  `json:"finalizers"`
	} `json:"metadata"`
	Spec struct {
		GitHubConfigURL looseString `json:"githubConfigUrl"`
	} `json:"spec"`
	Status erStatus `json:"status"`
}

// erStatus is the part of an EphemeralRunner's status its view reads:
// ARC's phase and, once the listener recorded one, the job (see arcJob).
type erStatus struct {
	Phase             looseString `json:"phase"`
	Reason            looseString `json:"reason"`
	Message           looseString `json:"message"`
	RunnerID          looseInt    `json:"runnerId"`
	JobRequestID      looseInt    `json:"jobRequestId"`
	JobRepositoryName looseString `json:"jobRepositoryName"`
	WorkflowRunID     looseInt    `json:"workflowRunId"`
	JobDisplayName    looseString `json:"jobDisplayName"`
	JobID             looseString `json:"jobId"`
}

// readEphemeralRunnerPage decodes one page of an EphemeralRunner list from
// r, appends each item's view to out as soon as the item is decoded, and
// returns the page's continue token, so that only one item's bytes are
// held at a time. It takes what the dynamic client took: a JSON object
// with a kind, whose items (none when missing or null) are objects.
// Anything else, a syntax error or a failed read fails the page.
func readEphemeralRunnerPage(r io.Reader, scopes *scopeKeys, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err == io.EOF {
		return out, "", errors.New("an empty answer, not a list")
	} else if err != nil {
		return out, "", err
	} else if tok != json.Delim('{') {
		return out, "", fmt.Errorf("the answer is not a list object (%v)", tok)
	}
	start := len(out)
	var kind, cont looseString
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return out, "", err
		}
		switch key {
		case "kind":
			err = dec.Decode(&kind)
		case "metadata":
			var meta struct {
				Continue looseString `json:"continue"`
			}
			// A metadata of the wrong type has no continue token,
			// as it had none for Unstructured's GetContinue.
			if err = dec.Decode(&meta); isTypeError(err) {
				err = nil
			}
			cont = meta.Continue
		case "items":
			// A second items replaces the first, as the last of two
			// keys did in Unstructured's map.
			out, err = readItems(dec, scopes, out[:start])
		default:
			err = dec.Decode(&skipValue{})
		}
		if err != nil {
			return out, "", err
		}
	}
	if _, err := dec.Token(); err != nil {
		return out, "", err
	}
	// Read to the end, for the connection's sake too: a body closed
	// before its end cannot be reused.
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("data after the list (%v)", tok)
		}
		return out, "", err
	}
	// An EphemeralRunnerList and nothing else: a proxy's or a webhook's
	// object with a kind and no items would read as a complete, empty
	// list, and every pod's runner as podless.
	if kind != "EphemeralRunnerList" {
		return out, "", fmt.Errorf("the answer is a %q, not an EphemeralRunnerList", string(kind))
	}
	return out, string(cont), nil
}

// readItems decodes a list's items, the decoder being at their value, and
// appends their views to out.
func readItems(dec *json.Decoder, scopes *scopeKeys, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return out, err
	}
	if tok != json.Delim('[') {
		return out, fmt.Errorf("items is not an array (%v)", tok)
	}
	var o erObject
	for dec.More() {
		// encoding/json appends an array to the slice it finds: the
		// finalizers of one item are decoded into the last one's, which
		// view has copied.
		fins := o.Metadata.Finalizers[:0]
		o = erObject{}
		o.Metadata.Finalizers = fins
		if err := dec.Decode(&o); err != nil && !fieldTypeError(err) {
			return out, err
		}
		out = append(out, o.view(scopes))
	}
	_, err = dec.Token()
	return out, err
}

// isTypeError reports whether err says only that a value had the wrong
// type: encoding/json has then decoded everything else, leaving that value
// zero.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// fieldTypeError reports whether err says only that a field of an item had
// the wrong type (see isTypeError), which Unstructured's getters read as
// zero too; an item that is not an object at all failed Unstructured's
// list, and fails this one.
func fieldTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te) && te.Field != ""
}

// skipValue decodes any value into nothing.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// looseString is a string of ARC's spec or status as
// unstructured.NestedString reads it: "" when it is not a string.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	*s = looseString(jsonString(b))
	return nil
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

// looseInt is an integer of ARC's status read by nestedInt64's rule as it
// applied to Unstructured: apimachinery's JSON decoder made a number with
// no '.' that fits an int64 an int64 and any other number a float64, and
// nestedInt64 takes an int64, or a float64 that is a whole number (from a
// writer that sent 1.0). Anything else, a fraction, a string (even "7"),
// null or an object, is 0, and never an error: one runner's odd field must
// not fail the whole list.
type looseInt int64

func (n *looseInt) UnmarshalJSON(b []byte) error {
	*n = 0
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return nil
	}
	s := string(b)
	if bytes.IndexByte(b, '.') < 0 {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			*n = looseInt(i)
			return nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == float64(int64(f)) {
		*n = looseInt(int64(f))
	}
	return nil
}

// looseTime is a metadata timestamp as Unstructured's getters read it:
// metav1.Time.UnmarshalQueryParameter over the string, zero when it is
// missing, null, not a string or not RFC 3339.
type looseTime metav1.Time

func (t *looseTime) UnmarshalJSON(b []byte) error {
	var mt metav1.Time
	if mt.UnmarshalQueryParameter(jsonString(b)) != nil {
		mt = metav1.Time{}
	}
	*t = looseTime(mt)
	return nil
}

// maxScopeKeys bounds scopeKeys' memo; past it, a URL is parsed each time.
const maxScopeKeys = 1024

// scopeKeys is scopeKeyOfConfigURL remembered over one list: a fleet's
// EphemeralRunners name a handful of config URLs, each parsed once rather
// than once per runner, and each key is one string all views share.
type scopeKeys struct {
	githubHost string
	keys       map[string]string
}

func newScopeKeys(githubHost string) *scopeKeys {
	return &scopeKeys{githubHost: githubHost, keys: map[string]string{}}
}

func (s *scopeKeys) key(configURL string) string {
	if k, ok := s.keys[configURL]; ok {
		return k
	}
	k := intern(scopeKeyOfConfigURL(configURL, s.githubHost))
	if len(s.keys) < maxScopeKeys {
		s.keys[configURL] = k
	}
	return k
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
