package state_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

// fit is state.Fit at exactly limit bytes.
func fit(l state.Ledger, limit int) (state.Encoded, state.Trim, error) {
	return state.Fit(l, limit, limit, "test ledger")
}

func TestFit(t *testing.T) {
	full := state.Ledger{Marks: Marks(20), Lists: Lists(3, 20)}
	whole, marksOnly := SizeOf(t, full)
	require.Greater(t, whole, marksOnly)
	_, oneMark := SizeOf(t, state.Ledger{Marks: Marks(1)})
	markSize := oneMark - len(state.MarksKey) - len("{}") + 1 // an entry and its comma

	cases := []struct {
		name         string
		ledger       state.Ledger
		limit        int
		keptLists    int // how many scopes' caches are kept, the first by key
		wantMarks    int // how many of the newest marks are kept
		droppedLists int
		droppedMarks int
		wantErr      bool
	}{
		{name: "empty ledger", ledger: state.Ledger{}, limit: 100, wantMarks: 0},
		{name: "fits whole", ledger: full, limit: whole, keptLists: 3, wantMarks: 20},
		{name: "one byte over drops one scope's list cache only", ledger: full, limit: whole - 1, keptLists: 2, wantMarks: 20, droppedLists: 1},
		{name: "marks alone fit exactly", ledger: full, limit: marksOnly, wantMarks: 20, droppedLists: 3},
		{name: "one byte under the marks drops the oldest mark", ledger: full, limit: marksOnly - 1, wantMarks: 19, droppedLists: 3, droppedMarks: 1},
		{name: "room for five marks keeps the five newest", ledger: full, limit: len(state.MarksKey) + len("{}") - 1 + 5*markSize, wantMarks: 5, droppedLists: 3, droppedMarks: 15},
		{name: "without a list cache only marks are dropped", ledger: state.Ledger{Marks: Marks(20)}, limit: marksOnly - 1, wantMarks: 19, droppedMarks: 1},
		{name: "room for no mark keeps an empty object", ledger: full, limit: len(state.MarksKey) + len("{}"), wantMarks: 0, droppedLists: 3, droppedMarks: 20},
		{name: "not even an empty ledger fits", ledger: full, limit: len(state.MarksKey) + 1, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(c.ledger, c.limit)
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.LessOrEqual(t, Size(enc), c.limit)
			assert.Equal(t, state.Trim{DroppedLists: c.droppedLists, DroppedMarks: c.droppedMarks, LimitBytes: c.limit}, trim)
			assert.Equal(t, c.droppedLists > 0 || c.droppedMarks > 0, trim.Trimmed())

			var got map[string]fleet.Mark
			require.NoError(t, json.Unmarshal(enc.Marks, &got))
			assert.ElementsMatch(t, Newest(state.Normalize(c.ledger).Marks, c.wantMarks), KeysOf(got))
			for k, m := range got {
				assert.Equal(t, c.ledger.Marks[k], m)
			}
			if c.keptLists == 0 {
				assert.Nil(t, enc.Lists)
				return
			}
			lists, err := state.GunzipLists(enc.Lists)
			require.NoError(t, err)
			keys := slices.Sorted(maps.Keys(c.ledger.Lists))
			want := map[string]state.ListCache{}
			for _, k := range keys[:c.keptLists] {
				want[k] = c.ledger.Lists[k]
			}
			assert.Equal(t, want, lists)
		})
	}
}

