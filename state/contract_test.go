package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/state/dynamo"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/state/memory"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

// ledgerTable is the DynamoDB table the contract's ledgers share, each at a
// key of its own: the test's name.
const ledgerTable = "runner-reaper-ledger"

// backend makes a fresh, empty ledger and returns a way to open state.Store values
// on it. Each open is a separate value on the same ledger, as two sweeps in
// two processes would hold.
type backend struct {
	name  string
	fresh func(t *testing.T) (open func() state.Store)
}

// backends lists every backend. The configmap and dynamodb ones start their
// server on first use, and skip in -short mode.
func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T) func() state.Store {
			m := memory.New()
			return func() state.Store { return m }
		}},
		{"file", func(t *testing.T) func() state.Store {
			path := filepath.Join(t.TempDir(), "ledger.json")
			return func() state.Store { return file.New(path) }
		}},
		{"configmap", func(t *testing.T) func() state.Store {
			env := Kube(t)
			ns := env.Namespace(t, "ledger")
			return func() state.Store {
				return configmap.New(env.Client.CoreV1().ConfigMaps(ns), ns, "runner-reaper-ledger", nil)
			}
		}},
		{"dynamodb", func(t *testing.T) func() state.Store {
			d := Dynalite(t, LedgerTable(ledgerTable))
			key := t.Name()
			return func() state.Store { return dynamo.New(d.Client, ledgerTable, key, nil) }
		}},
	}
}

// TestStoreContract runs the promises of state.Store against every backend.
func TestStoreContract(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, open func() state.Store)
	}{
		{"missing ledger loads empty at version empty", contractMissing},
		{"create then load round-trips", contractRoundTrip},
		{"update from the loaded version", contractUpdate},
		{"second saver from the same version conflicts and changes nothing", contractStale},
		{"create over an existing ledger conflicts", contractCreateExists},
		{"nil maps load as empty maps", contractNilMaps},
		{"a loaded ledger is the caller's own", contractIsolation},
		{"concurrent creates: exactly one wins", contractConcurrentCreate},
		{"concurrent updates from one version: exactly one wins", contractConcurrentUpdate},
		{"a save that changes nothing still moves the version", contractNoOpSave},
		{"the scope rotation's position round-trips and clears", contractNextScope},
		{"the streaks round-trip and clear", contractStreaks},
		{"the record of actions round-trips in order, and clears", contractHistory},
		{"the reap-loop window round-trips, and clears", contractLoops},
	}
	for _, b := range backends() {
		for _, c := range cases {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, b.fresh(t))
			})
		}
	}
}

// assertEmpty checks a ledger is empty with maps the caller can write to.
func assertEmpty(t *testing.T, l state.Ledger) {
	t.Helper()
	require.NotNil(t, l.Marks)
	require.NotNil(t, l.Lists)
	assert.Empty(t, l.Marks)
	assert.Empty(t, l.Lists)
}

func contractMissing(t *testing.T, open func() state.Store) {
	l, v, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Version(""), v)
	assertEmpty(t, l)
}

func contractRoundTrip(t *testing.T, open func() state.Store) {
	want := Sample()
	v, err := open().Save(Ctx(t), want, "")
	require.NoError(t, err)
	assert.NotEmpty(t, v)

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)
}

func contractUpdate(t *testing.T, open func() state.Store) {
	s := open()
	v1, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	l, v, err := s.Load(Ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, v)
	k, m := Mark(99)
	l.Marks[k] = m
	delete(l.Lists, "org:scope-0")
	v2, err := s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2)

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, l, got)
}

func contractStale(t *testing.T, open func() state.Store) {
	a, b := open(), open()
	first := Sample()
	v1, err := a.Save(Ctx(t), first, "")
	require.NoError(t, err)

	// Both sweeps load the same version; a saves first.
	la, va, err := a.Load(Ctx(t))
	require.NoError(t, err)
	lb, vb, err := b.Load(Ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, va)
	require.Equal(t, v1, vb)

	ka, ma := Mark(10)
	la.Marks[ka] = ma
	v2, err := a.Save(Ctx(t), la, va)
	require.NoError(t, err)

	kb, mb := Mark(20)
	lb.Marks[kb] = mb
	_, err = b.Save(Ctx(t), lb, vb)
	require.ErrorIs(t, err, state.ErrConflict)

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, la, got, "the loser's save must change nothing")
}

func contractCreateExists(t *testing.T, open func() state.Store) {
	want := Sample()
	v, err := open().Save(Ctx(t), want, "")
	require.NoError(t, err)

	_, err = open().Save(Ctx(t), state.Ledger{Marks: Marks(1)}, "")
	require.ErrorIs(t, err, state.ErrConflict)

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)
}

func contractNilMaps(t *testing.T, open func() state.Store) {
	v, err := open().Save(Ctx(t), state.Ledger{}, "")
	require.NoError(t, err)
	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assertEmpty(t, got)
}

func contractIsolation(t *testing.T, open func() state.Store) {
	s := open()
	saved := Sample()
	_, err := s.Save(Ctx(t), saved, "")
	require.NoError(t, err)
	k, m := Mark(50)
	saved.Marks[k] = m // changing what was saved changes nothing stored

	l, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, Sample(), l)
	for key := range l.Marks {
		delete(l.Marks, key) // nor does changing what was loaded
	}
	again, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, Sample(), again)
}

