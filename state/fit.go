package state

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The ConfigMap layout, which Fit also counts for the DynamoDB item. Marks
// are plain JSON so that `kubectl get configmap -o
// jsonpath='{.data.marks\.json}'` shows what the reaper suspects; the list
// cache is bulky and of no interest to a reader, so it is gzip'd. They are
// exported for the configmap backend, whose data keys they are.
const (
	MarksKey = "marks.json"
	ListsKey = "lists.json.gz"
	// NextScopeKey holds Ledger.NextScope; absent when it is empty.
	NextScopeKey = "next-scope"
	// StreaksKey holds Ledger.Streaks as JSON; absent when none runs.
	StreaksKey = "streaks.json"
	// HistoryKey holds Ledger.History as plain JSON, so that `kubectl get
	// configmap -o jsonpath='{.data.history\.json}'` shows what the reaper
	// did; absent when nothing is recorded.
	HistoryKey = "history.json"
	// LoopsKey holds Ledger.Loops as plain JSON; absent when no group has
	// a recent action.
	LoopsKey = "loops.json"
)

// Trim says what a save had to leave out to fit the limit. Dropping the
// list cache costs rate limit on the next sweep; dropping a record loses
// the account of an old action; dropping a mark restarts that verdict's
// confirmation, so callers should report it.
type Trim struct {
	// DroppedLists is how many scopes' runner-list caches were dropped.
	DroppedLists int
	// DroppedRecords is how many records of actions were dropped, the
	// oldest first.
	DroppedRecords int
	// DroppedStreaks is true when the streaks were dropped: the alerts on
	// things lasting several sweeps start counting again.
	DroppedStreaks bool
	// DroppedLoops is how many groups' reap-loop windows were dropped
	// (all of them, when any is): a loop is reported, and backed off
	// from, only once its group has been acted on often enough again.
	DroppedLoops int
	// DroppedMarks is how many marks were dropped, the oldest by FirstSeen.
	DroppedMarks int
	// LimitBytes is the limit the ledger was fitted to.
	LimitBytes int
}

// Trimmed is true when anything was left out.
func (t Trim) Trimmed() bool {
	return t.DroppedLists > 0 || t.DroppedRecords > 0 || t.DroppedMarks > 0 || t.DroppedStreaks || t.DroppedLoops > 0
}

// Encoded is a ledger in the ConfigMap layout, as a backend with a size
// limit stores it.
type Encoded struct {
	Marks []byte // JSON of Ledger.Marks: data[MarksKey]
	Lists []byte // gzip'd JSON of Ledger.Lists: binaryData[ListsKey]; nil when no list cache is kept
	Next  string // Ledger.NextScope: data[NextScopeKey]; empty when there is no rotation
	// Streaks is the JSON of Ledger.Streaks: data[StreaksKey]; empty when
	// no streak runs.
	Streaks string
	// History is the JSON of Ledger.History: data[HistoryKey]; empty when
	// no record is kept.
	History string
	// Loops is the JSON of Ledger.Loops: data[LoopsKey]; empty when no
	// group has a recent action.
	Loops string
}

// DecodeStreaks reads what Fit encoded as Streaks. Streaks only feed
// alerts, so one that cannot be read (edited by hand) restarts from zero
// rather than failing the sweep.
func DecodeStreaks(s string) Streaks {
	var st Streaks
	if s == "" || json.Unmarshal([]byte(s), &st) != nil {
		return Streaks{}
	}
	return st
}

// size counts keys and values, as the API server counts values, so that
// staying under a limit below 1 MiB keeps the object acceptable.
func (e Encoded) size() int {
	n := len(MarksKey) + len(e.Marks)
	if e.Next != "" {
		n += len(NextScopeKey) + len(e.Next)
	}
	if e.Streaks != "" {
		n += len(StreaksKey) + len(e.Streaks)
	}
	if e.History != "" {
		n += len(HistoryKey) + len(e.History)
	}
	if e.Loops != "" {
		n += len(LoopsKey) + len(e.Loops)
	}
	if e.Lists != nil {
		n += len(ListsKey) + len(e.Lists)
	}
	return n
}

