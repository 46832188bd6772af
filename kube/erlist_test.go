package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ephemeralRunnerView is the view of an EphemeralRunner held as
// Unstructured, made by the decoder a list page goes through, so that the
// tests written against objects as maps test the decoder's rules.
func ephemeralRunnerView(u *unstructured.Unstructured, githubHost string) fleet.EphemeralRunner {
	item, err := json.Marshal(u.Object)
	if err != nil {
		panic(err)
	}
	ers, _, err := readEphemeralRunnerPage(bytes.NewReader(erPage(string(item))), newListMemo(githubHost, nil), nil)
	if err != nil || len(ers) != 1 {
		panic(fmt.Sprintf("decode %s: %d views, %v", item, len(ers), err))
	}
	return ers[0]
}

// erPage is a list page of the items, as the API server writes one.
func erPage(items ...string) []byte {
	return []byte(`{"apiVersion":"actions.github.com/v1alpha1","items":[` + strings.Join(items, ",") +
		`],"kind":"EphemeralRunnerList","metadata":{"continue":"next-page","resourceVersion":"4242"}}`)
}

// unstructuredERView is the reduction ListEphemeralRunners made before it decoded
// pages itself: the dynamic client's Unstructured, read by its getters. It
// is the reference the decoder must agree with, and the benchmark's
// baseline.
func unstructuredERView(u *unstructured.Unstructured, githubHost string) fleet.EphemeralRunner {
	obj := u.Object
	configURL, _, _ := unstructured.NestedString(obj, "spec", "githubConfigUrl")
	phase, _, _ := unstructured.NestedString(obj, "status", "phase")
	reason, _, _ := unstructured.NestedString(obj, "status", "reason")
	message, _, _ := unstructured.NestedString(obj, "status", "message")
	v := fleet.EphemeralRunner{
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             string(u.GetUID()),
		ResourceVersion: u.GetResourceVersion(),
		ScopeKey:        scopeKeyOfConfigURL(configURL, githubHost),
		Phase:           phase,
		RunnerID:        nestedInt64(obj, "status", "runnerId"),
		CreatedAt:       fleet.StampOf(u.GetCreationTimestamp().Time),
		Finalizers:      u.GetFinalizers(),
	}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		v.DeletingSince = fleet.StampOf(ts.Time)
	}
	if reason != "" || message != "" {
		v.Note = &fleet.StatusNote{Reason: reason, Message: message}
	}
	v.Job = unstructuredARCJob(obj)
	return v
}

// unstructuredARCJob is arcJob as it read Unstructured.
func unstructuredARCJob(obj map[string]any) *fleet.Job {
	request := nestedInt64(obj, "status", "jobRequestId")
	repo, _, _ := unstructured.NestedString(obj, "status", "jobRepositoryName")
	run := nestedInt64(obj, "status", "workflowRunId")
	if request <= 0 && repo == "" && run <= 0 {
		return nil
	}
	name, _, _ := unstructured.NestedString(obj, "status", "jobDisplayName")
	j := &fleet.Job{Name: name, RequestID: max(request, 0)}
	if ref, err := fleet.ParseJobRef(repo + "/" + strconv.FormatInt(run, 10)); err == nil {
		j.Owner, j.Repo, j.RunID = ref.Owner, ref.Repo, ref.RunID
	}
	if id, _, _ := unstructured.NestedString(obj, "status", "jobId"); id != "" {
		if ref, err := fleet.ParseJobRef("o/r/1/" + id); err == nil {
			j.JobID = ref.JobID
		}
	}
	return j
}

// dynamicDecoder is the decoder the dynamic client's List decoded a page
// with (Do(ctx).Into(&UnstructuredList{})).
func dynamicDecoder(t testing.TB) runtime.Decoder {
	t.Helper()
	for _, info := range dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			return info.Serializer
		}
	}
	t.Fatal("the dynamic client decodes no JSON")
	return nil
}

// unstructuredERPage decodes a page as the dynamic client did: the body read whole
// (as Do reads it), decoded into an UnstructuredList, then reduced.
func unstructuredERPage(dec runtime.Decoder, body io.Reader, githubHost string, out []fleet.EphemeralRunner) ([]fleet.EphemeralRunner, string, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return out, "", err
	}
	var list unstructured.UnstructuredList
	if _, _, err := dec.Decode(raw, nil, &list); err != nil {
		return out, "", err
	}
	for i := range list.Items {
		out = append(out, unstructuredERView(&list.Items[i], githubHost))
	}
	return out, list.GetContinue(), nil
}

// rawER is an EphemeralRunner of a test page with its status, spec and
// extra metadata fields as raw JSON, so that each can be of any type. No
// status leaves it out; no spec is one for github.com/acme.
type rawER struct {
	name   string
	status string // the whole status object, or another value
	spec   string
	meta   string // extra metadata fields, each "key":value
}

func (it rawER) json() string {
	meta := `"namespace":"ci","name":"` + it.name + `","uid":"u-` + it.name + `","resourceVersion":"9","creationTimestamp":"2026-03-14T09:26:53Z"`
	if it.meta != "" {
		meta += "," + it.meta
	}
	s := `{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","metadata":{` + meta + `}`
	if it.spec != "" {
		s += `,"spec":` + it.spec
	} else {
		s += `,"spec":{"githubConfigUrl":"https://github.com/acme"}`
	}
	if it.status != "" {
		s += `,"status":` + it.status
	}
	return s + "}"
}

