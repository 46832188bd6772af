package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// decodeAll decodes events from stream until the decoder fails, and says
// each as "TYPE what", and the error it ended with.
func decodeAll(t *testing.T, stream io.Reader) ([]string, error) {
	t.Helper()
	k := erKind(newERMemo("github.com"))
	d := newERWatchDecoder(io.NopCloser(stream), newERMemo("github.com"))
	defer d.Close()
	var got []string
	for {
		typ, obj, err := d.Decode()
		if err != nil {
			return got, err
		}
		switch o := obj.(type) {
		case *erItem:
			// The store keeps the decoder's item as it is.
			it, err := k.transform(o)
			require.NoError(t, err)
			assert.Same(t, o, it)
			got = append(got, fmt.Sprintf("%s %s/%s@%s %s", typ, o.Namespace, o.Name, o.ResourceVersion, o.Phase))
		case *metav1.Status:
			// As the reflector's isExpiredError reads it.
			err := apierrors.FromObject(o)
			got = append(got, fmt.Sprintf("%s expired=%v", typ, apierrors.IsResourceExpired(err) || apierrors.IsGone(err)))
		default:
			// What the reflector reads of a bookmark.
			m, err := meta.Accessor(obj)
			require.NoError(t, err)
			got = append(got, fmt.Sprintf("%s @%s end=%s", typ, m.GetResourceVersion(), m.GetAnnotations()[metav1.InitialEventsAnnotationKey]))
		}
	}
}