// The streaks only feed alerts: a ledger over its limit loses its list
// cache first, then its streaks, and only then a mark. Thousands of failing
// scopes can make the streaks large; they never cost a confirmation.
func TestFitDropsStreaksBeforeMarks(t *testing.T) {
	skips := map[string]int{}
	for i := range 200 {
		skips[fmt.Sprintf("org:acme-%03d", i)] = 12
	}
	l := state.Ledger{Marks: Marks(20), Lists: Lists(3, 20), Streaks: state.Streaks{Skips: skips, Bound: 3}}
	_, marksOnly := SizeOf(t, state.Ledger{Marks: Marks(20)})
	whole, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: l.Streaks})

	enc, trim, err := fit(l, whole)
	require.NoError(t, err)
	assert.Equal(t, state.Trim{DroppedLists: 3, LimitBytes: whole}, trim, "the list cache goes first")
	assert.Equal(t, l.Streaks, state.DecodeStreaks(enc.Streaks))

	enc, trim, err = fit(l, marksOnly)
	require.NoError(t, err)
	assert.Equal(t, state.Trim{DroppedLists: 3, DroppedStreaks: true, LimitBytes: marksOnly}, trim, "then the streaks, and no mark")
	assert.Empty(t, enc.Streaks)
	assert.True(t, trim.Trimmed())
	assert.LessOrEqual(t, Size(enc), marksOnly)
}

// The record of actions feeds no decision: a ledger over its limit loses
// its list cache first, then its oldest records, as few as it must, then
// its streaks, and only then a mark. What is kept of the record is its
// newest part, in order.
func TestFitDropsRecordsAfterListsBeforeStreaksAndMarks(t *testing.T) {
	skips := map[string]int{}
	for i := range 20 {
		skips[fmt.Sprintf("org:acme-%03d", i)] = 4
	}
	streaks := state.Streaks{Skips: skips, Bound: 2}
	history := History(state.RecordFloor) // no more than the floor: the lists go first
	l := state.Ledger{Marks: Marks(20), Lists: Lists(3, 20), Streaks: streaks, History: history}
	whole, _ := SizeOf(t, l)
	noLists, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: streaks, History: history})
	noRecords, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: streaks})
	lastRecord, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: streaks, History: history[state.RecordFloor-1:]})
	_, marksOnly := SizeOf(t, state.Ledger{Marks: Marks(20)})

	n := state.RecordFloor
	cases := []struct {
		name    string
		limit   int
		records int // how many of the newest records are kept
		trim    state.Trim
	}{
		{"fits whole", whole, n, state.Trim{}},
		{"a byte over drops a scope's list cache, no record", whole - 1, n, state.Trim{DroppedLists: 1}},
		{"without the list cache the record fits whole", noLists, n, state.Trim{DroppedLists: 3}},
		{"a byte under that drops the oldest record only", noLists - 1, n - 1, state.Trim{DroppedLists: 3, DroppedRecords: 1}},
		{"room for the newest record keeps it", lastRecord, 1, state.Trim{DroppedLists: 3, DroppedRecords: n - 1}},
		{"room for no record keeps the streaks", noRecords, 0, state.Trim{DroppedLists: 3, DroppedRecords: n}},
		{"then the streaks go, and no mark", marksOnly, 0, state.Trim{DroppedLists: 3, DroppedRecords: n, DroppedStreaks: true}},
		{"and only then the oldest mark", marksOnly - 1, 0, state.Trim{DroppedLists: 3, DroppedRecords: n, DroppedStreaks: true, DroppedMarks: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(l, c.limit)
			require.NoError(t, err)
			assert.LessOrEqual(t, Size(enc), c.limit)
			c.trim.LimitBytes = c.limit
			assert.Equal(t, c.trim, trim)
			assert.Equal(t, c.trim.DroppedLists+c.trim.DroppedRecords+c.trim.DroppedMarks > 0 || c.trim.DroppedStreaks, trim.Trimmed())
			h, err := state.DecodeHistory(enc.History)
			require.NoError(t, err)
			if c.records == 0 {
				assert.Empty(t, enc.History, "no record, no key")
				return
			}
			assert.Equal(t, history[n-c.records:], h, "the newest records, oldest first")
			assert.Equal(t, streaks, state.DecodeStreaks(enc.Streaks), "the streaks outlive every record")
		})
	}
}

