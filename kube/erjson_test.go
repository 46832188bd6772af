package kube

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// FuzzReadPageAgreesWithUnstructured: whatever page the lean decoder
// accepts, the dynamic client's decoder accepted too, and read into the
// same views and continue token; so no body a server can send makes the
// reaper see an EphemeralRunner other than the dynamic client saw it.
// (The lean decoder may refuse more: a list of another kind.)
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
		got, gotCont, err := readEphemeralRunnerPage(bytes.NewReader([]byte(page)), newScopeKeys("github.com"), nil)
		if err != nil {
			return
		}
		want, wantCont, wantErr := unstructuredERPage(dec, bytes.NewReader([]byte(page)), "github.com", nil)
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
		v.CreatedAt = time.Time{}
	}
	return v
}
