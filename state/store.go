// Package state is the ledger of marks: the only thing one sweep leaves for
// the next. The reaper keeps nothing in the process, so a verdict can only be
// confirmed across sweeps if the marks survive here.
//
// Every backend gives optimistic concurrency: a sweep loads the ledger,
// decides, saves it with the version it loaded, and only then acts. If the
// save fails with ErrConflict another sweep saved in between, and this sweep
// starts no action; that is how two overlapping sweeps never act twice.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// Ledger is what one sweep leaves for the next.
type Ledger struct {
	// Marks are keyed by reconcile.PodMarkKey or RegistrationMarkKey.
	Marks map[string]reconcile.Mark `json:"marks"`
	// Lists is the runner-list cache by scope key (ETags and pages). It only
	// saves rate limit, so a backend short of room may drop it.
	Lists map[string]reconcile.ListCache `json:"lists,omitempty"`
	// NextScope is the key of the scope the next sweep lists first, when a
	// sweep cannot list every scope: the position of the fair rotation.
	// Empty starts at the first configured scope.
	NextScope string `json:"next_scope,omitempty"`
}

// Version identifies one saved state of the ledger. It is opaque to callers:
// they only hand back what Load or Save gave them. "" means the ledger does
// not exist yet.
type Version string

// ErrConflict is returned (wrapped) by Save when the ledger changed since
// the version being saved over was loaded. A caller seeing it must not act on
// what it decided: another sweep has decided since.
var ErrConflict = errors.New("ledger changed since it was loaded")

// Store keeps the ledger between sweeps.
type Store interface {
	// Load returns the ledger and its version. A missing ledger is an empty
	// one (with non-nil maps) at Version "".
	Load(ctx context.Context) (Ledger, Version, error)
	// Save replaces the ledger if it is still at version v and returns the
	// new version. When it is not, the error satisfies
	// errors.Is(err, ErrConflict); with v == "" that means the ledger has
	// been created meanwhile. Any other error (permissions, network) is not
	// a conflict and must not be taken for a lost race.
	Save(ctx context.Context, l Ledger, v Version) (Version, error)
}

// normalize gives a ledger non-nil maps, so callers can write to what Load
// returns without checking.
func normalize(l Ledger) Ledger {
	if l.Marks == nil {
		l.Marks = map[string]reconcile.Mark{}
	}
	if l.Lists == nil {
		l.Lists = map[string]reconcile.ListCache{}
	}
	return l
}

// encodeLedger and decodeLedger are the JSON form the Memory and File
// backends keep. Memory keeps bytes rather than the caller's maps so that a
// caller changing a loaded ledger cannot change the stored one, and so that
// it stores exactly what the real backends would.
func encodeLedger(l Ledger) ([]byte, error) {
	b, err := json.Marshal(normalize(l))
	if err != nil {
		return nil, fmt.Errorf("encode ledger: %w", err)
	}
	return b, nil
}

func decodeLedger(b []byte) (Ledger, error) {
	var l Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return Ledger{}, fmt.Errorf("decode ledger: %w", err)
	}
	return normalize(l), nil
}