// Fit is the start of every Save of a backend with a size limit: it fits l
// within limit bytes, or within defaultLimit when limit is not positive (a
// backend's LimitBytes left zero). where names the ledger in the error. The
// caller stores the Encoded parts and, once the save succeeded, hands the
// Trim to its TrimLog.
func Fit(l Ledger, limit, defaultLimit int, where string) (Encoded, Trim, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	enc, trim, err := fit(l, limit)
	if err != nil {
		return Encoded{}, trim, fmt.Errorf("fit %s: %w", where, err)
	}
	return enc, trim, nil
}

// fit encodes l in the ConfigMap layout within limit bytes. If it does not
// fit whole it leaves out, in this order and only as much as it must: the
// scopes' list caches, which only save rate limit (see fitLists), but
// after the records beyond the newest RecordFloor where that keeps every
// cache; the oldest records of actions, which feed no decision; the
// streaks, which only feed alerts; the reap-loop window, which feeds only
// the back-off of a looping group, and whose loss delays it; and last the
// oldest marks by FirstSeen, whose loss restarts a confirmation. It fails only when not even an empty ledger
// fits.
func fit(l Ledger, limit int) (Encoded, Trim, error) {
	l = Normalize(l)
	trim := Trim{LimitBytes: limit}
	marks, err := json.Marshal(l.Marks)
	if err != nil {
		return Encoded{}, trim, fmt.Errorf("encode ledger marks: %w", err)
	}
	enc := Encoded{Marks: marks, Next: l.NextScope}
	if !l.Streaks.Zero() {
		b, err := json.Marshal(l.Streaks)
		if err != nil {
			return Encoded{}, trim, fmt.Errorf("encode ledger streaks: %w", err)
		}
		enc.Streaks = string(b)
	}
	if enc.History, err = encodeHistory(l.History); err != nil {
		return Encoded{}, trim, err
	}
	if enc.Loops, err = encodeLoops(l.Loops); err != nil {
		return Encoded{}, trim, err
	}
	if len(l.Lists) > 0 {
		kept, err := fitLists(&enc, l.Lists, limit)
		if err != nil {
			return Encoded{}, trim, err
		}
		if kept < len(l.Lists) && len(l.History) > RecordFloor {
			// A list cache dropped costs rate limit on every sweep: where
			// dropping the records beyond the newest RecordFloor lets every
			// cache stay, they go first, and the room the caches leave
			// comes back to the newest of them. Where not even that keeps
			// every cache, the fleet's caches outgrow the ledger anyway,
			// and the record stays.
			whole := enc
			all, dropped, err := fitListsBeforeRecords(&enc, l, limit)
			if err != nil {
				return Encoded{}, trim, err
			}
			if all == len(l.Lists) {
				kept, trim.DroppedRecords = all, dropped
			} else {
				enc = whole
			}
		}
		trim.DroppedLists = len(l.Lists) - kept
		if kept > 0 {
			return enc, trim, nil
		}
	}
	if enc.size() <= limit {
		return enc, trim, nil
	}
	if enc.History != "" {
		sizes, err := recordSizes(l.History)
		if err != nil {
			return Encoded{}, trim, err
		}
		enc.History = ""
		keep := newestRecordsWithin(sizes, limit-enc.size()-len(HistoryKey))
		if enc.History, err = encodeHistory(l.History[len(l.History)-keep:]); err != nil {
			return Encoded{}, trim, err
		}
		trim.DroppedRecords = len(l.History) - keep
		if enc.size() <= limit {
			return enc, trim, nil
		}
	}
	// The streaks only feed alerts: they go before any mark, whose loss
	// would restart a verdict's confirmation.
	if enc.Streaks != "" {
		enc.Streaks, trim.DroppedStreaks = "", true
		if enc.size() <= limit {
			return enc, trim, nil
		}
	}
	// The reap-loop window feeds a back-off, not a verdict: it goes
	// before any mark, a group at a time, those acted on longest ago
	// first, each group whole (a part of one would report its loop by
	// fewer actions than it had).
	if enc.Loops != "" {
		room := limit - (enc.size() - len(LoopsKey) - len(enc.Loops))
		if enc.Loops, trim.DroppedLoops, err = newestLoopsWithin(l.Loops, room); err != nil {
			return Encoded{}, trim, err
		}
		if enc.size() <= limit {
			return enc, trim, nil
		}
	}

	keep, err := newestMarksWithin(l.Marks, limit-len(MarksKey)-(enc.size()-len(MarksKey)-len(enc.Marks)))
	if err != nil {
		return Encoded{}, trim, err
	}
	if enc.Marks, err = json.Marshal(keep); err != nil {
		return Encoded{}, trim, fmt.Errorf("encode ledger marks: %w", err)
	}
	trim.DroppedMarks = len(l.Marks) - len(keep)
	if enc.size() > limit {
		// newestMarksWithin computes the encoding's size exactly; reaching
		// here means that arithmetic no longer matches encoding/json.
		return Encoded{}, trim, fmt.Errorf("ledger of %d marks is %d bytes, over the limit of %d bytes", len(keep), enc.size(), limit)
	}
	return enc, trim, nil
}

