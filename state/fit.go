package state

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/runner-reaper/runner-reaper/reconcile"
)

// The ConfigMap layout. Marks are plain JSON so that `kubectl get configmap
// -o jsonpath='{.data.marks\.json}'` shows what the reaper suspects; the list
// cache is bulky and of no interest to a reader, so it is gzip'd.
const (
	marksKey = "marks.json"
	listsKey = "lists.json.gz"
	// nextScopeKey holds Ledger.NextScope; absent when it is empty.
	nextScopeKey = "next-scope"
)

// DefaultLimitBytes is the size the ConfigMap backend keeps a ledger under.
// The API server refuses a ConfigMap whose data exceeds 1 MiB; the margin
// leaves room for metadata and for the ledger growing between sweeps.
const DefaultLimitBytes = 900 * 1024

// Trim says what a save had to leave out to fit the limit. Dropping the
// list cache costs rate limit on the next sweep; dropping a mark restarts
// that verdict's confirmation, so callers should report it.
type Trim struct {
	// DroppedLists is how many scopes' runner-list caches were dropped.
	DroppedLists int
	// DroppedMarks is how many marks were dropped, the oldest by FirstSeen.
	DroppedMarks int
	// LimitBytes is the limit the ledger was fitted to.
	LimitBytes int
}

// Trimmed is true when anything was left out.
func (t Trim) Trimmed() bool { return t.DroppedLists > 0 || t.DroppedMarks > 0 }

// encoded is a ledger in the ConfigMap layout.
type encoded struct {
	marks []byte // data[marksKey]
	lists []byte // binaryData[listsKey]; nil when no list cache is kept
	next  string // data[nextScopeKey]; empty when there is no rotation
}

// size counts keys and values, as the API server counts values, so that
// staying under a limit below 1 MiB keeps the object acceptable.
func (e encoded) size() int {
	n := len(marksKey) + len(e.marks)
	if e.next != "" {
		n += len(nextScopeKey) + len(e.next)
	}
	if e.lists != nil {
		n += len(listsKey) + len(e.lists)
	}
	return n
}

// fit encodes l in the ConfigMap layout within limit bytes. If it does not
// fit whole it first drops the list cache, which only saves rate limit, and
// then the oldest marks by FirstSeen, keeping as many of the newest as fit.
// It fails only when not even an empty ledger fits.
func fit(l Ledger, limit int) (encoded, Trim, error) {
	l = normalize(l)
	trim := Trim{LimitBytes: limit}
	marks, err := json.Marshal(l.Marks)
	if err != nil {
		return encoded{}, trim, fmt.Errorf("encode ledger marks: %w", err)
	}
	enc := encoded{marks: marks, next: l.NextScope}
	if len(l.Lists) > 0 {
		if enc.lists, err = gzipJSON(l.Lists); err != nil {
			return encoded{}, trim, fmt.Errorf("encode ledger list cache: %w", err)
		}
		if enc.size() <= limit {
			return enc, trim, nil
		}
		enc.lists = nil
		trim.DroppedLists = len(l.Lists)
	}
	if enc.size() <= limit {
		return enc, trim, nil
	}

	keep, err := newestMarksWithin(l.Marks, limit-len(marksKey)-(enc.size()-len(marksKey)-len(enc.marks)))
	if err != nil {
		return encoded{}, trim, err
	}
	if enc.marks, err = json.Marshal(keep); err != nil {
		return encoded{}, trim, fmt.Errorf("encode ledger marks: %w", err)
	}
	trim.DroppedMarks = len(l.Marks) - len(keep)
	if enc.size() > limit {
		// newestMarksWithin computes the encoding's size exactly; reaching
		// here means that arithmetic no longer matches encoding/json.
		return encoded{}, trim, fmt.Errorf("ledger of %d marks is %d bytes, over the limit of %d bytes", len(keep), enc.size(), limit)
	}
	return enc, trim, nil
}

// newestMarksWithin returns the largest set of newest marks whose JSON
// object encoding is at most budget bytes. It sizes each entry once instead
// of encoding the whole map again after every drop: json.Marshal writes a
// map as {"k":v,"k":v} with nothing else between entries.
func newestMarksWithin(marks map[string]reconcile.Mark, budget int) (map[string]reconcile.Mark, error) {
	type entry struct {
		key  string
		mark reconcile.Mark
		size int
	}
	entries := make([]entry, 0, len(marks))
	for k, m := range marks {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("encode ledger mark key %q: %w", k, err)
		}
		mb, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode ledger mark %q: %w", k, err)
		}
		entries = append(entries, entry{key: k, mark: m, size: len(kb) + 1 + len(mb)})
	}
	// Newest first; the key breaks ties so the same ledger always trims the
	// same way.
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if !a.mark.FirstSeen.Equal(b.mark.FirstSeen) {
			return a.mark.FirstSeen.After(b.mark.FirstSeen)
		}
		return a.key < b.key
	})
	total := len("{}")
	if total > budget {
		return nil, fmt.Errorf("ledger cannot fit in %d bytes even without marks", budget+len(marksKey))
	}
	keep := map[string]reconcile.Mark{}
	for i, e := range entries {
		add := e.size
		if i > 0 {
			add++ // the comma
		}
		if total+add > budget {
			break
		}
		total += add
		keep[e.key] = e.mark
	}
	return keep, nil
}

// gzipJSON encodes v as gzip'd JSON. The gzip header carries no time, so the
// same cache always encodes to the same bytes.
func gzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gunzipJSON decodes what gzipJSON encoded.
func gunzipJSON(b []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not gzip: %w", err)
	}
	defer zr.Close()
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		return fmt.Errorf("gzip'd content is not the expected JSON: %w", err)
	}
	return nil
}

// trimLog remembers the trim of the most recent successful Save and says so
// in a warning, for the backends that must fit a size limit. Only a trim
// that was saved is reported: a ledger that lost the race trimmed nothing
// anyone will read.
type trimLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   Trim
}

func newTrimLog(logger *slog.Logger) trimLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return trimLog{logger: logger}
}

// saved records the trim of a Save that succeeded; where names the ledger
// in the warning.
func (t *trimLog) saved(trim Trim, where ...any) {
	t.mu.Lock()
	t.last = trim
	t.mu.Unlock()
	if trim.Trimmed() {
		t.logger.Warn("ledger trimmed", append(where,
			"dropped_lists", trim.DroppedLists,
			"dropped_marks", trim.DroppedMarks,
			"limit_bytes", trim.LimitBytes)...)
	}
}

// droppedLists warns that the stored list cache, under key, could not be
// read and was dropped; where names the ledger. The cache only saves rate
// limit, so a sweep goes on without it and the next save replaces it.
func (t *trimLog) droppedLists(key string, err error, where ...any) {
	t.logger.Warn("ledger list cache dropped", append(where,
		"field", key,
		"error", err.Error(),
		"effect", "the runner lists are read afresh; the next save replaces the cache")...)
}

// LastTrim reports what the most recent successful Save left out to fit the
// limit; the zero Trim (Trimmed false) when it left out nothing. With
// several Saves on one store at once it is whichever finished last.
func (t *trimLog) LastTrim() Trim {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
