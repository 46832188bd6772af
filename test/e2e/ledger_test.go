package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The ledger is the user's object, through the compiled binary.

// A ledger file of a shape the reaper does not know (JSON without its
// envelope, an unknown field, a newer format) is somebody's data: the sweep
// exits 1 naming the file, deletes nothing, and leaves the file byte for
// byte. It used to be read as an empty ledger and overwritten.
func TestLedgerFileOfAnotherShape(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"JSON without the envelope": `{"marks":{"pod/0000-uid":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T10:00:00Z"}}}` + "\n",
		"an unknown field":          `{"version":3,"ledger":{"marks":{}},"owner":"team-a"}`,
		"a newer format":            `{"format":7,"version":3,"ledger":{"marks":{}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ledger.json")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			w := newWorld(t, map[string]string{"REAPER_LEDGER": "file:" + path})
			w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})

			r := w.sweep()
			r.requireCode(t, 1)
			s := r.summary(t)
			assert.Contains(t, s["error"], "load ledger")
			assert.Contains(t, s["error"], path, "the error names the file")
			assert.True(t, w.podExists("acme-dead"), "nothing is deleted")
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, content, string(b), "the file is left byte for byte")
		})
	}
}

// ledgerConfigMap reads the world's ledger ConfigMap.
func (w *world) ledgerConfigMap() *corev1.ConfigMap {
	w.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
	require.NoError(w.t, err)
	return cm
}

// A corrupt lists.json.gz is only a cache: the sweep warns naming the
// ledger, lists afresh, goes on (here, reaps a terminal pod) and exits 0,
// and its save writes a cache that reads again. Corrupt marks are not a
// cache: exit 1, nothing deleted, the ConfigMap not written.
func TestLedgerCorruptListCache(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.runner("acme-healthy", "online", false)
	w.pod("acme-healthy", testenv.Running())
	w.sweep().requireCode(t, 0)
	cm := w.ledgerConfigMap()
	require.Contains(t, cm.BinaryData, "lists.json.gz", "the first sweep cached the list")

	cm.BinaryData["lists.json.gz"] = []byte("not gzip at all")
	_, err := env.Client.CoreV1().ConfigMaps(w.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})

	r := w.sweep()
	r.requireCode(t, 0)
	warns := r.msg("ledger list cache dropped")
	require.Len(t, warns, 1, "one warning; stdout:\n%s", r.Stdout)
	assert.Equal(t, "WARN", warns[0]["level"])
	assert.Equal(t, w.ns+"/"+ledgerName, warns[0]["configmap"], "the warning names the ledger")
	assert.Equal(t, "lists.json.gz", warns[0]["field"])
	assert.Contains(t, warns[0]["error"], "not gzip")
	assert.Equal(t, "deleted", r.actions(t)["acme-dead"]["result"], "the sweep went on")
	assert.False(t, w.podExists("acme-dead"))
	lists := w.requests(ghsim.EndpointList)
	require.Len(t, lists, 2)
	assert.Empty(t, lists[1].IfNoneMatch, "the list was read afresh, with no ETag from the dropped cache")

	r = w.sweep()
	r.requireCode(t, 0)
	assert.Empty(t, r.msg("ledger list cache dropped"), "the save replaced the cache with one that reads")
	lists = w.requests(ghsim.EndpointList)
	require.Len(t, lists, 3)
	assert.NotEmpty(t, lists[2].IfNoneMatch, "the new cache is used")

	// Marks are not a cache.
	cm = w.ledgerConfigMap()
	cm.Data["marks.json"] = `{"pod/0000-uid": {not json`
	cm, err = env.Client.CoreV1().ConfigMaps(w.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	w.pod("acme-dead-2", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	r = w.sweep()
	r.requireCode(t, 1)
	assert.Contains(t, r.summary(t)["error"], "marks.json")
	assert.True(t, w.podExists("acme-dead-2"), "nothing is deleted")
	assert.Equal(t, cm.ResourceVersion, w.ledgerConfigMap().ResourceVersion, "the ledger was not written")
}

// The ledger ConfigMap is the user's object too: what kubectl apply, Argo
// CD, a team's labels and a README put on it survives every sweep, and only
// the reaper's own keys change.
func TestLedgerConfigMapKeepsForeignData(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	lastApplied := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"runner-reaper-ledger","namespace":"` + w.ns + `"}}`
	_, err := env.Client.CoreV1().ConfigMaps(w.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ledgerName, Namespace: w.ns,
			Labels: map[string]string{"team": "platform", "app.kubernetes.io/part-of": "ci"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": lastApplied,
				"argocd.argoproj.io/tracking-id":                   "ci:/ConfigMap:" + w.ns + "/" + ledgerName,
			},
		},
		Data:       map[string]string{"README": "runner-reaper's ledger; see its README"},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())

	w.sweep().requireCode(t, 0) // marks the zombie
	w.sweep().requireCode(t, 0) // holds the mark

	cm := w.ledgerConfigMap()
	assert.Equal(t, "platform", cm.Labels["team"])
	assert.Equal(t, "ci", cm.Labels["app.kubernetes.io/part-of"])
	assert.Equal(t, "runner-reaper", cm.Labels["app.kubernetes.io/name"], "the reaper's own label is added")
	assert.Equal(t, lastApplied, cm.Annotations["kubectl.kubernetes.io/last-applied-configuration"])
	assert.Equal(t, "ci:/ConfigMap:"+w.ns+"/"+ledgerName, cm.Annotations["argocd.argoproj.io/tracking-id"])
	assert.Equal(t, "runner-reaper's ledger; see its README", cm.Data["README"])
	assert.Equal(t, []byte{0, 1, 2}, cm.BinaryData["blob"])
	assert.Equal(t, "2", cm.Data["saves"], "two sweeps saved")
	var marks map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(cm.Data["marks.json"]), &marks))
	assert.Len(t, marks, 1, "the zombie's mark is in the ledger")
}
