// Package memory is a ledger store in the process's memory, for tests and
// for a sweep whose marks need not outlive it.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/runner-reaper/runner-reaper/state"
)

// Store is a state.Store in the process's memory. Its versions are a
// counter. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	version uint64 // 0: no ledger saved yet
	data    []byte
}

// New returns an empty Store.
func New() *Store { return &Store{} }

// Load returns a copy of the stored ledger.
func (m *Store) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	if err := ctx.Err(); err != nil {
		return state.Ledger{}, "", fmt.Errorf("load ledger from memory: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == 0 {
		return state.Normalize(state.Ledger{}), "", nil
	}
	l, err := decode(m.data)
	if err != nil {
		return state.Ledger{}, "", fmt.Errorf("load ledger from memory: %w", err)
	}
	return l, m.current(), nil
}

// LoadHistory returns a copy of the stored record of actions; Version ""
// means nothing was saved.
func (m *Store) LoadHistory(ctx context.Context) ([]state.Record, state.Version, error) {
	l, v, err := m.Load(ctx)
	return l.History, v, err
}

// Save stores a copy of l if the store is still at v.
func (m *Store) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("save ledger to memory: %w", err)
	}
	b, err := encode(l)
	if err != nil {
		return "", fmt.Errorf("save ledger to memory: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.current(); v != cur {
		return "", fmt.Errorf("save ledger to memory at version %q (now %q): %w", v, cur, state.ErrConflict)
	}
	m.version++
	m.data = b
	return m.current(), nil
}

// current is the version as callers see it; m.mu must be held.
func (m *Store) current() state.Version {
	if m.version == 0 {
		return ""
	}
	return state.Version(strconv.FormatUint(m.version, 10))
}

// encode and decode are the JSON form the store keeps. It keeps bytes
// rather than the caller's maps so that a caller changing a loaded ledger
// cannot change the stored one, and so that a ledger that would not survive
// JSON fails here as it would in a real backend.
func encode(l state.Ledger) ([]byte, error) {
	b, err := json.Marshal(state.Normalize(l))
	if err != nil {
		return nil, fmt.Errorf("encode ledger: %w", err)
	}
	return b, nil
}

func decode(b []byte) (state.Ledger, error) {
	var l state.Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return state.Ledger{}, fmt.Errorf("decode ledger: %w", err)
	}
	return state.Normalize(l), nil
}
