package configmap

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

const ledgerName = "runner-reaper-ledger"

// TestConfigMapObjectIsReadable checks the stored object as kubectl would
// show it: labelled, marks as plain compact JSON, the list cache gzip'd.
func TestConfigMapObjectIsReadable(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	want := Sample()
	_, err := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil).Save(Ctx(t), want, "")
	require.NoError(t, err)

	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "runner-reaper", cm.Labels["app.kubernetes.io/name"])
	assert.Equal(t, "ledger", cm.Labels["app.kubernetes.io/component"])

	raw := cm.Data["marks.json"]
	require.True(t, json.Valid([]byte(raw)), "marks.json is JSON: %s", raw)
	assert.NotContains(t, raw, "\n", "marks.json is compact")
	assert.Contains(t, raw, `"verdict":"ghost"`)
	var marks map[string]fleet.Mark
	require.NoError(t, json.Unmarshal([]byte(raw), &marks))
	assert.Equal(t, want.Marks, marks)

	lists, err := state.GunzipLists(cm.BinaryData["lists.json.gz"])
	require.NoError(t, err)
	assert.Equal(t, want.Lists, lists)
}

// TestConfigMapWithoutListCache checks an empty list cache leaves no
// binaryData key, and that a list cache dropped by a later save is gone.
func TestConfigMapWithoutListCache(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	v, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	_, err = s.Save(Ctx(t), state.Ledger{Marks: Marks(2)}, v)
	require.NoError(t, err)

	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, cm.BinaryData, "lists.json.gz")
	l, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Ledger{Marks: Marks(2), Lists: map[string]state.ListCache{}}, l)
}

// TestConfigMapTrim saves ledgers over the limit and checks what was kept,
// what the warning said and what LastTrim reports.
func TestConfigMapTrim(t *testing.T) {
	env := Kube(t)
	full := state.Ledger{Marks: Marks(30), Lists: Lists(4, 30)}
	whole, marksOnly := SizeOf(t, full)

	cases := []struct {
		name         string
		limit        int
		keptMarks    int
		keptLists    int // the first scopes by key
		droppedLists int
	}{
		{"under the limit: nothing dropped, nothing said", whole, 30, 4, 0},
		{"over with the list cache: a scope's list cache goes first", whole - 1, 30, 3, 1},
		{"over without it: then the oldest marks", marksOnly - 1, 29, 0, 4},
		{"far over: only the newest marks stay", marksOnly / 3, -1, 0, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t, "ledger")
			var logs bytes.Buffer
			s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, slog.New(slog.NewJSONHandler(&logs, nil)))
			s.LimitBytes = c.limit
			_, err := s.Save(Ctx(t), full, "")
			require.NoError(t, err)

			trim := s.LastTrim()
			got, _, err := s.Load(Ctx(t))
			require.NoError(t, err)
			kept := c.keptMarks
			if kept < 0 {
				kept = len(got.Marks)
				require.Greater(t, kept, 0)
				require.Less(t, kept, 29)
			}
			assert.ElementsMatch(t, Newest(full.Marks, kept), KeysOf(got.Marks), "the newest marks are kept")
			keys := slices.Sorted(maps.Keys(full.Lists))
			want := map[string]state.ListCache{}
			for _, k := range keys[:c.keptLists] {
				want[k] = full.Lists[k]
			}
			assert.Equal(t, want, got.Lists)
			assert.Equal(t, state.Trim{DroppedLists: c.droppedLists, DroppedMarks: 30 - kept, LimitBytes: c.limit}, trim)

			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
			require.NoError(t, err)
			size := len("marks.json") + len(cm.Data["marks.json"])
			if b, ok := cm.BinaryData["lists.json.gz"]; ok {
				size += len("lists.json.gz") + len(b)
			}
			assert.LessOrEqual(t, size, c.limit)

			lines := LogLines(t, &logs)
			if !trim.Trimmed() {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1)
			assert.Equal(t, "WARN", lines[0]["level"])
			assert.Equal(t, "ledger trimmed", lines[0]["msg"])
			assert.EqualValues(t, c.droppedLists, lines[0]["dropped_lists"])
			assert.EqualValues(t, 30-kept, lines[0]["dropped_marks"])
			assert.EqualValues(t, c.limit, lines[0]["limit_bytes"])
		})
	}
}