// TestFitDropsRecordsBeyondTheFloorBeforeLists: a list cache dropped costs
// rate limit on every sweep while the ledger stays full, so the records
// beyond the newest RecordFloor go before any scope's cache where that
// keeps every cache, and the room the caches leave comes back to the
// newest of them; where it would not, the record stays.
func TestFitDropsRecordsBeyondTheFloorBeforeLists(t *testing.T) {
	history := History(5 * state.RecordFloor)
	l := state.Ledger{Marks: Marks(20), Lists: Lists(3, 20), History: history}
	whole, _ := SizeOf(t, l)
	floorAndLists, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Lists: Lists(3, 20), History: history[len(history)-state.RecordFloor:]})
	for _, c := range []struct {
		name       string
		limit      int
		lists      int // list caches dropped; -1 some
		minRecords int // at least this many of the newest records kept
		maxRecords int
	}{
		{"a byte over drops the oldest record, no list cache", whole - 1, 0, len(history) - 1, len(history) - 1},
		{"room for the floor and the caches keeps every cache", floorAndLists, 0, state.RecordFloor, state.RecordFloor},
		{"where not even the floor keeps every cache, the caches go first, as without the floor", floorAndLists - 1, -1, -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(l, c.limit)
			require.NoError(t, err)
			assert.LessOrEqual(t, Size(enc), c.limit)
			if c.lists < 0 {
				assert.Positive(t, trim.DroppedLists)
			} else {
				assert.Equal(t, c.lists, trim.DroppedLists)
			}
			h, err := state.DecodeHistory(enc.History)
			require.NoError(t, err)
			if c.minRecords < 0 {
				// The order without the floor: lists, then records.
				noLists := l
				noLists.Lists = nil
				want, _, err := fit(noLists, c.limit)
				require.NoError(t, err)
				assert.Equal(t, want.History, enc.History)
				return
			}
			assert.GreaterOrEqual(t, len(h), c.minRecords)
			assert.LessOrEqual(t, len(h), c.maxRecords)
			assert.Equal(t, len(history)-len(h), trim.DroppedRecords)
			assert.Equal(t, history[len(history)-len(h):], h, "the newest records, oldest first")
			assert.Zero(t, trim.DroppedMarks)
		})
	}
}

// TestFitTiesBreakByKey checks that marks first seen at the same moment are
// trimmed the same way every time.
func TestFitTiesBreakByKey(t *testing.T) {
	ms := Marks(10)
	for k, m := range ms {
		m.FirstSeen = Epoch
		ms[k] = m
	}
	_, full := SizeOf(t, state.Ledger{Marks: ms})
	first, _, err := fit(state.Ledger{Marks: ms}, full-1)
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		again, _, err := fit(state.Ledger{Marks: ms}, full-1)
		require.NoError(t, err)
		require.Equal(t, string(first.Marks), string(again.Marks))
	}
	var got map[string]fleet.Mark
	require.NoError(t, json.Unmarshal(first.Marks, &got))
	assert.NotContains(t, got, fleet.PodMarkKey("0000-uid-0009"), "the greatest key goes first among equals")
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
		ms := make(map[string]fleet.Mark, n)
		for i := 0; i < n; i++ {
			o := odd[rng.IntN(len(odd))]
			ms[fmt.Sprintf("pod/%d%s", i, o)] = fleet.Mark{
				Verdict:    fleet.Verdicts[rng.IntN(len(fleet.Verdicts))],
				FirstSeen:  Epoch.Add(time.Duration(rng.IntN(30)) * time.Second),
				RunnerName: "r" + o + fmt.Sprint(rng.IntN(1000)),
			}
		}
		l := state.Ledger{Marks: ms}
		if rng.IntN(2) == 0 {
			l.Lists = Lists(rng.IntN(3)+1, rng.IntN(10))
		}
		whole, _ := SizeOf(t, l)
		limit := len(state.MarksKey) + 2 + rng.IntN(whole)
		enc, trim, err := fit(l, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, Size(enc), limit, "round %d", round)

		var kept map[string]fleet.Mark
		require.NoError(t, json.Unmarshal(enc.Marks, &kept))
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
		sorted := Newest(ms, len(ms))
		plus := map[string]fleet.Mark{}
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
		require.Greater(t, len(state.MarksKey)+len(b), limit, "round %d: dropped a mark that fitted", round)
	}
}

