package state

import (
	"encoding/json"
	"fmt"
	"time"
)

// LoopEntry is one action a sweep really carried out on a runner pod of a
// group (fleet.Group): when, how the runner failed, and why it was judged.
// The reap-loop detector (package loops) reads a group's entries within
// its window; nothing else does.
type LoopEntry struct {
	// At is when the sweep acted, on the reference clock (the API
	// server's), like every time the ledger keeps.
	At time.Time `json:"at"`
	// Fingerprint is how the runner failed: its exit class for a terminal
	// pod, its waiting reason for one that never started, else the
	// verdict's name.
	Fingerprint string `json:"fingerprint"`
	Verdict     string `json:"verdict"`
}

// DecodeLoops reads what Fit encoded as Loops ("" is none). A backend's
// Load leaves out a window it cannot read, rather than fail the sweep: a
// window lost only delays a loop's report and its back-off (see
// TrimLog.DroppedLoops).
func DecodeLoops(s string) (map[string][]LoopEntry, error) {
	if s == "" {
		return nil, nil
	}
	var l map[string][]LoopEntry
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("the reap-loop window is not the expected JSON: %w", err)
	}
	return l, nil
}

// encodeLoops is the JSON of l, "" when it holds no group.
func encodeLoops(l map[string][]LoopEntry) (string, error) {
	if len(l) == 0 {
		return "", nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return "", fmt.Errorf("encode ledger reap-loop window: %w", err)
	}
	return string(b), nil
}