// TestConfigMapDefaultLimitKeepsTheObjectAcceptable saves a ledger of over
// 1 MiB with the default limit: the real API server, which refuses a
// ConfigMap over 1 MiB, must accept what is saved.
func TestConfigMapDefaultLimitKeepsTheObjectAcceptable(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	big := state.Ledger{Marks: Marks(6000), Lists: Lists(3, 2000)}
	_, marksOnly := SizeOf(t, big)
	require.Greater(t, marksOnly, 1<<20)

	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	_, err := s.Save(Ctx(t), big, "")
	require.NoError(t, err)
	trim := s.LastTrim()
	assert.True(t, trim.Trimmed())
	assert.Equal(t, DefaultLimitBytes, trim.LimitBytes)
	assert.Equal(t, 3, trim.DroppedLists)

	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Len(t, got.Marks, 6000-trim.DroppedMarks)
	assert.ElementsMatch(t, Newest(big.Marks, len(got.Marks)), KeysOf(got.Marks))

	// A later ledger that fits is saved whole, and LastTrim says so.
	_, v, err := s.Load(Ctx(t))
	require.NoError(t, err)
	_, err = s.Save(Ctx(t), Sample(), v)
	require.NoError(t, err)
	assert.False(t, s.LastTrim().Trimmed())
}

// A fleet of 100,000 registrations in 1,000 scopes, through a real API
// server under the default limit: the object stays acceptable, keeps as
// many scopes' list caches as fit and says how many it dropped, and every
// mark; the size and the time of the save and the load are logged
// (docs/performance.md quotes them).
func TestConfigMapAtAHundredThousandRegistrations(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	l := state.Ledger{Marks: Marks(200), Lists: FleetLists(1000, 100)}
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	start := time.Now()
	_, err := s.Save(Ctx(t), l, "")
	saved := time.Since(start)
	require.NoError(t, err)
	trim := s.LastTrim()
	assert.Positive(t, trim.DroppedLists)
	assert.Zero(t, trim.DroppedMarks)

	start = time.Now()
	got, _, err := s.Load(Ctx(t))
	loaded := time.Since(start)
	require.NoError(t, err)
	assert.Len(t, got.Marks, 200)
	assert.Equal(t, 1000, len(got.Lists)+trim.DroppedLists)
	for k, c := range got.Lists {
		assert.Equal(t, l.Lists[k], c, k)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		size += len(k) + len(v)
	}
	assert.LessOrEqual(t, size, DefaultLimitBytes)
	t.Logf("100,000 registrations in 1,000 scopes: %d bytes stored, %d scopes' list caches kept, %d dropped; save %s, load %s",
		size, len(got.Lists), trim.DroppedLists, saved.Round(time.Millisecond), loaded.Round(time.Millisecond))
}

// TestConfigMapDeletedSinceLoadConflicts: a ledger deleted after it was
// loaded has changed under the sweep, which must not act.
func TestConfigMapDeletedSinceLoadConflicts(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	v, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	require.NoError(t, env.Client.CoreV1().ConfigMaps(ns).Delete(Ctx(t), ledgerName, metav1.DeleteOptions{}))

	_, err = s.Save(Ctx(t), Sample(), v)
	require.ErrorIs(t, err, state.ErrConflict)
}

// TestConfigMapCorruptIsAnError: marks someone edited into nonsense are an
// error to report, never an empty ledger (which would forget every mark)
// nor a conflict. (A corrupt list cache is only a cache: see
// TestConfigMapCorruptListCacheIsDropped.)
func TestConfigMapCorruptIsAnError(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	cases := []struct {
		name  string
		edit  func(data map[string]string, binary map[string][]byte)
		field string
	}{
		{"marks not JSON", func(d map[string]string, _ map[string][]byte) { d["marks.json"] = "{oops" }, "marks.json"},
		{"marks not an object", func(d map[string]string, _ map[string][]byte) { d["marks.json"] = "[1,2]" }, "marks.json"},
		{"marks not JSON, list cache corrupt too", func(d map[string]string, b map[string][]byte) {
			d["marks.json"] = "{oops"
			b["lists.json.gz"] = []byte("plain")
		}, "marks.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t, "ledger")
			s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
			_, err := s.Save(Ctx(t), Sample(), "")
			require.NoError(t, err)
			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
			require.NoError(t, err)
			c.edit(cm.Data, cm.BinaryData)
			_, err = env.Client.CoreV1().ConfigMaps(ns).Update(Ctx(t), cm, metav1.UpdateOptions{})
			require.NoError(t, err)

			_, _, err = s.Load(Ctx(t))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.field)
			assert.NotErrorIs(t, err, state.ErrConflict)
		})
	}
}

