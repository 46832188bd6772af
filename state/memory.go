package state

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Memory is a Store in the process's memory, for tests. Its versions are a
// counter. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	version uint64 // 0: no ledger saved yet
	data    []byte
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{} }

// Load returns a copy of the stored ledger.
func (m *Memory) Load(ctx context.Context) (Ledger, Version, error) {
	if err := ctx.Err(); err != nil {
		return Ledger{}, "", fmt.Errorf("load ledger from memory: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == 0 {
		return normalize(Ledger{}), "", nil
	}
	l, err := decodeLedger(m.data)
	if err != nil {
		return Ledger{}, "", fmt.Errorf("load ledger from memory: %w", err)
	}
	return l, m.current(), nil
}

// Save stores a copy of l if the store is still at v.
func (m *Memory) Save(ctx context.Context, l Ledger, v Version) (Version, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("save ledger to memory: %w", err)
	}
	b, err := encodeLedger(l)
	if err != nil {
		return "", fmt.Errorf("save ledger to memory: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.current(); v != cur {
		return "", fmt.Errorf("save ledger to memory at version %q (now %q): %w", v, cur, ErrConflict)
	}
	m.version++
	m.data = b
	return m.current(), nil
}

// current is the version as callers see it; m.mu must be held.
func (m *Memory) current() Version {
	if m.version == 0 {
		return ""
	}
	return Version(strconv.FormatUint(m.version, 10))
}
