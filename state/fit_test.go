package state

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// sizeOf is the layout size of a ledger encoded whole, for choosing limits.
func sizeOf(t *testing.T, l Ledger) (withLists, marksOnly int) {
	t.Helper()
	enc, trim, err := fit(l, 1<<30)
	require.NoError(t, err)
	require.False(t, trim.Trimmed())
	return enc.size(), len(marksKey) + len(enc.marks)
}

// newest returns the keys of the n newest of ms by FirstSeen, the smaller
// key first among equals, as fit keeps them.
func newest(ms map[string]reconcile.Mark, n int) []string {
	keys := make([]string, 0, len(ms))
	for k := range ms {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := ms[keys[i]].FirstSeen, ms[keys[j]].FirstSeen
		if !a.Equal(b) {
			return a.After(b)
		}
		return keys[i] < keys[j]
	})
	return keys[:n]
}

func keysOf(ms map[string]reconcile.Mark) []string {
	keys := make([]string, 0, len(ms))
	for k := range ms {
		keys = append(keys, k)
	}
	return keys
}

func TestFit(t *testing.T) {
	full := Ledger{Marks: marks(20), Lists: lists(3, 20)}
	whole, marksOnly := sizeOf(t, full)
	require.Greater(t, whole, marksOnly)
	_, oneMark := sizeOf(t, Ledger{Marks: marks(1)})
	markSize := oneMark - len(marksKey) - len("{}") + 1 // an entry and its comma

	cases := []struct {
		name         string
		ledger       Ledger
		limit        int
		wantLists    bool
		wantMarks    int // how many of the newest marks are kept
		droppedLists int
		droppedMarks int
		wantErr      bool
	}{
		{name: "empty ledger", ledger: Ledger{}, limit: 100, wantMarks: 0},
		{name: "fits whole", ledger: full, limit: whole, wantLists: true, wantMarks: 20},
		{name: "one byte over drops the list cache only", ledger: full, limit: whole - 1, wantMarks: 20, droppedLists: 3},
		{name: "marks alone fit exactly", ledger: full, limit: marksOnly, wantMarks: 20, droppedLists: 3},
		{name: "one byte under the marks drops the oldest mark", ledger: full, limit: marksOnly - 1, wantMarks: 19, droppedLists: 3, droppedMarks: 1},
		{name: "room for five marks keeps the five newest", ledger: full, limit: len(marksKey) + len("{}") - 1 + 5*markSize, wantMarks: 5, droppedLists: 3, droppedMarks: 15},
		{name: "without a list cache only marks are dropped", ledger: Ledger{Marks: marks(20)}, limit: marksOnly - 1, wantMarks: 19, droppedMarks: 1},
		{name: "room for no mark keeps an empty object", ledger: full, limit: len(marksKey) + len("{}"), wantMarks: 0, droppedLists: 3, droppedMarks: 20},
		{name: "not even an empty ledger fits", ledger: full, limit: len(marksKey) + 1, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(c.ledger, c.limit)
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.LessOrEqual(t, enc.size(), c.limit)
			assert.Equal(t, Trim{DroppedLists: c.droppedLists, DroppedMarks: c.droppedMarks, LimitBytes: c.limit}, trim)
			assert.Equal(t, c.droppedLists > 0 || c.droppedMarks > 0, trim.Trimmed())

			var got map[string]reconcile.Mark
			require.NoError(t, json.Unmarshal(enc.marks, &got))
			assert.ElementsMatch(t, newest(normalize(c.ledger).Marks, c.wantMarks), keysOf(got))
			for k, m := range got {
				assert.Equal(t, c.ledger.Marks[k], m)
			}
			if !c.wantLists {
				assert.Nil(t, enc.lists)
				return
			}
			var lists map[string]reconcile.ListCache
			require.NoError(t, gunzipJSON(enc.lists, &lists))
			assert.Equal(t, c.ledger.Lists, lists)
		})
	}
}