// TestFitListCacheRoundTrip: the list cache Fit gzip's reads back whole
// through GunzipJSON, the same cache always encodes to the same bytes (so an
// unchanged cache writes nothing new), and GunzipJSON refuses what is not
// gzip.
func TestFitListCacheRoundTrip(t *testing.T) {
	want := state.Ledger{Lists: Lists(4, 50)}
	enc, _, err := fit(want, 1<<30)
	require.NoError(t, err)
	again, _, err := fit(want, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, enc.Lists, again.Lists, "the same cache encodes to the same bytes")
	got, err := state.GunzipLists(enc.Lists)
	require.NoError(t, err)
	assert.Equal(t, want.Lists, got)
	_, err = state.GunzipLists([]byte("not gzip"))
	require.Error(t, err)
}

// TestFitDefaultLimit: a backend's LimitBytes left zero fits to the
// backend's default, and the error names the ledger.
func TestFitDefaultLimit(t *testing.T) {
	full := state.Ledger{Marks: Marks(20)}
	_, whole := SizeOf(t, full)
	_, trim, err := state.Fit(full, 0, whole-1, "test ledger")
	require.NoError(t, err)
	assert.Equal(t, state.Trim{DroppedMarks: 1, LimitBytes: whole - 1}, trim)
	_, trim, err = state.Fit(full, whole, 1, "test ledger")
	require.NoError(t, err)
	assert.False(t, trim.Trimmed(), "a positive limit wins over the default")
	_, _, err = state.Fit(full, 0, 1, "test ledger")
	require.ErrorContains(t, err, "fit test ledger: ")
}

// A fleet of 100,000 runners in 1,000 scopes has a list cache several
// times the 1 MiB a ConfigMap holds: the ledger keeps as many scopes'
// caches as fit, in key order, drops the rest and says how many, and
// keeps every mark.
func TestFitKeepsTheListsThatFit(t *testing.T) {
	lists := FleetLists(1000, 100)
	const limit = 1000 << 10
	l := state.Ledger{Marks: Marks(20), Lists: lists}
	start := time.Now()
	enc, trim, err := fit(l, limit)
	took := time.Since(start)
	require.NoError(t, err)
	assert.LessOrEqual(t, Size(enc), limit)
	require.NotNil(t, enc.Lists)
	kept, err := state.GunzipLists(enc.Lists)
	require.NoError(t, err)
	assert.Positive(t, trim.DroppedLists)
	assert.Equal(t, 1000, len(kept)+trim.DroppedLists)
	assert.Zero(t, trim.DroppedMarks)
	keys := slices.Sorted(maps.Keys(lists))
	assert.Equal(t, keys[:len(kept)], slices.Sorted(maps.Keys(kept)), "the first scopes by key")
	// Most of the room goes to lists: a keep far below what fits would
	// cost rate limit for nothing.
	assert.Greater(t, Size(enc), limit*8/10)
	t.Logf("100,000 registrations in 1,000 scopes: kept %d scopes' caches (%d bytes gzip'd), dropped %d; fit took %s", len(kept), len(enc.Lists), trim.DroppedLists, took)
}