// TestERWatchDecoder: each event of a JSON watch stream becomes what the
// reflector reads (the runner's item, a bookmark's resourceVersion and
// end annotation, an ERROR's Status); the stream's clean end is io.EOF and
// its cut io.ErrUnexpectedEOF, as client-go's own decoder gives them, and
// anything that is not a watch event of an EphemeralRunner is an error.
func TestERWatchDecoder(t *testing.T) {
	er := func(name, status string) string {
		return rawER{name: name, status: status}.json()
	}
	ev := func(typ, obj string) string { return `{"type":"` + typ + `","object":` + obj + `}` }
	bookmark := func(rv, annotations string) string {
		return `{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","metadata":{"resourceVersion":"` + rv + `"` + annotations + `}}`
	}
	const gone = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (40)","reason":"Expired","code":410}`
	huge := `{"type":"ADDED","object":{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","spec":{"x":"` +
		strings.Repeat("a", maxERValue+1) + `"}}}`
	for _, tc := range []struct {
		name    string
		stream  string
		want    []string
		wantErr error  // the error itself
		errHas  string // else words of the error
	}{
		{
			name: "every type, and the end of the initial events",
			stream: ev("ADDED", er("a", `{"phase":"Running"}`)) + "\n" +
				ev("BOOKMARK", bookmark("10", `,"annotations":{"k8s.io/initial-events-end":"true"}`)) + "\n" +
				ev("MODIFIED", er("a", `{"phase":"Failed"}`)) +
				ev("DELETED", er("b", `null`)) + "\n" +
				ev("BOOKMARK", bookmark("12", ``)),
			want: []string{"ADDED ci/a@9 Running", "BOOKMARK @10 end=true", "MODIFIED ci/a@9 Failed",
				"DELETED ci/b@9 ", "BOOKMARK @12 end="},
			wantErr: io.EOF,
		},
		{
			name:    "object before its type",
			stream:  `{"object":` + er("a", `{"phase":"Running"}`) + `,"type":"ADDED"}`,
			want:    []string{"ADDED ci/a@9 Running"},
			wantErr: io.EOF,
		},
		{
			name:    "an annotation other than true ends nothing",
			stream:  ev("BOOKMARK", bookmark("10", `,"annotations":{"k8s.io/initial-events-end":"false"}`)),
			want:    []string{"BOOKMARK @10 end="},
			wantErr: io.EOF,
		},
		{
			name:    "ERROR 410 is a Status the reflector takes as expired",
			stream:  ev("ADDED", er("a", `{}`)) + ev("ERROR", gone),
			want:    []string{"ADDED ci/a@9 ", "ERROR expired=true"},
			wantErr: io.EOF,
		},
		{name: "an empty stream ends cleanly", stream: "", wantErr: io.EOF},
		{
			name:    "cut within an event",
			stream:  ev("ADDED", er("a", `{}`)) + `{"type":"ADDED","object":{"apiVersion":"acti`,
			want:    []string{"ADDED ci/a@9 "},
			wantErr: io.ErrUnexpectedEOF,
		},
		{name: "malformed JSON", stream: `{"type":"ADDED","object":{"metadata":}}`, errHas: "invalid character"},
		{name: "not a stream of events", stream: `[1,2]`, errHas: "not a stream of JSON watch events"},
		{name: "an event without its object", stream: `{"type":"ADDED"}`, errHas: "without a type and an object"},
		{name: "an unknown type", stream: ev("SHOUTED", er("a", `{}`)), errHas: `a watch event of type "SHOUTED"`},
		{
			name:   "another kind",
			stream: ev("ADDED", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`),
			errHas: `"v1" "Pod" where a actions.github.com/v1alpha1 EphemeralRunner belongs`,
		},
		{
			name:   "a bookmark of another kind",
			stream: ev("BOOKMARK", `{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"3"}}`),
			errHas: "a BOOKMARK event",
		},
		{name: "an ERROR that is no Status", stream: ev("ERROR", `{"apiVersion":"v1","kind":"Pod","code":410}`), errHas: "where a v1 Status belongs"},
		{name: "a huge field", stream: huge, errHas: "more than any EphemeralRunner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(t, strings.NewReader(tc.stream))
			assert.Equal(t, tc.want, got)
			if tc.wantErr != nil {
				assert.Equal(t, tc.wantErr, err) //nolint:testifylint // the error itself, as the StreamWatcher compares it
				return
			}
			require.Error(t, err)
			assert.NotErrorIs(t, err, io.EOF)
			assert.Contains(t, err.Error(), tc.errHas)
		})
	}
}

// TestERWatchDecoderGivesTheReadError: a body whose read fails ends the
// decoding with that read's error, for the StreamWatcher to tell a
// dropped connection from a broken stream.
func TestERWatchDecoderGivesTheReadError(t *testing.T) {
	reset := errors.New("connection reset by peer")
	_, err := decodeAll(t, io.MultiReader(strings.NewReader(`{"type":"ADDED","object":{"kind":`), iotestErr{reset}))
	assert.Same(t, reset, err) //nolint:testifylint // the read's error itself
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// FuzzWatchDecoderAgreesWithUnstructured: whatever an event's object, the
// runner the reflector's watch decoder gives is the view the dynamic
// client's Unstructured, read by the store's transform, gives of the same
// bytes. An object only one of them accepts is not compared.
func FuzzWatchDecoderAgreesWithUnstructured(f *testing.F) {
	arc, err := json.Marshal(arcRunnerObject(3))
	require.NoError(f, err)
	for _, obj := range []string{
		string(arc),
		rawER{name: "a", meta: `"deletionTimestamp":"2026-03-14T10:00:00Z","finalizers":["x","y"]`, status: `{"phase":"Running","runnerId":7}`}.json(),
		rawER{name: "b", status: `{"phase":"Failed","reason":"TooManyPodFailures","message":"5 failures","jobRequestId":991,"jobRepositoryName":"acme/api","workflowRunId":4242,"jobDisplayName":"build","jobId":"77","runnerId":1e3}`}.json(),
		rawER{name: "c", spec: `{"githubConfigUrl":"https://github.com/enterprises/big"}`, meta: `"name":"c2","finalizers":["a",5]`}.json(),
		rawER{name: "d", spec: `{"githubConfigUrl":"https://ghes.example/acme"}`, status: `{"phase":5,"runnerId":-4,"jobId":"x1"}`}.json(),
		rawER{name: "e", meta: `"creationTimestamp":"0001-01-01T00:00:00Z","deletionTimestamp":"not a time"`, status: `"a string"`}.json(),
		`{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","metadata":{"name":"n\u0061me","uid":"u"},"status":{"phase":"Running"},"status":{"runnerId":5}}`,
		`{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","Metadata":{"name":"x"},"metadata":5,"spec":{"GithubConfigUrl":"https://github.com/a"}}`,
	} {
		f.Add("MODIFIED", obj)
	}
	dec := dynamicDecoder(f)
	f.Fuzz(func(t *testing.T, typ, obj string) {
		ev, err := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(obj)})
		if err != nil {
			return
		}
		d := newERWatchDecoder(io.NopCloser(strings.NewReader(string(ev))), newERMemo("github.com"))
		gotType, got, err := d.Decode()
		if err != nil {
			return
		}
		var u unstructured.Unstructured
		if _, _, err := dec.Decode([]byte(obj), nil, &u); err != nil {
			return
		}
		require.Equal(t, watch.EventType(typ), gotType)
		switch gotType {
		case watch.Added, watch.Modified, watch.Deleted:
			k := erKind(newERMemo("github.com"))
			it, err := k.transform(&u)
			require.NoError(t, err)
			want, ok := k.view(it)
			require.True(t, ok)
			lean, ok := got.(*erItem)
			require.True(t, ok, "a %T", got)
			assert.Equal(t, *want, lean.EphemeralRunner)
		case watch.Bookmark:
			m, err := meta.Accessor(got)
			require.NoError(t, err)
			assert.Equal(t, u.GetResourceVersion(), m.GetResourceVersion())
			assert.Equal(t, u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true",
				m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true")
		}
	})
}