// TestConfigMapForbiddenIsNotAConflict uses a user RBAC grants nothing:
// every refusal must surface as an error that is not state.ErrConflict, or a
// sweep would take a misconfiguration for a lost race and quietly skip
// forever.
func TestConfigMapForbiddenIsNotAConflict(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	v, err := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil).Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	cfg, err := env.AddUser("ledger-nobody")
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	s := New(client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	other := New(client.CoreV1().ConfigMaps(ns), ns, "no-such-ledger", nil)

	cases := []struct {
		name string
		call func() error
	}{
		{"load", func() error { _, _, err := s.Load(Ctx(t)); return err }},
		{"load of a missing ledger", func() error { _, _, err := other.Load(Ctx(t)); return err }},
		{"create", func() error { _, err := other.Save(Ctx(t), Sample(), ""); return err }},
		{"create over an existing ledger", func() error { _, err := s.Save(Ctx(t), Sample(), ""); return err }},
		{"update", func() error { _, err := s.Save(Ctx(t), Sample(), v); return err }},
		{"update at a stale version", func() error { _, err := s.Save(Ctx(t), Sample(), "1"); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "want forbidden, got %v", err)
			assert.NotErrorIs(t, err, state.ErrConflict, "a refusal is not a lost race: %v", err)
			assert.True(t, strings.Contains(err.Error(), ns+"/"), "the error names the configmap: %v", err)
		})
	}
}

// TestConfigMapKeepsWhatOthersPut: Save changes only the reaper's own
// labels and data keys. Labels, annotations and data keys that an operator
// or another tool put on the ledger ConfigMap survive every save, whether
// the saving store loaded the object itself or not; the save counter moves
// on each save.
func TestConfigMapKeepsWhatOthersPut(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	_, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	get := func() *corev1.ConfigMap {
		cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
		require.NoError(t, err)
		return cm
	}
	cm := get()
	assert.Equal(t, "1", cm.Data["saves"])
	cm.Labels["team"] = "platform"
	delete(cm.Labels, "app.kubernetes.io/component")
	cm.Annotations = map[string]string{"note": "owned by the reaper; do not edit marks.json"}
	cm.Data["README"] = "see runner-reaper's README"
	cm.BinaryData["blob"] = []byte{1, 2, 3}
	_, err = env.Client.CoreV1().ConfigMaps(ns).Update(Ctx(t), cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.Contains(t, cm.BinaryData, state.ListsKey, "the sample ledger has a list cache")
	l, v, err := s.Load(Ctx(t))
	require.NoError(t, err)
	require.NotEmpty(t, l.Lists)
	// The base the store keeps for its next save holds what others put,
	// but neither the marks nor the list cache, which the save writes
	// afresh: the sweep would hold them to its end.
	s.mu.Lock()
	base := s.last
	s.mu.Unlock()
	assert.Equal(t, "see runner-reaper's README", base.Data["README"])
	assert.Equal(t, []byte{1, 2, 3}, base.BinaryData["blob"])
	assert.NotContains(t, base.Data, state.MarksKey)
	assert.NotContains(t, base.BinaryData, state.ListsKey)
	k, m := Mark(7)
	l.Marks[k] = m
	v, err = s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	// A store that did not load the object saves over it too.
	_, err = New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil).Save(Ctx(t), state.Ledger{Marks: Marks(1)}, v)
	require.NoError(t, err)

	cm = get()
	assert.Equal(t, "platform", cm.Labels["team"])
	assert.Equal(t, "ledger", cm.Labels["app.kubernetes.io/component"], "the reaper's own labels are put back")
	assert.Equal(t, "owned by the reaper; do not edit marks.json", cm.Annotations["note"])
	assert.Equal(t, "see runner-reaper's README", cm.Data["README"])
	assert.Equal(t, []byte{1, 2, 3}, cm.BinaryData["blob"])
	assert.NotContains(t, cm.BinaryData, "lists.json.gz", "the reaper's own keys follow the ledger")
	assert.Equal(t, "3", cm.Data["saves"])
	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Ledger{Marks: Marks(1), Lists: map[string]state.ListCache{}}, got)
}