// TestFitListsAreWhatTheEncoderWrote: the list cache is written a scope at
// a time, and its bytes, compressed and not, are those json.Encoder wrote
// for the whole map: keys in their raw order, HTML characters, invalid
// UTF-8 and the empty key included.
func TestFitListsAreWhatTheEncoderWrote(t *testing.T) {
	odd := map[string]state.ListCache{
		`org:<a&b>`: {Pages: []state.CachedPage{{ETag: `W/"<&>"`, TotalCount: 2, Runners: []fleet.Registration{
			{ID: 1, Name: "ünïcode\u2028\"quoted\"\\", Busy: true, Labels: []string{"<script>"}},
			{ID: 2, Name: "tab\there\x01", Online: true},
		}, NextPage: 2}, {Runners: []fleet.Registration{}}}, Label: "team&x"},
		"ent:z": {},
		"org:a": {Pages: []state.CachedPage{{ETag: `"1"`}}},
		"repo:": {Pages: nil},
		// Sorted raw, "org:<x" comes before "org:A"; sorted as encoded
		// ("org:\u003cx") it would come after.
		"org:<x":       {},
		"org:A":        {},
		"":             {},
		"org:\xff\xfe": {Label: "\xed\xa0\x80"},
	}
	tests := []struct {
		name  string
		lists map[string]state.ListCache
	}{
		{"odd keys and names", odd},
		{"a fleet", FleetLists(20, 100)},
		{"one large scope", FleetLists(1, 3000)},
		{"one scope", Lists(1, 3)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var plain, zipped bytes.Buffer
			require.NoError(t, json.NewEncoder(&plain).Encode(tc.lists))
			zw := gzip.NewWriter(&zipped)
			require.NoError(t, json.NewEncoder(zw).Encode(tc.lists))
			require.NoError(t, zw.Close())

			enc, trim, err := fit(state.Ledger{Lists: tc.lists}, 1<<30)
			require.NoError(t, err)
			require.Zero(t, trim.DroppedLists)
			zr, err := gzip.NewReader(bytes.NewReader(enc.Lists))
			require.NoError(t, err)
			got, err := io.ReadAll(zr)
			require.NoError(t, err)
			assert.Equal(t, plain.String(), string(got))
			assert.Equal(t, zipped.Bytes(), enc.Lists, "compressed alike too")
		})
	}
}

// TestGunzipLists: the cache is read a scope at a time as encoding/json
// read it whole: leniently (a field this release does not know is
// ignored), null as no cache, and what is not a cache refused.
func TestGunzipLists(t *testing.T) {
	cases := []struct {
		name, json string
		err        string
	}{
		{"a cache", `{"org:a":{"trimmed":[{"etag":"e","total":1,"runners":[{"i":7,"n":"r"}]}],"label":"l"}}` + "\n", ""},
		{"empty", "{}\n", ""},
		{"null", "null\n", ""},
		{"a field it does not know", `{"org:a":{"trimmed":[],"pages":[1]}}`, ""},
		{"a scope twice", `{"org:a":{"label":"x"},"org:a":{"trimmed":[]}}`, ""},
		{"an array", `[1]`, "cannot unmarshal array"},
		{"a scope of another shape", `{"org:a":[]}`, "cannot unmarshal array"},
		{"cut short", `{"org:a":{"trimmed":[]}`, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, err := zw.Write([]byte(c.json))
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			got, err := state.GunzipLists(buf.Bytes())
			var want map[string]state.ListCache
			wantErr := json.Unmarshal([]byte(c.json), &want)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				assert.Nil(t, got)
				assert.Error(t, wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, wantErr)
			assert.Equal(t, want, got)
		})
	}
	_, err := state.GunzipLists([]byte("not gzip"))
	assert.ErrorContains(t, err, "not gzip")
}

