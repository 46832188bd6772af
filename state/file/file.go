// Package file is a ledger store in a local JSON file, for audits and
// development.
package file

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runner-reaper/runner-reaper/state"
)

// Store is a state.Store in a local JSON file. Several processes may share
// the file: the compare-and-write happens under an exclusive flock on
// path+".lock", the version is a counter kept in the file itself, and the
// new file is written beside the old one and renamed over it, so a reader
// never sees half a ledger and needs no lock.
type Store struct {
	path string
}

// fileDoc is the file's content: the version travels with the ledger so that
// another process comparing versions reads both from one atomic rename.
// Format is the layout's own version; files written before it existed have
// none, and are read as fileFormat.
type fileDoc struct {
	Format  int          `json:"format,omitempty"`
	Version uint64       `json:"version"`
	Ledger  state.Ledger `json:"ledger"`
}

// fileFormat is the layout this code writes. Format 2 added each mark's
// first_seen_local, format 3 its job_checked_at, format 4 the ledger's
// streaks, format 5 its record of actions (history), format 6 its
// reap-loop window (loops); this code reads formats 1 to 5 too (such a
// mark starts its local hold at the next sweep and has never had its job
// asked about; such a ledger has no streak running, no action recorded
// and no recent action of any group). A runner-reaper older than a file's
// format cannot read it and says so: to go back to one, remove the file,
// and its marks start again. Each format only adds fields, so a reader
// that ignores the fields it does not know (jq, a lenient decoder) reads
// the rest of a newer file as before.
const fileFormat = 6

// formatOf is the format a ledger is written in: the oldest that holds
// all of it. A ledger with no reap-loop window is written as format 5, so
// that the release before the window can still read the file, and going
// back to it keeps the marks while no group was acted on within the
// window.
func formatOf(l state.Ledger) int {
	if len(l.Loops) == 0 {
		return 5
	}
	return fileFormat
}

// oldestFormat is the oldest layout this code reads.
const oldestFormat = 1

// lockPoll is how often Save retries a held lock; flock itself cannot watch
// a context.
const lockPoll = 5 * time.Millisecond

// New returns a Store at path. The directory must exist; the file
// need not (a missing file is an empty ledger).
func New(path string) *Store { return &Store{path: path} }

// Load reads the ledger; a missing file is an empty ledger at Version "".
func (f *Store) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	if err := ctx.Err(); err != nil {
		return state.Ledger{}, "", fmt.Errorf("load ledger file %s: %w", f.path, err)
	}
	doc, ok, err := f.read(true)
	if err != nil {
		return state.Ledger{}, "", err
	}
	if !ok {
		return state.Normalize(state.Ledger{}), "", nil
	}
	return state.Normalize(doc.Ledger), fileVersion(doc.Version), nil
}

// LoadHistory reads the record of actions, and never writes: for a person
// asking what the reaper did. The file is read whole and strictly, as Load
// reads it. Version "" means there is no file.
func (f *Store) LoadHistory(ctx context.Context) ([]state.Record, state.Version, error) {
	l, v, err := f.Load(ctx)
	return l.History, v, err
}

// Save writes l if the file is still at v.
func (f *Store) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	unlock, err := f.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()

	// The file is checked whole, as Load checks it, but what it holds is
	// let go of as it is read: only its version is needed.
	doc, ok, err := f.read(false)
	if err != nil {
		return "", err
	}
	cur := state.Version("")
	if ok {
		cur = fileVersion(doc.Version)
	}
	if v != cur {
		return "", fmt.Errorf("save ledger file %s at version %q (now %q): %w", f.path, v, cur, state.ErrConflict)
	}
	next := fileDoc{Format: formatOf(l), Version: doc.Version + 1, Ledger: state.Normalize(l)}
	if err := f.replace(func(w io.Writer) error { return writeFileDoc(w, next) }); err != nil {
		return "", err
	}
	return fileVersion(next.Version), nil
}

// writeFileDoc writes doc as json.MarshalIndent would, but the marks and
// the list caches an entry a line, and as it goes (see state.WriteLedger).
func writeFileDoc(w io.Writer, doc fileDoc) error {
	if _, err := fmt.Fprintf(w, "{\n  \"format\": %d,\n  \"version\": %d,\n  \"ledger\": ", doc.Format, doc.Version); err != nil {
		return err
	}
	if err := state.WriteLedger(w, doc.Ledger, "  "); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n}\n")
	return err
}

// fileVersion renders the counter. An existing file is never Version "",
// even one written by hand without a version.
func fileVersion(n uint64) state.Version { return state.Version(strconv.FormatUint(n, 10)) }

// read returns the file's content, and false when there is no file. With
// keep false the ledger is checked but not kept: only the version is.
//
// The file is decoded as it is read, a mark or a scope's list cache at a
// time. Read
// whole and then decoded twice (once for its fields, once strictly), the
// 15 MB file of 100,000 cached registrations cost a load 85 MB of
// allocations, three copies of itself live at once, and a save, which
// also built the next file whole, 139 MB (BenchmarkFileLedger); read as
// it goes, 22 MB each, and almost none of it live at once.
func (f *Store) read(keep bool) (fileDoc, bool, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileDoc{}, false, nil
	}
	if err != nil {
		return fileDoc{}, false, fmt.Errorf("read ledger file %s: %w", f.path, err)
	}
	defer func() { _ = file.Close() }() // only read
	doc, err := decodeFileDoc(bufio.NewReaderSize(file, readBuffer), keep)
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fileDoc{}, false, fmt.Errorf("read ledger file %s: %w", f.path, err)
	}
	if err != nil {
		return fileDoc{}, false, fmt.Errorf("decode ledger file %s (left as it is): %w", f.path, err)
	}
	return doc, true, nil
}