// TestConfigMapCorruptListCacheIsDropped: lists.json.gz only saves rate
// limit. One that cannot be read is dropped with a warning naming the
// ledger and what was wrong; the marks load as they were, and the next save
// writes a cache that reads again.
func TestConfigMapCorruptListCacheIsDropped(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	cases := []struct {
		name  string
		bytes []byte
		why   string
	}{
		{"not gzip", []byte("plain"), "gzip"},
		{"gzip of something not JSON", Gzipped(t, "{oops"), "invalid character"},
		{"gzip of JSON of another shape", Gzipped(t, `[1,2,3]`), "cannot unmarshal"},
		{"gzip cut short", Gzipped(t, `{"org:acme":{"pages":[]}}`)[:12], "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t, "ledger")
			var buf bytes.Buffer
			s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, slog.New(slog.NewJSONHandler(&buf, nil)))
			_, err := s.Save(Ctx(t), Sample(), "")
			require.NoError(t, err)
			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
			require.NoError(t, err)
			cm.BinaryData["lists.json.gz"] = c.bytes
			_, err = env.Client.CoreV1().ConfigMaps(ns).Update(Ctx(t), cm, metav1.UpdateOptions{})
			require.NoError(t, err)

			l, v, err := s.Load(Ctx(t))
			require.NoError(t, err, "a corrupt cache does not block the sweep")
			assert.Equal(t, Sample().Marks, l.Marks, "the marks load as they were")
			assert.Empty(t, l.Lists, "the cache is dropped: the lists are read afresh")
			lines := LogLines(t, &buf)
			require.Len(t, lines, 1, "one warning")
			w := lines[0]
			assert.Equal(t, "WARN", w["level"])
			assert.Equal(t, "ledger list cache dropped", w["msg"])
			assert.Equal(t, ns+"/"+ledgerName, w["configmap"], "the warning names the ledger")
			assert.Equal(t, "lists.json.gz", w["field"])
			assert.Contains(t, w["error"], c.why, "the warning says what was wrong")

			l.Lists = Lists(2, 3)
			_, err = s.Save(Ctx(t), l, v)
			require.NoError(t, err)
			got, _, err := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil).Load(Ctx(t))
			require.NoError(t, err)
			assert.Equal(t, Lists(2, 3), got.Lists, "the next save writes a cache that reads")
		})
	}
}

// TestMain stops the control plane if a test started it.
func TestMain(m *testing.M) { Main(m) }

// TestConfigMapHistoryIsPlainJSON: the record of actions is the data key
// history.json, plain compact JSON as `kubectl get configmap -o
// jsonpath='{.data.history\.json}'` shows it, counted in the size limit:
// over the limit it loses its oldest records after the list cache, with a
// warning that says how many; the marks are untouched.
func TestConfigMapHistoryIsPlainJSON(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	var logs bytes.Buffer
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, slog.New(slog.NewJSONHandler(&logs, nil)))
	l := Sample()
	v, err := s.Save(Ctx(t), l, "")
	require.NoError(t, err)
	before, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, before.Data, "history.json", "no record, no key")

	l.History = History(200)
	v, err = s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	raw := cm.Data["history.json"]
	require.True(t, json.Valid([]byte(raw)), "history.json is JSON: %.200s", raw)
	assert.NotContains(t, raw, "\n", "history.json is compact")
	assert.Contains(t, raw, `"runner_name":"arc-runner-0199"`)
	assert.Contains(t, raw, `"repository":"acme/api"`)
	var h []state.Record
	require.NoError(t, json.Unmarshal([]byte(raw), &h))
	assert.Equal(t, l.History, h)
	t.Logf("200 records: history.json is %d bytes (%d a record), the ConfigMap's data %d bytes more",
		len(raw), len(raw)/200, dataSize(cm)-dataSize(before))

	// Over the limit: the oldest records beyond the floor go before any
	// list cache, where that keeps every cache (state.RecordFloor).
	withoutLists := l
	withoutLists.Lists = nil
	noLists, _ := SizeOf(t, withoutLists)
	s.LimitBytes = noLists - 1
	logs.Reset()
	_, err = s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	assert.Equal(t, state.Trim{DroppedRecords: 1, LimitBytes: noLists - 1}, s.LastTrim())
	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, l.History[1:], got.History, "the oldest record went")
	assert.Equal(t, l.Marks, got.Marks)
	assert.Equal(t, l.Lists, got.Lists, "every list cache stayed")
	cm, err = env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.LessOrEqual(t, dataSize(cm), noLists-1)
	lines := LogLines(t, &logs)
	require.Len(t, lines, 1)
	assert.Equal(t, "ledger trimmed", lines[0]["msg"])
	assert.EqualValues(t, 1, lines[0]["dropped_records"])
	assert.EqualValues(t, 0, lines[0]["dropped_lists"])
}

