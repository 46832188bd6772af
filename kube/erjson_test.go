package kube

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// FuzzReadPageAgreesWithUnstructured: whatever page the lean decoder
// accepts, the dynamic client's decoder accepted too, and read into the
// same views and continue token; so no body a server can send makes the
// reaper see an EphemeralRunner other than the dynamic client saw it.
// (The lean decoder may refuse more: a list of another kind. It refuses
// less in one way: see the number beyond a float64 below.)
func FuzzReadPageAgreesWithUnstructured(f *testing.F) {
	arc, err := json.Marshal(arcRunnerObject(3))
	require.NoError(f, err)
	for _, page := range []string{
		string(erPage(string(arc))),
		string(erPage(rawER{name: "a", meta: `"deletionTimestamp":"2026-03-14T10:00:00Z","finalizers":["x","y"]`, status: `{"phase":"Running","runnerId":7}`}.json())),
		string(erPage(rawER{name: "b", status: `{"phase":"Failed","jobRequestId":991,"jobRepositoryName":"acme/api","workflowRunId":4242,"jobId":"77","runnerId":1e3}`}.json())),
		string(erPage(rawER{name: "c", spec: `{"githubConfigUrl":"https://github.com/enterprises/big"}`, meta: `"name":"c2","finalizers":["a",5]`}.json())),
		`{"kind":"EphemeralRunnerList","items":[{"metadata":{"name":"n\u0061me","uid":"u"},"status":{"phase":"Running"},"status":{"runnerId":5}}],"metadata":{"continue":"c"}}`,
		`{"kind":"EphemeralRunnerList","items":[{"Metadata":{"name":"x"},"metadata":5,"spec":{"GithubConfigUrl":"https://github.com/a"}}]}`,
		`{"kind":"EphemeralRunnerList","items":[null,{}],"items":[{"metadata":{"creationTimestamp":"0001-01-01T00:00:00Z","finalizers":null}}]}`,
	} {
		f.Add(page)
	}
	dec := dynamicDecoder(f)
	f.Fuzz(func(t *testing.T, page string) {
		got, gotCont, err := readEphemeralRunnerPage(bytes.NewReader([]byte(page)), newListMemo("github.com", nil), nil)
		if err != nil {
			return
		}
		want, wantCont, wantErr := unstructuredERPage(dec, bytes.NewReader([]byte(page)), "github.com", nil)
		if wantErr != nil && strings.Contains(wantErr.Error(), "cannot unmarshal number") {
			// A number beyond a float64 (1e400), valid JSON that the
			// dynamic client refused and no API server stores: the
			// lean decoder checks only the syntax of what it skips,
			// and reads such a runner id as none, as encoding/json
			// did before it.
			return
		}
		require.NoError(t, wantErr, "the lean decoder read a page the dynamic client refused")
		assert.Equal(t, wantCont, gotCont)
		require.Len(t, got, len(want))
		for i := range want {
			assert.Equal(t, normalUnstructuredView(want[i]), got[i], "item %d", i)
		}
	})
}

// normalUnstructuredView is the view Unstructured gave, with the
// differences the lean decoder makes on purpose, none of which the
// classifier can tell: no finalizers are nil rather than empty, a runner
// id below 1 is none (GitHub's ids are positive), and a zero time is the
// zero time.Time whatever its location.
func normalUnstructuredView(v fleet.EphemeralRunner) fleet.EphemeralRunner {
	if len(v.Finalizers) == 0 {
		v.Finalizers = nil
	}
	v.RunnerID = max(v.RunnerID, 0)
	if v.CreatedAt.IsZero() {
		v.CreatedAt = fleet.Stamp{}
	}
	return v
}

// TestAValueTooLargeForAnEphemeralRunnerFailsTheRead: a page or a
// watch-list that streams one value larger than any EphemeralRunner (an
// endless string) fails once the decoder holds that much, rather than
// growing its buffer until the kernel kills the reaper; values up to the
// bound are read.
func TestAValueTooLargeForAnEphemeralRunnerFailsTheRead(t *testing.T) {
	withMessage := func(n int) string {
		return rawER{name: "r", status: `{"phase":"Running","message":"` + strings.Repeat("x", n) + `"}`}.json()
	}
	big := maxERValue + 1024
	t.Run("page", func(t *testing.T) {
		ers, _, err := readEphemeralRunnerPage(strings.NewReader(string(erPage(withMessage(maxERValue/2)))), newListMemo("", nil), nil)
		require.NoError(t, err)
		require.Len(t, ers, 1)
		assert.Len(t, ers[0].Message(), maxERValue/2)
		_, _, err = readEphemeralRunnerPage(strings.NewReader(string(erPage(withMessage(big)))), newListMemo("", nil), nil)
		require.ErrorContains(t, err, "more than any EphemeralRunner")
	})
	t.Run("watch", func(t *testing.T) {
		end := erEvent("BOOKMARK", erBookmarkJSON(true))
		ers, err := readEphemeralRunnerWatch(strings.NewReader(erEvent("ADDED", withMessage(maxERValue/2))+end), newListMemo("", nil), nil)
		require.NoError(t, err)
		require.Len(t, ers, 1)
		_, err = readEphemeralRunnerWatch(strings.NewReader(erEvent("ADDED", withMessage(big))+end), newListMemo("", nil), nil)
		require.ErrorContains(t, err, "more than any EphemeralRunner")
		// An object before its type is held whole: bounded too.
		_, err = readEphemeralRunnerWatch(strings.NewReader(`{"object":`+withMessage(big)+`,"type":"ADDED"}`+end), newListMemo("", nil), nil)
		require.ErrorContains(t, err, "more than any EphemeralRunner")
	})
}