// The reap-loop window feeds only a back-off: a ledger over its limit
// loses its list cache, its records and its streaks first, then the
// window, a group at a time, and only then a mark.
func TestFitDropsLoopsAfterStreaksBeforeMarks(t *testing.T) {
	streaks := state.Streaks{Bound: 2}
	history := History(3)
	loops := Loops(4, 5)
	l := state.Ledger{Marks: Marks(20), Lists: Lists(2, 10), Streaks: streaks, History: history, Loops: loops}
	whole, _ := SizeOf(t, l)
	noLists, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: streaks, History: history, Loops: loops})
	noRecords, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Streaks: streaks, Loops: loops})
	noStreaks, _ := SizeOf(t, state.Ledger{Marks: Marks(20), Loops: loops})
	_, marksOnly := SizeOf(t, state.Ledger{Marks: Marks(20)})
	noLoops, _ := SizeOf(t, state.Ledger{Marks: Marks(20)})

	cases := []struct {
		name      string
		limit     int
		keptLoops bool
		trim      state.Trim
	}{
		{"fits whole", whole, true, state.Trim{}},
		{"the list cache goes first", noLists, true, state.Trim{DroppedLists: 2}},
		{"then the records", noRecords, true, state.Trim{DroppedLists: 2, DroppedRecords: 3}},
		{"then the streaks", noStreaks, true, state.Trim{DroppedLists: 2, DroppedRecords: 3, DroppedStreaks: true}},
		{"then the window, a group at a time, and no mark", noLoops + 1, false, state.Trim{DroppedLists: 2, DroppedRecords: 3, DroppedStreaks: true, DroppedLoops: 4}},
		{"the marks alone fit", marksOnly, false, state.Trim{DroppedLists: 2, DroppedRecords: 3, DroppedStreaks: true, DroppedLoops: 4}},
		{"and only then a mark", marksOnly - 1, false, state.Trim{DroppedLists: 2, DroppedRecords: 3, DroppedStreaks: true, DroppedLoops: 4, DroppedMarks: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(l, c.limit)
			require.NoError(t, err)
			assert.LessOrEqual(t, Size(enc), c.limit)
			c.trim.LimitBytes = c.limit
			assert.Equal(t, c.trim, trim)
			got, err := state.DecodeLoops(enc.Loops)
			require.NoError(t, err)
			if c.keptLoops {
				assert.Equal(t, loops, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

// A window short of room loses its groups acted on longest ago first, each
// group whole, and keeps as many of the latest as fit.
func TestFitTrimsTheLoopWindowByGroupOldestFirst(t *testing.T) {
	at := func(min int) time.Time { return Epoch.Add(time.Duration(min) * time.Minute) }
	group := func(newest int) []state.LoopEntry {
		es := make([]state.LoopEntry, 6)
		for i := range es {
			es[i] = state.LoopEntry{At: at(newest - 5 + i), Fingerprint: "outdated", Verdict: "terminal"}
		}
		return es
	}
	w := map[string][]state.LoopEntry{
		"ReplicaSet ci/oldest": group(10), "ReplicaSet ci/old": group(20),
		"ReplicaSet ci/new": group(30), "ReplicaSet ci/newest": group(40),
	}
	pick := func(keys ...string) map[string][]state.LoopEntry {
		out := map[string][]state.LoopEntry{}
		for _, k := range keys {
			out[k] = w[k]
		}
		return out
	}
	marks := Marks(20)
	size := func(loops map[string][]state.LoopEntry) int {
		n, _ := SizeOf(t, state.Ledger{Marks: marks, Loops: loops})
		return n
	}
	cases := []struct {
		name  string
		limit int
		want  map[string][]state.LoopEntry
	}{
		{"all fit", size(w), w},
		{"a byte short: the oldest group goes", size(w) - 1, pick("ReplicaSet ci/old", "ReplicaSet ci/new", "ReplicaSet ci/newest")},
		{"room for three exactly", size(pick("ReplicaSet ci/old", "ReplicaSet ci/new", "ReplicaSet ci/newest")), pick("ReplicaSet ci/old", "ReplicaSet ci/new", "ReplicaSet ci/newest")},
		{"room for two", size(pick("ReplicaSet ci/new", "ReplicaSet ci/newest")), pick("ReplicaSet ci/new", "ReplicaSet ci/newest")},
		{"room for one", size(pick("ReplicaSet ci/newest")), pick("ReplicaSet ci/newest")},
		{"room for none", size(pick("ReplicaSet ci/newest")) - 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, trim, err := fit(state.Ledger{Marks: marks, Loops: w}, c.limit)
			require.NoError(t, err)
			assert.LessOrEqual(t, Size(enc), c.limit)
			got, err := state.DecodeLoops(enc.Loops)
			require.NoError(t, err)
			if c.want == nil {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, c.want, got)
			}
			assert.Equal(t, len(w)-len(c.want), trim.DroppedLoops)
			assert.Zero(t, trim.DroppedMarks)
		})
	}
}