// dataSize is what the API server counts of a ConfigMap's data: keys and
// values.
func dataSize(cm *corev1.ConfigMap) int {
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return n
}

// TestConfigMapMostRecordsFitTheObject: the most records the reaper may be
// asked to keep, beside a list cache too large for the object, are saved
// under the default limit, and the real API server takes the object.
func TestConfigMapMostRecordsFitTheObject(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	l := state.Ledger{Marks: Marks(200), Lists: FleetLists(1000, 100), History: History(state.MaxHistory)}
	_, err := s.Save(Ctx(t), l, "")
	require.NoError(t, err, "the API server takes the object")
	trim := s.LastTrim()
	assert.Positive(t, trim.DroppedLists, "the list cache gives way first")
	assert.Zero(t, trim.DroppedRecords, "a thousand records fit beside the marks")
	assert.Zero(t, trim.DroppedMarks)
	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, l.History, got.History)
}

// TestConfigMapCorruptHistory: a history.json edited into something else
// does not stop a sweep (Load leaves it out, with a warning naming the
// ledger and what was wrong), but the history command, which asked for
// the record, is told (LoadHistory fails).
func TestConfigMapCorruptHistory(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	var logs bytes.Buffer
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, slog.New(slog.NewJSONHandler(&logs, nil)))
	l := Sample()
	l.History = History(2)
	_, err := s.Save(Ctx(t), l, "")
	require.NoError(t, err)
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["history.json"] = `{"not":"a list"}`
	_, err = env.Client.CoreV1().ConfigMaps(ns).Update(Ctx(t), cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err, "the record does not block the sweep")
	assert.Equal(t, l.Marks, got.Marks)
	assert.Empty(t, got.History)
	lines := LogLines(t, &logs)
	require.Len(t, lines, 1)
	assert.Equal(t, "ledger history dropped", lines[0]["msg"])
	assert.Equal(t, "history.json", lines[0]["field"])
	assert.Equal(t, ns+"/"+ledgerName, lines[0]["configmap"])
	assert.Contains(t, lines[0]["error"], "cannot unmarshal object")

	_, _, err = s.LoadHistory(Ctx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "history.json")
	assert.Contains(t, err.Error(), ns+"/"+ledgerName)
}

// TestConfigMapNoRecordRemovesTheKey: a save with no record (a sweep
// with REAPER_HISTORY_SIZE=0) removes history.json, which a release older
// than the record keeps but does not count in its size limit: the way
// back to one, as the runbook says.
func TestConfigMapNoRecordRemovesTheKey(t *testing.T) {
	t.Parallel()
	env := Kube(t)
	ns := env.Namespace(t, "ledger")
	s := New(env.Client.CoreV1().ConfigMaps(ns), ns, ledgerName, nil)
	l := Sample()
	l.History = History(3)
	_, err := s.Save(Ctx(t), l, "")
	require.NoError(t, err)
	l, v, err := s.Load(Ctx(t))
	require.NoError(t, err)
	require.Len(t, l.History, 3)
	l.History = nil
	_, err = s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(Ctx(t), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, cm.Data, "history.json")
	assert.Contains(t, cm.Data, "marks.json")
}
