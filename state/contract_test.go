package state

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// backend makes a fresh, empty ledger and returns a way to open Store values
// on it. Each open is a separate value on the same ledger, as two sweeps in
// two processes would hold.
type backend struct {
	name  string
	fresh func(t *testing.T) (open func() Store)
}

func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T) func() Store {
			m := NewMemory()
			return func() Store { return m }
		}},
		{"file", func(t *testing.T) func() Store {
			path := filepath.Join(t.TempDir(), "ledger.json")
			return func() Store { return NewFile(path) }
		}},
		{"configmap", func(t *testing.T) func() Store {
			ns := env.Namespace(t, "ledger")
			return func() Store { return NewConfigMap(env.Client, ns, "runner-reaper-ledger", nil) }
		}},
		{"dynamodb", func(t *testing.T) func() Store {
			srv := dynalite(t)
			key := srv.freshKey(t)
			return func() Store { return srv.open(key, nil) }
		}},
	}
}

// TestStoreContract runs the promises of Store against every backend.
func TestStoreContract(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, open func() Store)
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

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// assertEmpty checks a ledger is empty with maps the caller can write to.
func assertEmpty(t *testing.T, l Ledger) {
	t.Helper()
	require.NotNil(t, l.Marks)
	require.NotNil(t, l.Lists)
	assert.Empty(t, l.Marks)
	assert.Empty(t, l.Lists)
}

func contractMissing(t *testing.T, open func() Store) {
	l, v, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, Version(""), v)
	assertEmpty(t, l)
}

func contractRoundTrip(t *testing.T, open func() Store) {
	want := sample()
	v, err := open().Save(ctx(t), want, "")
	require.NoError(t, err)
	assert.NotEmpty(t, v)

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)
}

func contractUpdate(t *testing.T, open func() Store) {
	s := open()
	v1, err := s.Save(ctx(t), sample(), "")
	require.NoError(t, err)

	l, v, err := s.Load(ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, v)
	k, m := mark(99)
	l.Marks[k] = m
	delete(l.Lists, "org:scope-0")
	v2, err := s.Save(ctx(t), l, v)
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2)

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, l, got)
}

func contractStale(t *testing.T, open func() Store) {
	a, b := open(), open()
	first := sample()
	v1, err := a.Save(ctx(t), first, "")
	require.NoError(t, err)

	// Both sweeps load the same version; a saves first.
	la, va, err := a.Load(ctx(t))
	require.NoError(t, err)
	lb, vb, err := b.Load(ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, va)
	require.Equal(t, v1, vb)

	ka, ma := mark(10)
	la.Marks[ka] = ma
	v2, err := a.Save(ctx(t), la, va)
	require.NoError(t, err)

	kb, mb := mark(20)
	lb.Marks[kb] = mb
	_, err = b.Save(ctx(t), lb, vb)
	require.ErrorIs(t, err, ErrConflict)

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, la, got, "the loser's save must change nothing")
}

func contractCreateExists(t *testing.T, open func() Store) {
	want := sample()
	v, err := open().Save(ctx(t), want, "")
	require.NoError(t, err)

	_, err = open().Save(ctx(t), Ledger{Marks: marks(1)}, "")
	require.ErrorIs(t, err, ErrConflict)

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, want, got)
}

func contractNilMaps(t *testing.T, open func() Store) {
	v, err := open().Save(ctx(t), Ledger{}, "")
	require.NoError(t, err)
	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assertEmpty(t, got)
}

func contractIsolation(t *testing.T, open func() Store) {
	s := open()
	saved := sample()
	_, err := s.Save(ctx(t), saved, "")
	require.NoError(t, err)
	k, m := mark(50)
	saved.Marks[k] = m // changing what was saved changes nothing stored

	l, _, err := s.Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, sample(), l)
	for key := range l.Marks {
		delete(l.Marks, key) // nor does changing what was loaded
	}
	again, _, err := s.Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, sample(), again)
}

// contractNoOpSave: two sweeps load the same version and neither changes a
// mark or the list cache. The first save must still move the version, or
// the second would be let through and both sweeps would act.
func contractNoOpSave(t *testing.T, open func() Store) {
	v1, err := open().Save(ctx(t), sample(), "")
	require.NoError(t, err)

	a, b := open(), open()
	la, va, err := a.Load(ctx(t))
	require.NoError(t, err)
	lb, vb, err := b.Load(ctx(t))
	require.NoError(t, err)
	require.Equal(t, v1, va)
	require.Equal(t, v1, vb)

	v2, err := a.Save(ctx(t), la, va)
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2, "an unchanged ledger saved again is a new version")

	_, err = b.Save(ctx(t), lb, vb)
	require.ErrorIs(t, err, ErrConflict, "the second save at the old version is refused")
	_, err = a.Save(ctx(t), la, va)
	require.ErrorIs(t, err, ErrConflict, "so is the first saver's, at its old version")

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, gv)
	assert.Equal(t, sample(), got)

	// And again from the new version, by a store that did not load it.
	v3, err := open().Save(ctx(t), got, gv)
	require.NoError(t, err)
	assert.NotEqual(t, v2, v3)
}

// race has n savers, each with its own Store value and its own ledger,
// save over version v at once, and checks that exactly one wins, the others
// see ErrConflict, and the winner's ledger is what is stored.
func race(t *testing.T, open func() Store, v Version, n int) {
	t.Helper()
	type result struct {
		ledger  Ledger
		version Version
		err     error
	}
	results := make([]result, n)
	stores := make([]Store, n)
	for i := range stores {
		stores[i] = open()
		k, m := mark(1000 + i)
		results[i].ledger = Ledger{Marks: map[string]reconcile.Mark{k: m}, Lists: lists(1, i+1)}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i].version, results[i].err = stores[i].Save(ctx(t), results[i].ledger, v)
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
		require.ErrorIs(t, r.err, ErrConflict, "saver %d", i)
	}
	require.NotEqual(t, -1, winner, "no saver won")

	got, gv, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, results[winner].version, gv)
	assert.Equal(t, results[winner].ledger, got)
}

func contractConcurrentCreate(t *testing.T, open func() Store) {
	race(t, open, "", 8)
}

func contractConcurrentUpdate(t *testing.T, open func() Store) {
	v, err := open().Save(ctx(t), sample(), "")
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
					_, v, err := open().Load(ctx(t))
					require.NoError(t, err)
					race(t, open, v, 8)
				})
			}
		})
	}
}

// errorsIsConflict is shorthand for the backend-specific tests.
func errorsIsConflict(err error) bool { return errors.Is(err, ErrConflict) }

func contractNextScope(t *testing.T, open func() Store) {
	want := sample()
	want.NextScope = "org:acme-7"
	v, err := open().Save(ctx(t), want, "")
	require.NoError(t, err)
	got, v, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, "org:acme-7", got.NextScope)

	got.NextScope = ""
	_, err = open().Save(ctx(t), got, v)
	require.NoError(t, err)
	again, _, err := open().Load(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, again.NextScope)
}