// newestLoopsWithin is the JSON of the groups of w whose newest entry is
// the latest, as many as fit within room bytes (the key's included when
// any does), and how many groups it leaves out.
func newestLoopsWithin(w map[string][]LoopEntry, room int) (string, int, error) {
	type group struct {
		key    string
		newest time.Time
		size   int
	}
	gs := make([]group, 0, len(w))
	for k, es := range w {
		kb, err := json.Marshal(k)
		if err != nil {
			return "", 0, fmt.Errorf("encode ledger reap-loop window: %w", err)
		}
		eb, err := json.Marshal(es)
		if err != nil {
			return "", 0, fmt.Errorf("encode ledger reap-loop window: %w", err)
		}
		var newest time.Time
		for _, e := range es {
			if e.At.After(newest) {
				newest = e.At
			}
		}
		// "KEY":ENTRIES and the comma before it.
		gs = append(gs, group{key: k, newest: newest, size: len(kb) + 1 + len(eb) + 1})
	}
	slices.SortFunc(gs, func(a, b group) int {
		return cmp.Or(b.newest.Compare(a.newest), cmp.Compare(a.key, b.key))
	})
	// The key and the braces; the first group has no comma before it.
	used := len(LoopsKey) + 2 - 1
	kept := map[string][]LoopEntry{}
	for _, g := range gs {
		if used+g.size > room {
			break
		}
		used += g.size
		kept[g.key] = w[g.key]
	}
	enc, err := encodeLoops(kept)
	if err != nil {
		return "", 0, err
	}
	return enc, len(w) - len(kept), nil
}

// RecordFloor is how many of the newest records of actions a ledger short
// of room keeps whatever the list caches need: beyond it, the records go
// first where that keeps every scope's cache. A list cache dropped is a
// scope listed again without ETags on every sweep, which costs GitHub rate
// limit as long as the ledger stays full; an old record only costs its
// reader.
const RecordFloor = 20

// fitListsBeforeRecords fits the list caches beside only the newest
// RecordFloor records, then gives the room the caches left back to older
// records, newest first. It returns the list caches kept and the records
// dropped.
func fitListsBeforeRecords(enc *Encoded, l Ledger, limit int) (kept, dropped int, err error) {
	sizes, err := recordSizes(l.History)
	if err != nil {
		return 0, 0, err
	}
	floor := l.History[len(l.History)-RecordFloor:]
	if enc.History, err = encodeHistory(floor); err != nil {
		return 0, 0, err
	}
	if kept, err = fitLists(enc, l.Lists, limit); err != nil {
		return 0, 0, err
	}
	enc.History = ""
	keep := max(RecordFloor, newestRecordsWithin(sizes, limit-enc.size()-len(HistoryKey)))
	if enc.History, err = encodeHistory(l.History[len(l.History)-keep:]); err != nil {
		return 0, 0, err
	}
	return kept, len(l.History) - keep, nil
}