// TestFitTiesBreakByKey checks that marks first seen at the same moment are
// trimmed the same way every time.
func TestFitTiesBreakByKey(t *testing.T) {
	ms := marks(10)
	for k, m := range ms {
		m.FirstSeen = epoch
		ms[k] = m
	}
	_, full := sizeOf(t, Ledger{Marks: ms})
	first, _, err := fit(Ledger{Marks: ms}, full-1)
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		again, _, err := fit(Ledger{Marks: ms}, full-1)
		require.NoError(t, err)
		require.Equal(t, string(first.marks), string(again.marks))
	}
	var got map[string]reconcile.Mark
	require.NoError(t, json.Unmarshal(first.marks, &got))
	assert.NotContains(t, got, reconcile.PodMarkKey("0000-uid-0009"), "the greatest key goes first among equals")
}

// TestFitRandom checks, over random ledgers and limits, that what fit keeps
// is under the limit, is the newest marks, and is as much as fits: one more
// mark, or the list cache, would have gone over.
func TestFitRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Keys and names with characters encoding/json escapes, so the size
	// arithmetic is tested against real escaping.
	odd := []string{"", "<", ">", "&", "\u2028", "é", `"`, `\`, "\x01"}
	for round := 0; round < 200; round++ {
		n := rng.IntN(40)
		ms := make(map[string]reconcile.Mark, n)
		for i := 0; i < n; i++ {
			o := odd[rng.IntN(len(odd))]
			ms[fmt.Sprintf("pod/%d%s", i, o)] = reconcile.Mark{
				Verdict:    reconcile.Verdicts[rng.IntN(len(reconcile.Verdicts))],
				FirstSeen:  epoch.Add(time.Duration(rng.IntN(30)) * time.Second),
				RunnerName: "r" + o + fmt.Sprint(rng.IntN(1000)),
			}
		}
		l := Ledger{Marks: ms}
		if rng.IntN(2) == 0 {
			l.Lists = lists(rng.IntN(3)+1, rng.IntN(10))
		}
		whole, _ := sizeOf(t, l)
		limit := len(marksKey) + 2 + rng.IntN(whole)
		enc, trim, err := fit(l, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, enc.size(), limit, "round %d", round)

		var kept map[string]reconcile.Mark
		require.NoError(t, json.Unmarshal(enc.marks, &kept))
		require.Len(t, kept, len(ms)-trim.DroppedMarks)
		if trim.DroppedLists > 0 {
			require.Greater(t, whole, limit, "round %d: list cache dropped needlessly", round)
		}
		if trim.DroppedMarks == 0 {
			continue
		}
		// Every kept mark is at least as new as every dropped one.
		oldestKept, newestDropped := time.Time{}, time.Time{}
		for k, m := range ms {
			if _, ok := kept[k]; ok {
				if oldestKept.IsZero() || m.FirstSeen.Before(oldestKept) {
					oldestKept = m.FirstSeen
				}
			} else if m.FirstSeen.After(newestDropped) {
				newestDropped = m.FirstSeen
			}
		}
		if len(kept) > 0 {
			require.False(t, oldestKept.Before(newestDropped), "round %d: an older mark kept over a newer one", round)
		}
		// Keeping the next mark as well would not have fitted.
		sorted := newest(ms, len(ms))
		plus := map[string]reconcile.Mark{}
		for k, m := range kept {
			plus[k] = m
		}
		for _, k := range sorted {
			if _, ok := kept[k]; !ok {
				plus[k] = ms[k]
				break
			}
		}
		b, err := json.Marshal(plus)
		require.NoError(t, err)
		require.Greater(t, len(marksKey)+len(b), limit, "round %d: dropped a mark that fitted", round)
	}
}

func TestGzipJSONRoundTrip(t *testing.T) {
	want := lists(4, 50)
	b, err := gzipJSON(want)
	require.NoError(t, err)
	again, err := gzipJSON(want)
	require.NoError(t, err)
	assert.Equal(t, b, again, "the same cache encodes to the same bytes")
	var got map[string]reconcile.ListCache
	require.NoError(t, gunzipJSON(b, &got))
	assert.Equal(t, want, got)
	require.Error(t, gunzipJSON([]byte("not gzip"), &got))
}