// readBuffer is the size of the reads and writes of the ledger file.
const readBuffer = 64 << 10

// decodeFileDoc reads the file strictly. A file of any other shape (JSON
// without the envelope, a field the reaper does not write, a layout newer
// than this code) is somebody else's file, or a newer reaper's: reading it
// as an empty ledger would overwrite it at the next save and lose it, marks
// included, without a word. So it is an error, and the file is not touched.
//
// A missing version or ledger is said before a field the reaper does not
// write beside them (that is JSON of another shape), and a newer format
// as soon as it is read (a newer layout may hold fields this code does
// not know, and should say so rather than look like somebody else's
// file; the reaper writes the format first).
func decodeFileDoc(r io.Reader, keep bool) (fileDoc, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var doc fileDoc
	isNull, err := state.OpenObject(dec, "ledger file")
	switch {
	case err != nil:
		return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %w", err)
	case isNull:
		return fileDoc{}, errors.New(`not runner-reaper's ledger: it has no "version" field`)
	}
	var version *uint64
	var hasLedger bool
	var unknown error
	// A key of the envelope given twice is refused: the reaper never
	// writes one, and which of the two would count (encoding/json keeps
	// the last, or merges them) is not a question to settle by guessing
	// on a file whose marks the next save replaces.
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %w", err)
		}
		// The envelope's keys are matched exactly, as its fields were
		// always looked for.
		key, _ := tok.(string)
		switch key {
		case "format", "version", "ledger":
			if seen[key] {
				return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: its %q field is given twice", key)
			}
			seen[key] = true
		}
		switch key {
		case "format":
			err = dec.Decode(&doc.Format)
			if err == nil && doc.Format > fileFormat {
				return fileDoc{}, fmt.Errorf("its format is %d, and this runner-reaper reads formats %d to %d (written by a newer runner-reaper?)", doc.Format, oldestFormat, fileFormat)
			}
		case "version":
			err = dec.Decode(&version)
		case "ledger":
			doc.Ledger, hasLedger, err = state.ReadLedger(dec, keep)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
			if unknown == nil {
				unknown = fmt.Errorf("json: unknown field %q", key)
			}
		}
		if err != nil {
			return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %w", err)
		}
	}
	// More stops at the end of the object or at an error, which Token
	// says again.
	if tok, err := dec.Token(); err != nil {
		return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %w", err)
	} else if tok != json.Delim('}') {
		return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %v where its object should end", tok)
	}
	switch {
	case version == nil:
		return fileDoc{}, errors.New(`not runner-reaper's ledger: it has no "version" field`)
	case !hasLedger:
		return fileDoc{}, errors.New(`not runner-reaper's ledger: it has no "ledger" field`)
	case unknown != nil:
		return fileDoc{}, fmt.Errorf("not runner-reaper's ledger: %w", unknown)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fileDoc{}, errors.New("not runner-reaper's ledger: more follows after top-level value")
	}
	doc.Version = *version
	switch {
	case doc.Format == 0:
		doc.Format = oldestFormat
	case doc.Format < oldestFormat || doc.Format > fileFormat:
		return fileDoc{}, fmt.Errorf("its format is %d, and this runner-reaper reads formats %d to %d", doc.Format, oldestFormat, fileFormat)
	}
	if doc.Version == 0 {
		return fileDoc{}, errors.New("not runner-reaper's ledger: its version is 0, and every save writes 1 or more")
	}
	return doc, nil
}

// lock takes the exclusive flock on path+".lock", waiting for it as long as
// ctx allows. Each call opens the lock file anew, so two Save calls in one
// process exclude each other just as two processes do.
func (f *Store) lock(ctx context.Context) (unlock func(), err error) {
	name := f.path + ".lock"
	lf, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open ledger lock %s: %w", name, err)
	}
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = lf.Close()
			return nil, fmt.Errorf("lock ledger %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			_ = lf.Close()
			return nil, fmt.Errorf("lock ledger %s: %w", name, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	return func() {
		// Closing the descriptor releases the flock.
		_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
		_ = lf.Close()
	}, nil
}

// replace writes with write to a temporary file in the ledger's directory
// and renames it over the ledger, so the old ledger stays whole until the
// new one is. It runs under the lock, so any temporary file of this ledger
// already there is a stale one, left by a save that was killed before it
// could remove its own: it is removed first, or every SIGKILL mid-save
// would leave one for good.
func (f *Store) replace(write func(io.Writer) error) error {
	dir := filepath.Dir(f.path)
	removeStale(dir, filepath.Base(f.path)+".tmp-")
	tmp, err := os.CreateTemp(dir, filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary ledger file in %s: %w", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, readBuffer)
	if err := write(w); err != nil {
		return fmt.Errorf("write temporary ledger file %s: %w", tmp.Name(), err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write temporary ledger file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync temporary ledger file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temporary ledger file %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		_ = os.Remove(tmp.Name())
		done = true
		return fmt.Errorf("rename temporary ledger file over %s: %w", f.path, err)
	}
	done = true
	return nil
}

// removeStale removes the files in dir named prefix and digits, the names
// os.CreateTemp gives the ledger's temporary files, and nothing else. A
// file it cannot remove is left for the next save to try again.
func removeStale(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
}