// encodeHistory is the JSON of h, "" when it holds no record.
func encodeHistory(h []Record) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode ledger history: %w", err)
	}
	return string(b), nil
}

// recordSizes is the size of each record's JSON, in order.
func recordSizes(h []Record) ([]int, error) {
	sizes := make([]int, len(h))
	for i, r := range h {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode ledger record %d: %w", i, err)
		}
		sizes[i] = len(b)
	}
	return sizes, nil
}

// newestRecordsWithin is how many of the newest records (the last of
// sizes) a JSON array of at most budget bytes holds: json.Marshal writes
// one as [r,r,r] with nothing else between them. Zero records are kept
// as no array at all, so a budget under "[]" keeps none.
func newestRecordsWithin(sizes []int, budget int) int {
	total := len("[]")
	n := 0
	for i := len(sizes) - 1; i >= 0; i-- {
		add := sizes[i]
		if n > 0 {
			add++ // the comma
		}
		if total+add > budget {
			break
		}
		total += add
		n++
	}
	return n
}

// fitLists puts into enc as many scopes' list caches as fit beside the
// rest of it, and says how many. The whole cache is tried first; when it
// does not fit (a thousand scopes of a hundred runners each is a few
// times the 1 MiB a ConfigMap holds), the scopes are kept in the order of
// their keys, as many as the compressed size of the whole suggests, fewer
// by a tenth at each try that still does not fit, and at most maxListTries
// encodings in all, since each costs a compression of megabytes. A scope
// whose cache is dropped costs its full rate limit on the next sweep, and
// while the fleet stays that large the same scopes are dropped every
// sweep; the rest still answer 304. enc.Lists is nil when none fits.
func fitLists(enc *Encoded, lists map[string]ListCache, limit int) (int, error) {
	keys := make([]string, 0, len(lists))
	for k := range lists {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n := len(keys)
	for try := 0; try < maxListTries && n > 0; try++ {
		part := lists
		if n < len(keys) {
			part = make(map[string]ListCache, n)
			for _, k := range keys[:n] {
				part[k] = lists[k]
			}
		}
		b, err := gzipLists(part)
		if err != nil {
			return 0, fmt.Errorf("encode ledger list cache: %w", err)
		}
		enc.Lists = b
		over := enc.size() - limit
		if over <= 0 {
			return n, nil
		}
		// Scale by the room there is for lists, then a tenth less:
		// scopes compress about alike.
		room := len(b) - over
		next := int(float64(n) * float64(room) / float64(len(b)) * 0.9)
		n = min(next, n-1)
	}
	enc.Lists = nil
	return 0, nil
}

// maxListTries bounds the encodings fitLists makes.
const maxListTries = 4

// newestMarksWithin returns the largest set of newest marks whose JSON
// object encoding is at most budget bytes. It sizes each entry once instead
// of encoding the whole map again after every drop: json.Marshal writes a
// map as {"k":v,"k":v} with nothing else between entries.
func newestMarksWithin(marks map[string]fleet.Mark, budget int) (map[string]fleet.Mark, error) {
	type entry struct {
		key  string
		mark fleet.Mark
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
		return nil, fmt.Errorf("ledger cannot fit in %d bytes even without marks", budget+len(MarksKey))
	}
	keep := map[string]fleet.Mark{}
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

// gzipLists encodes lists as gzip'd JSON: the bytes json.Encoder writes
// for the map (its keys in sorted order, then a newline), but one scope at
// a time. The encoder builds the whole document before it writes any of
// it, and the ledger is saved while the sweep holds the most: at 30,000
// registrations in 300 scopes that document was 3.3 MB of the heap at its
// highest (heap profile of the binary), at 100,000 about 11 MB. The
// largest scope is still built whole, once. The gzip header carries no
// time, so the same cache always encodes to the same bytes.
func gzipLists(lists map[string]ListCache) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := writeLists(zw, lists); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLists writes lists to w as json.Encoder would, newline and all, a
// scope at a time (see writeEntries). What an error leaves written is not
// JSON; gzipLists discards it.
func writeLists(w io.Writer, lists map[string]ListCache) error {
	if err := writeEntries(w, lists, "", false); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// lineless writes what json.Encoder writes without the newline it ends
// each value with.
type lineless struct{ w io.Writer }

func (l lineless) Write(p []byte) (int, error) {
	n := len(p)
	if n > 0 && p[n-1] == '\n' {
		if _, err := l.w.Write(p[:n-1]); err != nil {
			return 0, err
		}
		return n, nil
	}
	return l.w.Write(p)
}

// GunzipLists decodes the list cache Fit gzip'd, for a backend's Load. It
// reads a scope at a time (see ReadLedger): a json.Decoder holds a whole
// value before decoding any of it, and the cache of a ConfigMap filled to
// its limit is about 8 MB of JSON. Unlike the file ledger it is lenient,
// as the cache always was: it only saves rate limit, and the backends drop
// one they cannot read.
func GunzipLists(b []byte) (map[string]ListCache, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	defer func() { _ = zr.Close() }() // its error is one a read has already returned to the decoder
	var lists map[string]ListCache
	if err := readEntries(json.NewDecoder(zr), &lists, true, "list cache"); err != nil {
		return nil, fmt.Errorf("gzip'd content is not the expected JSON: %w", err)
	}
	return lists, nil
}

// TrimLog remembers the trim of the most recent successful Save and says so
// in a warning, for the backends that must fit a size limit. Only a trim
// that was saved is reported: a ledger that lost the race trimmed nothing
// anyone will read. A backend keeps one and offers its LastTrim, which the
// sweep reports in its summary.
type TrimLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   Trim
}

// NewTrimLog returns a TrimLog warning on logger; a nil logger discards the
// warnings, and LastTrim still reports the trim.
func NewTrimLog(logger *slog.Logger) *TrimLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TrimLog{logger: logger}
}

// Saved records the trim of a Save that succeeded; where names the ledger
// in the warning (slog key-value pairs).
func (t *TrimLog) Saved(trim Trim, where ...any) {
	t.mu.Lock()
	t.last = trim
	t.mu.Unlock()
	if trim.Trimmed() {
		t.logger.Warn("ledger trimmed", append(where,
			"dropped_lists", trim.DroppedLists,
			"dropped_records", trim.DroppedRecords,
			"dropped_streaks", trim.DroppedStreaks,
			"dropped_loops", trim.DroppedLoops,
			"dropped_marks", trim.DroppedMarks,
			"limit_bytes", trim.LimitBytes)...)
	}
}

// DroppedLists warns that the stored list cache, under key, could not be
// read and was dropped; where names the ledger. The cache only saves rate
// limit, so a sweep goes on without it and the next save replaces it.
func (t *TrimLog) DroppedLists(key string, err error, where ...any) {
	t.logger.Warn("ledger list cache dropped", append(where,
		"field", key,
		"error", err.Error(),
		"effect", "the runner lists are read afresh; the next save replaces the cache")...)
}

// DroppedHistory warns that the stored record of actions, under key,
// could not be read and was left out; where names the ledger. The record
// feeds no decision, so a sweep goes on without it, and its next save
// starts the record again from its own actions.
func (t *TrimLog) DroppedHistory(key string, err error, where ...any) {
	t.logger.Warn("ledger history dropped", append(where,
		"field", key,
		"error", err.Error(),
		"effect", "the record of earlier actions is not kept; the next save starts it again from that sweep's actions")...)
}

// DroppedLoops warns that the stored reap-loop window, under key, could
// not be read and was left out; where names the ledger. A sweep goes on
// without it: a loop is reported, and backed off from, once its group's
// actions fill the window again.
func (t *TrimLog) DroppedLoops(key string, err error, where ...any) {
	t.logger.Warn("ledger reap-loop window dropped", append(where,
		"field", key,
		"error", err.Error(),
		"effect", "reap loops are detected again from this sweep's actions on")...)
}

// LastTrim reports what the most recent successful Save left out to fit the
// limit; the zero Trim (Trimmed false) when it left out nothing. With
// several Saves on one store at once it is whichever finished last.
func (t *TrimLog) LastTrim() Trim {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