// erStatusWith is a status whose one field has the raw value.
func erStatusWith(field, raw string) string {
	return `{"phase":"Running",` + strconv.Quote(field) + `:` + raw + `}`
}

// TestLooseInt: status integers are read by nestedInt64's rule, and a
// value of the wrong type is 0, never an error.
func TestLooseInt(t *testing.T) {
	for _, tc := range []struct {
		raw  string // "" leaves the field out
		want int64
	}{
		{"7", 7},
		{"7.0", 7},
		{"7.00", 7},
		{"7e0", 7},
		{"1e3", 1000},
		{"1e400", 0}, // beyond a float64: no id, and the list stands
		{"-3", 0},    // GitHub's ids are positive: a negative one is none
		{"-0", 0},
		{"9223372036854775807", 9223372036854775807},
		{"-9223372036854775808", 0},
		{`"7"`, 0},
		{"7.5", 0},
		{"0.1", 0},
		{"null", 0},
		{"", 0},
		{"{}", 0},
		{`{"id":7}`, 0},
		{"[7]", 0},
		{"true", 0},
		{`"abc"`, 0},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			status := `{"phase":"Running"}`
			if tc.raw != "" {
				status = erStatusWith("runnerId", tc.raw)
			}
			ers, _, err := readEphemeralRunnerPage(bytes.NewReader(erPage(rawER{name: "r", status: status}.json())), newListMemo("", nil), nil)
			require.NoError(t, err)
			require.Len(t, ers, 1)
			assert.Equal(t, tc.want, ers[0].RunnerID)
			assert.Equal(t, "Running", ers[0].Phase, "the rest of the status is read")
		})
	}
}

// TestLooseString: status and spec strings of the wrong type are "", and
// a string is decoded as encoding/json decodes it.
func TestLooseString(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string
	}{
		{`"Failed"`, "Failed"},
		{`""`, ""},
		{`"say \"hi\"\n\u00e9\ud83d\ude00"`, "say \"hi\"\n\u00e9\U0001F600"},
		{"\"bad \xff utf-8\"", "bad \uFFFD utf-8"},
		{`5`, ""},
		{`null`, ""},
		{`{"a":"b"}`, ""},
		{`["Failed"]`, ""},
		{`false`, ""},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			ers, _, err := readEphemeralRunnerPage(bytes.NewReader(erPage(rawER{name: "r", status: erStatusWith("message", tc.raw)}.json())), newListMemo("", nil), nil)
			require.NoError(t, err)
			require.Len(t, ers, 1)
			assert.Equal(t, tc.want, ers[0].Message())
			assert.Equal(t, "Running", ers[0].Phase)
		})
	}
}

// TestWrongTypedFieldKeepsTheList: one runner's odd field is that field
// read as zero, as Unstructured's getters read it; the other runners, and
// the rest of that runner, are read in full.
func TestWrongTypedFieldKeepsTheList(t *testing.T) {
	good := func(name string, id int) rawER {
		return rawER{name: name, status: `{"phase":"Running","runnerId":` + strconv.Itoa(id) + `}`}
	}
	for _, tc := range []struct {
		name string
		odd  rawER
		want fleet.EphemeralRunner // of the odd runner, beside its name and namespace
	}{
		{"runnerId a string", rawER{status: `{"phase":"Running","runnerId":"abc"}`},
			fleet.EphemeralRunner{Phase: "Running", ScopeKey: "org:acme"}},
		{"phase a number", rawER{status: `{"phase":3,"runnerId":5}`},
			fleet.EphemeralRunner{RunnerID: 5, ScopeKey: "org:acme"}},
		{"status a string", rawER{status: `"broken"`},
			fleet.EphemeralRunner{ScopeKey: "org:acme"}},
		{"status an array", rawER{status: `[1,2]`},
			fleet.EphemeralRunner{ScopeKey: "org:acme"}},
		{"spec a number", rawER{spec: `5`, status: `{"phase":"Pending"}`},
			fleet.EphemeralRunner{Phase: "Pending"}},
		{"githubConfigUrl an object", rawER{spec: `{"githubConfigUrl":{"url":"https://github.com/acme"}}`, status: `{"phase":"Pending"}`},
			fleet.EphemeralRunner{Phase: "Pending"}},
		// The last of two keys, as in Unstructured's map.
		{"creationTimestamp not a time", rawER{meta: `"creationTimestamp":"yesterday"`, status: `{"phase":"Pending"}`},
			fleet.EphemeralRunner{Phase: "Pending", ScopeKey: "org:acme", CreatedAt: fleet.StampOf(time.Time{})}},
		{"a job field a string", rawER{status: `{"phase":"Running","runnerId":5,"jobRequestId":"991","jobRepositoryName":"acme/api","workflowRunId":4242}`},
			fleet.EphemeralRunner{Phase: "Running", RunnerID: 5, ScopeKey: "org:acme", Job: &fleet.Job{Owner: "acme", Repo: "api", RunID: 4242}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.odd.name = "odd"
			page := erPage(good("first", 1).json(), tc.odd.json(), good("last", 3).json())
			ers, cont, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("", nil), nil)
			require.NoError(t, err)
			assert.Equal(t, "next-page", cont)
			require.Len(t, ers, 3)
			assert.Equal(t, "first", ers[0].Name)
			assert.Equal(t, int64(1), ers[0].RunnerID)
			assert.Equal(t, "last", ers[2].Name)
			assert.Equal(t, int64(3), ers[2].RunnerID)
			odd := ers[1]
			assert.Equal(t, "odd", odd.Name)
			assert.Equal(t, "u-odd", odd.UID)
			assert.Equal(t, "ci", odd.Namespace)
			want := tc.want
			want.Namespace, want.Name, want.UID, want.ResourceVersion = odd.Namespace, odd.Name, odd.UID, odd.ResourceVersion
			if !strings.Contains(tc.odd.meta, "creationTimestamp") {
				want.CreatedAt = ers[0].CreatedAt
				assert.True(t, want.CreatedAt.Time().Equal(time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)))
			}
			assert.Equal(t, want, odd)
		})
	}
}