// contractNoOpSave: two sweeps load the same version and neither changes a
// mark or the list cache. The first save must still move the version, or
// the second would be let through and both sweeps would act.
func contractNoOpSave(t *testing.T, open func() state.Store) {
	v1, err := open().Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	a, b := open(), open()
	la, va, err := a.Load(Ctx(t))
	require.NoError(t, err)
	lb, vb, err := b.Load(Ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, va)
	require.Equal(t, v1, vb)

	v2, err := a.Save(Ctx(t), la, va)
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2, "an unchanged ledger saved again is a new version")

	_, err = b.Save(Ctx(t), lb, vb)
	require.ErrorIs(t, err, state.ErrConflict, "the second save at the old version is refused")
	_, err = a.Save(Ctx(t), la, va)
	require.ErrorIs(t, err, state.ErrConflict, "so is the first saver's, at its old version")

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, Sample(), got)

	// And again from the new version, by a store that did not load it.
	v3, err := open().Save(Ctx(t), got, gv)
	require.NoError(t, err)
	assert.NotEqual(t, v2, v3)
}

// race has n savers, each with its own state.Store value and its own ledger,
// save over version v at once, and checks that exactly one wins, the others
// see state.ErrConflict, and the winner's ledger is what is stored.
func race(t *testing.T, open func() state.Store, v state.Version, n int) {
	t.Helper()
	type result struct {
		ledger  state.Ledger
		version state.Version
		err     error
	}
	results := make([]result, n)
	stores := make([]state.Store, n)
	for i := range stores {
		stores[i] = open()
		k, m := Mark(1000 + i)
		results[i].ledger = state.Ledger{Marks: map[string]fleet.Mark{k: m}, Lists: Lists(1, i+1)}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i].version, results[i].err = stores[i].Save(Ctx(t), results[i].ledger, v)
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, r := range results {
		if r.err == nil {
			require.Equal(t, -1, winner, "savers %d and %d both won", winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, r.err, state.ErrConflict, "saver %d", i)
	}
	require.NotEqual(t, -1, winner, "no saver won")

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, results[winner].version, gv)
	assert.Equal(t, results[winner].ledger, got)
}

func contractConcurrentCreate(t *testing.T, open func() state.Store) {
	race(t, open, "", 8)
}

func contractConcurrentUpdate(t *testing.T, open func() state.Store) {
	v, err := open().Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	race(t, open, v, 8)
}

// TestContractRaceRepeated repeats the races, since one lucky interleaving
// proves little about a compare-and-write.
func TestContractRaceRepeated(t *testing.T) {
	for _, b := range backends() {
		if b.name == "configmap" {
			continue // the API server serialises writes itself; once is enough
		}
		t.Run(b.name, func(t *testing.T) {
			for i := 0; i < 50; i++ {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					open := b.fresh(t)
					contractConcurrentCreate(t, open)
					_, v, err := open().Load(Ctx(t))
					require.NoError(t, err)
					race(t, open, v, 8)
				})
			}
		})
	}
}

func contractNextScope(t *testing.T, open func() state.Store) {
	want := Sample()
	want.NextScope = "org:acme-7"
	_, err := open().Save(Ctx(t), want, "")
	require.NoError(t, err)
	got, v, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "org:acme-7", got.NextScope)

	got.NextScope = ""
	_, err = open().Save(Ctx(t), got, v)
	require.NoError(t, err)
	again, _, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, again.NextScope)
}

func contractStreaks(t *testing.T, open func() state.Store) {
	want := Sample()
	want.Streaks = state.Streaks{Skips: map[string]int{"org:acme": 12, "repo:acme/web": 3}, Bound: 5}
	_, err := open().Save(Ctx(t), want, "")
	require.NoError(t, err)
	got, v, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, want.Streaks, got.Streaks)
	assert.Equal(t, 12, got.Streaks.MaxSkip())

	got.Streaks = state.Streaks{}
	_, err = open().Save(Ctx(t), got, v)
	require.NoError(t, err)
	again, _, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.True(t, again.Streaks.Zero(), "cleared streaks stay cleared: %+v", again.Streaks)
}

// historyReader is what every backend offers the history command: the
// record alone, read without a save.
type historyReader interface {
	LoadHistory(ctx context.Context) ([]state.Record, state.Version, error)
}

// contractHistory: the record of actions comes back as it was saved, every
// field and its order (oldest first), text that JSON escapes included;
// LoadHistory reads the same at the same version; a ledger saved without
// it holds none; and one that never existed has none, at version "".
func contractHistory(t *testing.T, open func() state.Store) {
	reader, ok := open().(historyReader)
	require.True(t, ok, "the backend reads the record on its own")
	h, v, err := reader.LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, h)
	assert.Equal(t, state.Version(""), v, "no ledger yet")

	want := Sample()
	want.History = History(5)
	odd := Record(7)
	odd.Evidence = "runner \"a<b>&c\"\u2028\u202e\x1b[2J é"
	odd.Job = nil
	want.History = append(want.History, odd)
	v, err = open().Save(Ctx(t), want, "")
	require.NoError(t, err)

	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)

	h, hv, err := open().(historyReader).LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, hv)
	assert.Equal(t, want.History, h)

	got.History = nil
	_, err = open().Save(Ctx(t), got, gv)
	require.NoError(t, err)
	again, _, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, again.History, "a ledger saved without the record holds none")
	h, _, err = open().(historyReader).LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, h)
}

// contractLoops: the reap-loop window comes back as it was saved, every
// group and entry in order; a ledger saved without it holds none.
func contractLoops(t *testing.T, open func() state.Store) {
	want := Sample()
	want.Loops = Loops(3, 5)
	want.History = History(2)
	v, err := open().Save(Ctx(t), want, "")
	require.NoError(t, err)
	got, gv, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)

	got.Loops = nil
	_, err = open().Save(Ctx(t), got, gv)
	require.NoError(t, err)
	again, _, err := open().Load(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, again.Loops, "a ledger saved without the window holds none")
	assert.Equal(t, want.History, again.History, "and keeps the rest")
}