// TestReadPageAgreesWithUnstructured decodes the same pages through the
// dynamic client's decoder and the old view, and through the lean
// decoder: every view, every continue token, and which pages fail, must be
// the same.
func TestReadPageAgreesWithUnstructured(t *testing.T) {
	dec := dynamicDecoder(t)
	values := []string{`7`, `7.0`, `"7"`, `7.5`, `null`, `{}`, `[7]`, `true`, `-3`, `1e3`, `0`, `-0.0`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775809`, `18446744073709551616`, `1e19`}
	strs := []string{`"Running"`, `""`, `5`, `null`, `{}`, `["a"]`, `"a\"b\u00e9"`, "\"\xff\"", `"acme/api"`, `"acme"`, `"acme/../x"`, `"777"`, `"6a1c-44"`, `"0"`}
	var items []string
	n := 0
	add := func(it rawER) {
		n++
		it.name = fmt.Sprintf("r%d", n)
		items = append(items, it.json())
	}
	for _, f := range []string{"runnerId", "jobRequestId", "workflowRunId"} {
		for _, v := range values {
			add(rawER{status: `{"phase":"Running","jobRepositoryName":"acme/api","jobRequestId":1,"workflowRunId":2,` + strconv.Quote(f) + `:` + v + `}`})
		}
	}
	for _, f := range []string{"phase", "reason", "message", "jobRepositoryName", "jobDisplayName", "jobId"} {
		for _, v := range strs {
			add(rawER{status: `{"workflowRunId":4242,"jobRequestId":991,` + strconv.Quote(f) + `:` + v + `}`})
		}
	}
	for _, v := range []string{`"https://github.com/acme"`, `"https://github.com/Acme/API/"`, `"https://ghes.example.com/acme"`, `"https://github.com/enterprises/big-corp"`, `"junk"`, `7`, `null`} {
		add(rawER{spec: `{"githubConfigUrl":` + v + `,"spec":{"containers":[{"name":"runner"}]}}`})
	}
	for _, v := range []string{`"broken"`, `[]`, `null`, `{}`, `7`} {
		add(rawER{status: v})
		add(rawER{spec: v})
	}
	for _, meta := range []string{
		`"deletionTimestamp":"2026-03-14T10:00:00Z","finalizers":["ephemeralrunner.actions.github.com/finalizer","ephemeralrunner.actions.github.com/runner-registration-finalizer"]`,
		`"deletionTimestamp":"0001-01-01T00:00:00Z"`,
		`"deletionTimestamp":null`,
		`"deletionTimestamp":"soon"`,
		`"deletionTimestamp":7`,
		`"creationTimestamp":"2026-03-14T11:26:53+02:00"`,
		`"creationTimestamp":"yesterday"`,
		`"creationTimestamp":null`,
		`"finalizers":["a","a"]`,
	} {
		add(rawER{meta: meta, status: `{"phase":"Running"}`})
	}

	for _, tc := range []struct {
		name  string
		page  string
		fails bool
	}{
		{"every odd field", string(erPage(items...)), false},
		{"no items", `{"kind":"EphemeralRunnerList","metadata":{}}`, false},
		{"items null", `{"kind":"EphemeralRunnerList","items":null}`, false},
		{"an empty list", `{"apiVersion":"actions.github.com/v1alpha1","items":[],"kind":"EphemeralRunnerList","metadata":{"resourceVersion":"1"}}`, false},
		{"an item null", `{"kind":"EphemeralRunnerList","items":[null]}`, false},
		{"the items twice", `{"kind":"EphemeralRunnerList","items":[` + items[0] + `],"items":[` + items[1] + `,` + items[2] + `]}`, false},
		{"metadata not an object", `{"kind":"EphemeralRunnerList","items":[` + items[0] + `],"metadata":"x"}`, false},
		{"continue not a string", `{"kind":"EphemeralRunnerList","items":[],"metadata":{"continue":5}}`, false},
		{"whitespace after", string(erPage(items[0])) + "\n \n", false},
		// Failures.
		{"no kind", `{"apiVersion":"v1","items":[` + items[0] + `]}`, true},
		{"kind not a string", `{"kind":5,"items":[]}`, true},
		{"empty object", `{}`, true},
		{"an array", `[` + items[0] + `]`, true},
		{"items an object", `{"kind":"EphemeralRunnerList","items":{}}`, true},
		{"items a string", `{"kind":"EphemeralRunnerList","items":"x"}`, true},
		{"an item a string", `{"kind":"EphemeralRunnerList","items":["x"]}`, true},
		{"an item an array", `{"kind":"EphemeralRunnerList","items":[[]]}`, true},
		{"truncated", string(erPage(items[:3]...)[:len(items[0])+60]), true},
		{"data after the list", string(erPage(items[0])) + `{}`, true},
		{"a syntax error in a skipped field", strings.Replace(string(erPage(items[0])), `"spec":{`, `"spec":{"x":tru,`, 1), true},
		{"empty", ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, host := range []string{"", "github.com"} {
				want, wantCont, wantErr := unstructuredERPage(dec, strings.NewReader(tc.page), host, nil)
				got, gotCont, err := readEphemeralRunnerPage(strings.NewReader(tc.page), newListMemo(host, nil), nil)
				require.Equal(t, tc.fails, wantErr != nil, "Unstructured's answer: %v", wantErr)
				if wantErr != nil {
					require.Error(t, err, "Unstructured refused it: %v", wantErr)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, wantCont, gotCont)
				require.Len(t, got, len(want))
				for i := range want {
					// An empty finalizer list was an empty slice,
					// is nil: the API server never writes one.
					if len(want[i].Finalizers) == 0 {
						want[i].Finalizers = nil
					}
					// A runner id below 1 was kept, is none: GitHub's
					// ids are positive.
					want[i].RunnerID = max(want[i].RunnerID, 0)
					assert.Equal(t, want[i], got[i], "item %d: %s", i, want[i].Name)
				}
			}
		})
	}
}

// TestViewsShareRepeatedStrings: the strings a fleet repeats are one copy
// for all views.
func TestViewsShareRepeatedStrings(t *testing.T) {
	page := erPage(
		rawER{name: "a", meta: `"finalizers":["ephemeralrunner.actions.github.com/finalizer"]`, status: `{"phase":"Failed","reason":"TooManyPodFailures"}`}.json(),
		rawER{name: "b", meta: `"finalizers":["ephemeralrunner.actions.github.com/finalizer"]`, status: `{"phase":"Failed","reason":"TooManyPodFailures"}`}.json(),
	)
	ers, _, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("", nil), nil)
	require.NoError(t, err)
	require.Len(t, ers, 2)
	same := func(a, b string) bool {
		return a != "" && len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
	}
	a, b := ers[0], ers[1]
	assert.True(t, same(a.Namespace, b.Namespace), "namespace")
	assert.True(t, same(a.ScopeKey, b.ScopeKey), "scope")
	assert.True(t, same(a.Phase, b.Phase), "phase")
	assert.True(t, same(a.Reason(), b.Reason()), "reason")
	require.Len(t, a.Finalizers, 1)
	require.Len(t, b.Finalizers, 1)
	assert.True(t, same(a.Finalizers[0], b.Finalizers[0]), "finalizer")
	assert.Equal(t, 1, cap(a.Finalizers), "no room kept beyond the finalizers")
	assert.Empty(t, a.Message())
}

// TestViewsShareTheirPodsStrings: a runner's view holds the name and UID
// strings of the pod view that names it as its owner, by UID; a name the
// owner reference does not give stays the runner's own; a runner no pod
// names, or a pod that names another UID, shares nothing. Every value is
// the one the list said, whatever is shared.
func TestViewsShareTheirPodsStrings(t *testing.T) {
	owned := func(name, uid string) fleet.Pod {
		return fleet.Pod{Namespace: "ci", Name: strings.Clone(name), Owner: &fleet.Owner{
			APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind,
			Name: strings.Clone(name), UID: strings.Clone(uid),
		}}
	}
	pods := []fleet.Pod{
		owned("z", "u-z"),
		owned("a", "u-a"),
		owned("b-renamed", "u-b"),
		{Namespace: "ci", Name: "bare"},
		owned("c", "u-other"),
		{Namespace: "ci", Name: "no-uid", Owner: &fleet.Owner{Name: "d"}},
	}
	before := make([]fleet.Pod, len(pods))
	for i, p := range pods {
		before[i] = p
		if p.Owner != nil {
			o := *p.Owner
			before[i].Owner = &o
		}
	}
	page := erPage(rawER{name: "a"}.json(), rawER{name: "b"}.json(), rawER{name: "c"}.json(), rawER{name: "d"}.json(), rawER{name: "z"}.json())
	ers, _, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("", pods), nil)
	require.NoError(t, err)
	require.Len(t, ers, 5)
	same := func(a, b string) bool { return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b) }
	tests := []struct {
		er             fleet.EphemeralRunner
		pod            *fleet.Pod
		shareName, uid bool
	}{
		{er: ers[0], pod: &pods[1], shareName: true, uid: true},
		{er: ers[1], pod: &pods[2], uid: true},
		{er: ers[2], pod: &pods[4]},
		{er: ers[3], pod: &pods[5]},
		{er: ers[4], pod: &pods[0], shareName: true, uid: true},
	}
	for _, tc := range tests {
		name := strings.TrimPrefix(tc.er.UID, "u-")
		assert.Equal(t, name, tc.er.Name, "the name the list gave")
		assert.Equal(t, "u-"+name, tc.er.UID, "the UID the list gave")
		assert.Equal(t, tc.shareName, same(tc.er.Name, tc.pod.Owner.Name), "%s: name shared", name)
		assert.Equal(t, tc.uid, same(tc.er.UID, tc.pod.Owner.UID), "%s: UID shared", name)
	}
	assert.Equal(t, before, pods, "the pods are only read")
}

// TestExpectedRunners: the room given to the list is one view for each
// distinct EphemeralRunner the pods name as their owner, and none for pods
// that name nothing or another kind of owner.
func TestExpectedRunners(t *testing.T) {
	er := func(uid string) fleet.Pod {
		return fleet.Pod{Owner: &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: uid, UID: uid}}
	}
	legacy := fleet.Pod{Owner: &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: "l", UID: "l"}}
	tests := []struct {
		name string
		pods []fleet.Pod
		want int
	}{
		{name: "none", want: 0},
		{name: "one each", pods: []fleet.Pod{er("c"), er("a"), er("b")}, want: 3},
		{name: "two pods of one runner", pods: []fleet.Pod{er("a"), er("b"), er("a")}, want: 2},
		{name: "bare, legacy and UID-less owners", pods: []fleet.Pod{{}, legacy, {Owner: &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "x"}}, er("a")}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			memo := newListMemo("", tc.pods)
			assert.Equal(t, tc.want, memo.expected())
			room := memo.room()
			assert.Empty(t, room)
			assert.Equal(t, tc.want, cap(room))
			assert.Equal(t, tc.want == 0, room == nil, "no runners named is no slice, as a list of none was")
		})
	}
}

// TestViewsShareOneListOfFinalizers: runners with the same finalizers, in
// the same order, share one full slice of them; any other list is a copy
// of its own, and the decoder's slice is never kept.
func TestViewsShareOneListOfFinalizers(t *testing.T) {
	const arc, reg = "ephemeralrunner.actions.github.com/finalizer", fleet.ARCRegistrationFinalizer
	sameArray := func(a, b []string) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }
	tests := []struct {
		name  string
		a, b  []string
		share bool
	}{
		{name: "the same two", a: []string{arc, reg}, b: []string{arc, reg}, share: true},
		{name: "the same one", a: []string{arc}, b: []string{arc}, share: true},
		{name: "another order", a: []string{arc, reg}, b: []string{reg, arc}},
		{name: "one fewer", a: []string{arc, reg}, b: []string{arc}},
		{name: "another name", a: []string{arc}, b: []string{arc + "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			memo := newListMemo("", nil)
			decoded := slices.Clone(tc.a)
			a := memo.sharedFinalizers(decoded)
			// The decoder reuses its slice for the next runner.
			decoded[0] = "overwritten"
			b := memo.sharedFinalizers(slices.Clone(tc.b))
			assert.Equal(t, tc.a, a)
			assert.Equal(t, tc.b, b)
			assert.Equal(t, tc.share, sameArray(a, b), "one array for both")
			assert.Equal(t, len(a), cap(a), "full, so that an append copies")
			assert.Equal(t, len(b), cap(b), "full, so that an append copies")
		})
	}
	t.Run("none", func(t *testing.T) {
		assert.Nil(t, newListMemo("", nil).sharedFinalizers(nil))
		assert.Nil(t, newListMemo("", nil).sharedFinalizers([]string{}))
	})
	t.Run("a bounded memo", func(t *testing.T) {
		memo := newListMemo("", nil)
		for i := range maxMemoFinalizers + 5 {
			memo.sharedFinalizers([]string{fmt.Sprint(i)})
		}
		assert.Len(t, memo.finalizers, maxMemoFinalizers)
		past := []string{fmt.Sprint(maxMemoFinalizers + 1)}
		a, b := memo.sharedFinalizers(past), memo.sharedFinalizers(past)
		assert.Equal(t, past, a)
		assert.False(t, sameArray(a, b), "a list past the bound is copied each time")
	})
	t.Run("through a page", func(t *testing.T) {
		fins := `"finalizers":["` + arc + `","` + reg + `"]`
		page := erPage(rawER{name: "a", meta: fins}.json(), rawER{name: "b", meta: fins}.json(),
			rawER{name: "c", meta: `"finalizers":["` + reg + `"]`}.json())
		ers, _, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("", nil), nil)
		require.NoError(t, err)
		require.Len(t, ers, 3)
		assert.True(t, sameArray(ers[0].Finalizers, ers[1].Finalizers))
		assert.False(t, sameArray(ers[1].Finalizers, ers[2].Finalizers))
		assert.Equal(t, []string{reg}, ers[2].Finalizers)
	})
}

// TestListRequestIsTheDynamicClients: the lean list sends the request the
// dynamic client's List sent, page by page: the same path, query, Accept
// and User-Agent, over the same counted HTTP client.
func TestListRequestIsTheDynamicClients(t *testing.T) {
	type seen struct{ method, path, query, accept, agent string }
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"), r.Header.Get("User-Agent")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		cont, name := "", "r-2"
		if r.URL.Query().Get("continue") == "" {
			cont, name = "page-2", "r-1"
		}
		_, _ = fmt.Fprintf(w, `{"apiVersion":"actions.github.com/v1alpha1","items":[%s],"kind":"EphemeralRunnerList","metadata":{"continue":%q}}`,
			rawER{name: name, status: `{"phase":"Running","runnerId":7}`}.json(), cont)
	}))
	defer srv.Close()
	// take returns the requests seen since it was last called.
	take := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	c, err := New(&rest.Config{Host: srv.URL}, Options{PageSize: 3, Pages: true})
	require.NoError(t, err)
	ctx := context.Background()

	for _, namespaces := range [][]string{{"ci"}, nil} {
		ers, err := c.ListEphemeralRunners(ctx, namespaces, nil)
		require.NoError(t, err)
		assert.Len(t, ers, 2)
		lean := take()

		ns := ""
		if namespaces != nil {
			ns = namespaces[0]
		}
		opts := metav1.ListOptions{Limit: 3}
		for {
			list, err := c.dyn.Resource(ephemeralRunners).Namespace(ns).List(ctx, opts)
			require.NoError(t, err)
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
		require.Len(t, lean, 2)
		assert.Equal(t, take(), lean)
		assert.Equal(t, "application/json", lean[0].accept)
	}
	assert.Equal(t, int64(8), c.Counts().Requests, "every request counted")

	t.Run("a namespace that is no path segment is refused", func(t *testing.T) {
		before := c.Counts().Requests
		_, err := c.ListEphemeralRunners(ctx, []string{"ci/../kube-system"}, nil)
		require.ErrorContains(t, err, `list ephemeralrunners in ci/../kube-system: invalid namespace "ci/../kube-system"`)
		assert.Equal(t, before, c.Counts().Requests)
	})
}

// TestListRetriesADroppedConnection: a GET whose connection is dropped
// before any answer is sent again, as the dynamic client's Do did; a page
// cut off in its middle fails the list.
func TestListRetriesADroppedConnection(t *testing.T) {
	hijackAndClose := func(w http.ResponseWriter) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	t.Run("dropped before the answer", func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				hijackAndClose(w)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(erPage(rawER{name: "r", status: `{"phase":"Running","runnerId":7}`}.json()))
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{})
		require.NoError(t, err)
		// The test server's pages all say "next-page"; one namespace,
		// one page is all this needs.
		ers, cont, err := c.ephemeralRunnerPage(context.Background(), "ci", metav1.ListOptions{Limit: 1}, newListMemo("", nil), nil)
		require.NoError(t, err)
		assert.Equal(t, "next-page", cont)
		require.Len(t, ers, 1)
		assert.Equal(t, int64(7), ers[0].RunnerID)
		assert.Equal(t, int64(2), c.Counts().Requests)
	})
	t.Run("dropped in the middle of the page", func(t *testing.T) {
		page := erPage(rawER{name: "a"}.json(), rawER{name: "b"}.json())
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(page))
			_, _ = buf.Write(page[:len(page)/2])
			_ = buf.Flush()
		}))
		defer srv.Close()
		c, err := New(&rest.Config{Host: srv.URL}, Options{Pages: true})
		require.NoError(t, err)
		ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
		require.ErrorContains(t, err, "list ephemeralrunners in ci: read the page: unexpected EOF")
		assert.Nil(t, ers)
		assert.Equal(t, int64(1), c.Counts().Requests)
	})
}

// TestListTimesOutInTheBody: a page that stops arriving ends at the
// Client's timeout, with ErrTimeout, as every other request does.
func TestListTimesOutInTheBody(t *testing.T) {
	page := erPage(rawER{name: "a"}.json(), rawER{name: "b"}.json())
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(page[:len(page)/2])
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(&rest.Config{Host: srv.URL}, Options{Timeout: 300 * time.Millisecond, Pages: true})
	require.NoError(t, err)
	_, err = c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
	require.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "list ephemeralrunners in ci: read the page: ")
}

// arcRunnerObject is an EphemeralRunner as ARC's controllers write one
// (gha-runner-scale-set, v0.27.6's listener recording the job): ARC's
// labels and annotations, the owner EphemeralRunnerSet, both finalizers,
// the managedFields of the controller's writes, the runner pod template
// with a Docker-in-Docker sidecar, and a running runner's status.
func arcRunnerObject(i int) map[string]any {
	name := fmt.Sprintf("arc-runner-set-abcde-runner-%05d", i)
	uid := fmt.Sprintf("5f1c7a2e-3b4d-4e8f-9a0b-%012d", i)
	const ts = "2026-03-14T09:26:53Z"
	const ownerUID = "0b6f1e9c-7d2a-4c3b-8e5f-1a2b3c4d5e6f"
	labels := map[string]any{
		"actions.github.com/organization":        "acme",
		"actions.github.com/scale-set-name":      "arc-runner-set",
		"actions.github.com/scale-set-namespace": "arc-runners",
		"app.kubernetes.io/component":            "runner",
		"app.kubernetes.io/instance":             "arc-runner-set",
		"app.kubernetes.io/managed-by":           "Helm",
		"app.kubernetes.io/name":                 "arc-runner-set",
		"app.kubernetes.io/part-of":              "gha-runner-scale-set",
		"app.kubernetes.io/version":              "0.9.3",
		"helm.sh/chart":                          "gha-rs-0.9.3",
	}
	annotations := map[string]any{
		"actions.github.com/patch-id":              "1",
		"actions.github.com/runner-group-name":     "default",
		"actions.github.com/runner-scale-set-name": "arc-runner-set",
		"actions.github.com/runner-spec-hash":      "7c9d8b5f4",
		"actions.github.com/values-hash":           "4b8e0f7c1d2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c",
	}
	finalizers := []any{"ephemeralrunner.actions.github.com/finalizer", "ephemeralrunner.actions.github.com/runner-registration-finalizer"}
	const image = "ghcr.io/actions/actions-runner:2.323.0"
	env := func(pairs ...string) []any {
		var out []any
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, map[string]any{"name": pairs[i], "value": pairs[i+1]})
		}
		return out
	}
	runnerEnv := env(
		"DOCKER_HOST", "unix:///var/run/docker.sock",
		"RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "120",
		"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", "false",
		"RUNNER_ALLOW_RUNASROOT", "1",
		"ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT", "1",
		"DISABLE_RUNNER_UPDATE", "true",
		"RUNNER_GRACEFUL_STOP_TIMEOUT", "15",
		"HTTP_PROXY", "http://proxy.internal:3128",
		"NO_PROXY", "10.0.0.0/8,.svc,.cluster.local,169.254.169.254",
	)
	runnerEnv = append(runnerEnv, map[string]any{"name": "ACTIONS_RUNNER_POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"apiVersion": "v1", "fieldPath": "metadata.name"}}})
	spec := map[string]any{
		"githubConfigUrl":    "https://github.com/acme",
		"githubConfigSecret": "arc-runner-set-gha-rs-github-secret",
		"runnerScaleSetId":   1,
		"metadata":           map[string]any{"labels": labels, "annotations": annotations},
		"spec": map[string]any{
			"restartPolicy":      "Never",
			"serviceAccountName": "arc-runner-set-gha-rs-no-permission",
			"initContainers": []any{map[string]any{
				"name": "init-dind-externals", "image": image,
				"command": []any{"cp"}, "args": []any{"-r", "/home/runner/externals/.", "/home/runner/tmpDir/"},
				"volumeMounts": []any{map[string]any{"name": "dind-externals", "mountPath": "/home/runner/tmpDir"}},
			}},
			"containers": []any{
				map[string]any{
					"name": "runner", "image": image, "command": []any{"/home/runner/run.sh"},
					"env": runnerEnv,
					"resources": map[string]any{
						"limits":   map[string]any{"cpu": "2", "memory": "4Gi"},
						"requests": map[string]any{"cpu": "500m", "memory": "1Gi"},
					},
					"volumeMounts": []any{
						map[string]any{"name": "work", "mountPath": "/home/runner/_work"},
						map[string]any{"name": "dind-sock", "mountPath": "/var/run"},
					},
				},
				map[string]any{
					"name": "dind", "image": "docker:28.0.4-dind",
					"args":            []any{"dockerd", "--host=unix:///var/run/docker.sock", "--group=$(DOCKER_GROUP_GID)"},
					"env":             env("DOCKER_GROUP_GID", "123"),
					"securityContext": map[string]any{"privileged": true},
					"volumeMounts": []any{
						map[string]any{"name": "work", "mountPath": "/home/runner/_work"},
						map[string]any{"name": "dind-sock", "mountPath": "/var/run"},
						map[string]any{"name": "dind-externals", "mountPath": "/home/runner/externals"},
					},
				},
			},
			"volumes": []any{
				map[string]any{"name": "dind-sock", "emptyDir": map[string]any{}},
				map[string]any{"name": "dind-externals", "emptyDir": map[string]any{}},
				map[string]any{"name": "work", "emptyDir": map[string]any{}},
			},
		},
	}
	status := map[string]any{
		"phase":             "Running",
		"ready":             true,
		"runnerId":          100000 + i,
		"runnerName":        name,
		"jobRequestId":      7000000 + i,
		"jobRepositoryName": "acme/api",
		"workflowRunId":     9000000 + i,
		"jobDisplayName":    "build (linux, amd64)",
		"jobWorkflowRef":    "acme/api/.github/workflows/ci.yml@refs/heads/main",
	}
	metadata := map[string]any{
		"generateName": "arc-runner-set-abcde-runner-",
		"labels":       labels,
		"annotations":  annotations,
		"ownerReferences": []any{map[string]any{
			"apiVersion": fleet.EphemeralRunnerAPIVersion, "kind": "EphemeralRunnerSet", "name": "arc-runner-set-abcde",
			"uid": ownerUID, "controller": true, "blockOwnerDeletion": true,
		}},
		"finalizers": finalizers,
	}
	// What the controller wrote, as the API server tracks it.
	written := managedFieldSet(metadata)
	fins := map[string]any{".": map[string]any{}}
	for _, f := range finalizers {
		fins[fmt.Sprintf("v:%q", f)] = map[string]any{}
	}
	written["f:finalizers"] = fins
	managed := []any{
		map[string]any{
			"manager": "manager", "operation": "Update", "apiVersion": fleet.EphemeralRunnerAPIVersion, "time": ts, "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": written, "f:spec": managedFieldSet(spec)},
		},
		map[string]any{
			"manager": "manager", "operation": "Update", "apiVersion": fleet.EphemeralRunnerAPIVersion, "time": ts, "fieldsType": "FieldsV1",
			"subresource": "status", "fieldsV1": map[string]any{"f:status": managedFieldSet(status)},
		},
	}
	for k, v := range map[string]any{
		"name": name, "namespace": "arc-runners", "uid": uid, "resourceVersion": strconv.Itoa(48151623 + i),
		"generation": 1, "creationTimestamp": ts, "managedFields": managed,
	} {
		metadata[k] = v
	}
	return map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       fleet.EphemeralRunnerKind,
		"metadata":   metadata,
		"spec":       spec,
		"status":     status,
	}
}

// managedFieldSet is the set of fields of v as managedFields record it (FieldsV1),
// with the list keys ARC's CRD declares: containers, initContainers, env,
// volumes and ownerReferences by name or uid, volumeMounts by mountPath;
// other lists are atomic.
func managedFieldSet(v map[string]any) map[string]any {
	out := map[string]any{".": map[string]any{}}
	for k, val := range v {
		switch x := val.(type) {
		case map[string]any:
			out["f:"+k] = managedFieldSet(x)
		case []any:
			key := map[string]string{"containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
				"volumeMounts": "mountPath", "ownerReferences": "uid"}[k]
			if key == "" {
				out["f:"+k] = map[string]any{}
				continue
			}
			set := map[string]any{".": map[string]any{}}
			for _, e := range x {
				m := e.(map[string]any)
				id, err := json.Marshal(map[string]any{key: m[key]})
				if err != nil {
					panic(err)
				}
				set["k:"+string(id)] = managedFieldSet(m)
			}
			out["f:"+k] = set
		default:
			out["f:"+k] = map[string]any{}
		}
	}
	return out
}

// arcPage is a page of n realistic EphemeralRunners as the API server
// writes it (compact, keys sorted).
func arcPage(tb testing.TB, n int) []byte {
	tb.Helper()
	items := make([]any, n)
	for i := range items {
		items[i] = arcRunnerObject(i)
	}
	page, err := json.Marshal(map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       "EphemeralRunnerList",
		"metadata":   map[string]any{"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDgxNTE2MjN9", "resourceVersion": "48151623"},
		"items":      items,
	})
	require.NoError(tb, err)
	return page
}

// TestARCPageAgreesWithUnstructured: the benchmark's page reads the same
// both ways.
func TestARCPageAgreesWithUnstructured(t *testing.T) {
	page := arcPage(t, 20)
	want, wantCont, err := unstructuredERPage(dynamicDecoder(t), bytes.NewReader(page), "github.com", nil)
	require.NoError(t, err)
	got, cont, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("github.com", nil), nil)
	require.NoError(t, err)
	assert.Equal(t, wantCont, cont)
	assert.Equal(t, want, got)
	assert.Equal(t, &fleet.Job{Owner: "acme", Repo: "api", RunID: 9000003, Name: "build (linux, amd64)", RequestID: 7000003}, got[3].Job)
}

// BenchmarkEphemeralRunnerPage decodes a page of 500 realistic
// EphemeralRunners into views: as the dynamic client did (body read whole,
// Unstructured, getters), as ListEphemeralRunners does (read token by
// token with jsontext), and, for comparison: encoding/json's walk with
// each item decoded into nothing, its floor for any decode into a struct
// (its scanner runs twice over every byte, once to find the item's end,
// once to skip what no field wants), which ListEphemeralRunners used
// before; and json.Valid, one run of its scanner.
func BenchmarkEphemeralRunnerPage(b *testing.B) {
	const n = 500
	page := arcPage(b, n)
	dec := dynamicDecoder(b)
	run := func(name string, f func() ([]fleet.EphemeralRunner, error)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				ers, err := f()
				if err != nil {
					b.Fatal(err)
				}
				if ers != nil && len(ers) != n {
					b.Fatalf("%d views", len(ers))
				}
			}
		})
	}
	run("unstructured", func() ([]fleet.EphemeralRunner, error) {
		ers, _, err := unstructuredERPage(dec, bytes.NewReader(page), "github.com", nil)
		return ers, err
	})
	run("stream", func() ([]fleet.EphemeralRunner, error) {
		ers, _, err := readEphemeralRunnerPage(bytes.NewReader(page), newListMemo("github.com", nil), nil)
		return ers, err
	})
	run("stream-buffered-body", func() ([]fleet.EphemeralRunner, error) {
		// A body read in the transport's 4 KiB reads, as an HTTP
		// body is, rather than in one.
		ers, _, err := readEphemeralRunnerPage(bufio.NewReaderSize(halfReader{bytes.NewReader(page)}, 4096), newListMemo("github.com", nil), nil)
		return ers, err
	})
	run("scan-only", func() ([]fleet.EphemeralRunner, error) {
		// The stream's walk, each item decoded into nothing.
		dec := json.NewDecoder(bytes.NewReader(page))
		for _, want := range []any{json.Delim('{'), "apiVersion", fleet.EphemeralRunnerAPIVersion, "items", json.Delim('[')} {
			if tok, err := dec.Token(); err != nil || tok != want {
				return nil, fmt.Errorf("%v, %v: want %v", tok, err, want) //nolint:errorlint // err is nil when the token is the wrong one
			}
		}
		for dec.More() {
			var nothing struct{}
			if err := dec.Decode(&nothing); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	run("valid-only", func() ([]fleet.EphemeralRunner, error) {
		if !json.Valid(page) {
			return nil, fmt.Errorf("invalid page")
		}
		return nil, nil
	})
}

// halfReader reads at most half of what is asked, so that the
// decoder meets items cut across reads.
type halfReader struct{ r io.Reader }

func (h halfReader) Read(p []byte) (int, error) { return h.r.Read(p[:(len(p)+1)/2]) }

// An answer that is not an EphemeralRunnerList (a proxy's Status, another
// kind) is no list: read as one, with no items, every pod's runner would
// look podless.
func TestReadPageRefusesAnotherKind(t *testing.T) {
	for _, page := range []string{
		`{"kind":"Status","apiVersion":"v1","status":"Success"}`,
		`{"kind":"PodList","items":[]}`,
		`{"kind":"","items":[]}`,
		`{"items":[]}`,
	} {
		_, _, err := readEphemeralRunnerPage(strings.NewReader(page), newListMemo("", nil), nil)
		assert.Error(t, err, page)
	}
}

// Two runners under one UID are no list an API server gives: the whole
// list fails, since the classifier ties pods and runner ids by UID.
func TestListEphemeralRunnersRefusesARepeatedUID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		one := rawER{name: "r", status: `{"phase":"Running","runnerId":7}`}.json()
		_, _ = fmt.Fprintf(w, `{"apiVersion":"actions.github.com/v1alpha1","items":[%s,%s],"kind":"EphemeralRunnerList","metadata":{}}`, one, one)
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, Options{PageSize: 10, Pages: true})
	require.NoError(t, err)
	ers, err := c.ListEphemeralRunners(context.Background(), []string{"ci"}, nil)
	require.ErrorContains(t, err, `two runners under UID "u-r"`)
	assert.Nil(t, ers)
}
