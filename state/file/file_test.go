package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

func TestFileErrorsAreNotConflicts(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the ledger path
	}{
		{"directory missing", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "no-such-dir", "ledger.json")
		}},
		{"file corrupt", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "ledger.json")
			require.NoError(t, os.WriteFile(p, []byte("{not json"), 0o600))
			return p
		}},
		{"path is a directory", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "ledger.json")
			require.NoError(t, os.Mkdir(p, 0o700))
			return p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New(c.setup(t))
			_, err := f.Save(Ctx(t), Sample(), "")
			require.Error(t, err)
			assert.False(t, errors.Is(err, state.ErrConflict), "a broken file must not look like a lost race: %v", err)
			if c.name != "directory missing" {
				_, _, err = f.Load(Ctx(t))
				require.Error(t, err)
				assert.False(t, errors.Is(err, state.ErrConflict))
			}
		})
	}
}

// TestFileLayout checks the file is readable JSON carrying its version
// counter, and that saves leave no temporary files behind.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ledger.json")
	f := New(p)
	v1, err := f.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	v2, err := f.Save(Ctx(t), state.Ledger{Marks: Marks(2)}, v1)
	require.NoError(t, err)
	assert.Equal(t, state.Version("1"), v1)
	assert.Equal(t, state.Version("2"), v2)

	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var doc struct {
		Version uint64          `json:"version"`
		Ledger  json.RawMessage `json:"ledger"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, uint64(2), doc.Version)
	assert.Contains(t, string(doc.Ledger), `"verdict": "zombie"`)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"ledger.json", "ledger.json.lock"}, names)
}

// TestFileFormatIsTheOldestThatHoldsTheLedger: a ledger with no reap-loop
// window is written as format 5, which the release before the window
// reads; one with a window as format 6. Both read back whole.
func TestFileFormatIsTheOldestThatHoldsTheLedger(t *testing.T) {
	withLoops := Sample()
	withLoops.Loops = map[string][]state.LoopEntry{"ReplicaSet ci/a": {{At: time.Date(2026, 9, 20, 12, 0, 0, 0, time.UTC), Fingerprint: "outdated", Verdict: "terminal"}}}
	tests := []struct {
		name   string
		ledger state.Ledger
		format int
	}{
		{"no window", Sample(), 5},
		{"an empty window", func() state.Ledger { l := Sample(); l.Loops = map[string][]state.LoopEntry{}; return l }(), 5},
		{"a window", withLoops, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ledger.json")
			f := New(p)
			v, err := f.Save(Ctx(t), tt.ledger, "")
			require.NoError(t, err)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			var doc struct {
				Format int `json:"format"`
			}
			require.NoError(t, json.Unmarshal(b, &doc))
			assert.Equal(t, tt.format, doc.Format)
			got, v2, err := f.Load(Ctx(t))
			require.NoError(t, err)
			assert.Equal(t, v, v2)
			want := state.Normalize(tt.ledger)
			if len(want.Loops) == 0 {
				want.Loops = nil // an empty window reads back as none
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestFileSaveWaitsForLockWithinContext holds the lock as another process
// would and checks Save gives up when its context ends, without calling
// that a conflict, then succeeds once the lock is free.
func TestFileSaveWaitsForLockWithinContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	lf, err := os.OpenFile(p+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX))

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = New(p).Save(short, Sample(), "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errors.Is(err, state.ErrConflict))

	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_UN))
	_, err = New(p).Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
}

// fileSaverEnv tells a re-executed test binary to act as one saver in
// TestFileSeparateProcessesRace: "path|version|mark index".
const fileSaverEnv = "STATE_TEST_FILE_SAVER"

// Exit codes of a saver process.
const (
	saverWon      = 0
	saverConflict = 3
	saverFailed   = 1
)

// TestMain lets a child process of TestFileSeparateProcessesRace save once
// and exit instead of running the tests.
func TestMain(m *testing.M) {
	if os.Getenv(fileSaverEnv) != "" {
		os.Exit(runFileSaver())
	}
	os.Exit(m.Run())
}

// runFileSaver is the child process's whole life: one Save.
func runFileSaver() int {
	parts := strings.Split(os.Getenv(fileSaverEnv), "|")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "bad", fileSaverEnv)
		return saverFailed
	}
	var i int
	if _, err := fmt.Sscan(parts[2], &i); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return saverFailed
	}
	k, m := Mark(i)
	ledger := state.Ledger{Marks: Marks(0)}
	ledger.Marks[k] = m
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := New(parts[0]).Save(c, ledger, state.Version(parts[1]))
	switch {
	case err == nil:
		return saverWon
	case errors.Is(err, state.ErrConflict):
		return saverConflict
	default:
		fmt.Fprintln(os.Stderr, err)
		return saverFailed
	}
}

// TestFileSeparateProcessesRace has several processes save over the same
// version of one file: the flock must make exactly one of them win.
func TestFileSeparateProcessesRace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	v, err := New(p).Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	const n = 6
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d", fileSaverEnv, p, v, 500+i))
		cmds[i].Stderr = os.Stderr
		require.NoError(t, cmds[i].Start())
	}
	won := -1
	for i, cmd := range cmds {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if code == saverWon {
			require.Equal(t, -1, won, "processes %d and %d both won", won, i)
			won = i
			continue
		}
		require.Equal(t, saverConflict, code, "process %d: %v", i, err)
	}
	require.NotEqual(t, -1, won, "no process won")

	got, gv, err := New(p).Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Version("2"), gv)
	k, m := Mark(500 + won)
	assert.Equal(t, state.Ledger{Marks: map[string]fleet.Mark{k: m}, Lists: map[string]state.ListCache{}}, got)
}

// TestFileOfAnotherShapeIsLeftAlone: a file that is not the reaper's
// envelope (JSON of another shape, a field the reaper does not write, a
// newer layout) is refused on Load and on Save with an error naming the
// file, and its bytes are not changed. Read as an empty ledger, it would be
// overwritten by the next save, marks and all.
func TestFileOfAnotherShapeIsLeftAlone(t *testing.T) {
	cases := []struct {
		name, content, why string
	}{
		{"JSON without the envelope", `{"marks":{"pod/0000-uid-0001":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T10:00:00Z"}}}`, `no "version" field`},
		{"an empty object", `{}`, `no "version" field`},
		{"no ledger", `{"version":4}`, `no "ledger" field`},
		{"a null ledger", `{"version":4,"ledger":null}`, `no "ledger" field`},
		{"an array", `[{"version":1,"ledger":{}}]`, "cannot unmarshal array"},
		{"null", `null`, `no "version" field`},
		{"an unknown field beside the envelope", `{"version":2,"ledger":{"marks":{}},"owner":"team-a"}`, `unknown field "owner"`},
		{"an unknown field in the ledger", `{"version":2,"ledger":{"marks":{},"notes":"x"}}`, `unknown field "notes"`},
		{"an unknown field in a mark", `{"version":2,"ledger":{"marks":{"pod/u":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T09:00:00Z","color":"red"}}}}`, `unknown field "color"`},
		{"a future format", `{"format":7,"version":7,"ledger":{"marks":{}}}`, "format is 7"},
		{"a future format with fields this code does not know", `{"format":7,"version":7,"ledger":{"marks":{},"quotas":{}}}`, "written by a newer runner-reaper"},
		{"a reap-loop window of another shape", `{"format":6,"version":1,"ledger":{"marks":{},"loops":{"ReplicaSet ci/a":{"at":1}}}}`, "cannot unmarshal object"},
		{"an unknown field in a reap-loop entry", `{"format":6,"version":1,"ledger":{"marks":{},"loops":{"ReplicaSet ci/a":[{"verdict":"terminal","color":"red"}]}}}`, `unknown field "color"`},
		{"a record of another shape", `{"format":5,"version":1,"ledger":{"marks":{},"history":{"at":1}}}`, "cannot unmarshal object"},
		{"an unknown field in a record", `{"format":5,"version":1,"ledger":{"marks":{},"history":[{"verdict":"zombie","color":"red"}]}}`, `unknown field "color"`},
		{"version 0", `{"version":0,"ledger":{"marks":{}}}`, "version is 0"},
		{"a second document after it", `{"version":1,"ledger":{"marks":{}}} {"version":9}`, "after top-level value"},
		{"marks of another shape", `{"version":1,"ledger":{"marks":[1,2]}}`, "cannot unmarshal"},
		{"an unknown field in a list cache", `{"version":1,"ledger":{"marks":{},"lists":{"org:a":{"trimmed":[],"pages":[]}}}}`, `unknown field "pages"`},
		{"a registration of another shape", `{"version":1,"ledger":{"marks":{},"lists":{"org:a":{"trimmed":[{"runners":[{"i":"one"}]}]}}}}`, "cannot unmarshal"},
		{"a second ledger", `{"version":1,"ledger":{"marks":{"pod/u":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T09:00:00Z"}}},"ledger":{}}`, `"ledger" field is given twice`},
		{"a null ledger after one", `{"version":1,"ledger":{"marks":{}},"ledger":null}`, `"ledger" field is given twice`},
		{"a second version", `{"version":1,"version":2,"ledger":{"marks":{}}}`, `"version" field is given twice`},
		{"a second format", `{"format":7,"format":5,"version":1,"ledger":{"marks":{}}}`, "format is 7"},
		{"the envelope's keys in another case", `{"Version":1,"Ledger":{"marks":{}}}`, `no "version" field`},
		{"cut short in the lists", `{"version":1,"ledger":{"marks":{},"lists":{"org:a":{"trimmed":[]}`, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ledger.json")
			require.NoError(t, os.WriteFile(p, []byte(c.content), 0o600))
			f := New(p)

			_, _, err := f.Load(Ctx(t))
			require.Error(t, err)
			assert.Contains(t, err.Error(), p, "the error names the file")
			assert.Contains(t, err.Error(), c.why)
			assert.False(t, errors.Is(err, state.ErrConflict))
			for _, v := range []state.Version{"", "1", "7"} {
				_, err = f.Save(Ctx(t), Sample(), v)
				require.Error(t, err, "save at %q", v)
				assert.Contains(t, err.Error(), p)
				assert.False(t, errors.Is(err, state.ErrConflict), "a foreign file is not a lost race: %v", err)
			}
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, c.content, string(b), "the file is left byte for byte")
		})
	}
}

// TestFileWithoutFormatIsRead: the files written before the layout had a
// format field are the reaper's own, and read as they always were; the next
// save adds the format.
// A file of format 1 (written before marks kept their local first
// sighting) and one without a format at all are read, and saved in the
// format this code writes.
func TestFileWithoutFormatIsRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	old := `{"version":3,"ledger":{"marks":{"pod/0000-uid-0001":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T10:00:00Z"}}}}`
	require.NoError(t, os.WriteFile(p, []byte(old), 0o600))
	f := New(p)
	l, v, err := f.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Version("3"), v)
	assert.Len(t, l.Marks, 1)
	_, err = f.Save(Ctx(t), l, v)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.EqualValues(t, 5, doc["format"], "saved in the oldest layout this code writes that holds it")
	assert.EqualValues(t, 4, doc["version"])
}

// TestFileReadsEveryLayout: the file written whole by json.MarshalIndent
// (every release before the list caches stood a scope a line), compact, or
// with its keys in another order, is the same ledger, and the next save
// writes it back the same.
func TestFileReadsEveryLayout(t *testing.T) {
	l := Sample()
	l.NextScope = "org:scope-1"
	l.Streaks = state.Streaks{Skips: map[string]int{"org:scope-0": 2}, Bound: 1}
	indented, err := json.MarshalIndent(fileDoc{Format: fileFormat, Version: 5, Ledger: l}, "", "  ")
	require.NoError(t, err)
	compact, err := json.Marshal(fileDoc{Format: fileFormat, Version: 5, Ledger: l})
	require.NoError(t, err)
	ledgerJSON, err := json.Marshal(l)
	require.NoError(t, err)
	reordered := `{"ledger":` + string(ledgerJSON) + `,"version":5,"format":4}`
	for name, content := range map[string]string{"indented": string(indented), "compact": string(compact), "reordered": reordered} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ledger.json")
			require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
			f := New(p)
			got, v, err := f.Load(Ctx(t))
			require.NoError(t, err)
			assert.Equal(t, state.Version("5"), v)
			assert.Equal(t, state.Normalize(l), got)

			v, err = f.Save(Ctx(t), got, v)
			require.NoError(t, err)
			again, v2, err := f.Load(Ctx(t))
			require.NoError(t, err)
			assert.Equal(t, v, v2)
			assert.Equal(t, state.Normalize(l), again)
		})
	}
}

// TestFileSaveKeepsTheLedgerItWasGiven: Save reads the file it replaces
// without keeping its list caches, and writes the ledger it was given,
// list caches and all; a large one as well.
func TestFileSaveKeepsTheLedgerItWasGiven(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	f := New(p)
	first := state.Ledger{Marks: Marks(2), Lists: FleetLists(50, 100)}
	v, err := f.Save(Ctx(t), first, "")
	require.NoError(t, err)
	second := state.Ledger{Marks: Marks(1), Lists: FleetLists(60, 100)}
	v, err = f.Save(Ctx(t), second, v)
	require.NoError(t, err)
	got, gotV, err := f.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gotV)
	assert.Equal(t, second, got)
}

// A save killed before it could remove its temporary file (SIGKILL
// mid-save) leaves ledger.json.tmp-NNN behind; the next save removes it,
// and only files of that exact name: another file, another ledger's, a
// directory of that name, stay.
func TestFileSaveRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	stale := []string{"ledger.json.tmp-123", "ledger.json.tmp-4567890"}
	kept := []string{"ledger.json.tmp-", "ledger.json.tmp-12x", "other.json.tmp-123", "ledger.json.lock", "notes.txt"}
	for _, name := range append(append([]string{}, stale...), kept...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "ledger.json.tmp-999"), 0o700))
	kept = append(kept, "ledger.json.tmp-999")

	f := New(path)
	_, err := f.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, name := range stale {
		assert.NotContains(t, names, name, "a stale temporary file is removed")
	}
	for _, name := range kept {
		assert.Contains(t, names, name, "only the ledger's own temporary files go")
	}
	assert.Contains(t, names, "ledger.json")
}

// TestFileHistory: the record of actions is the ledger's "history", a
// record a line; a format 4 file, written before it existed, loads with
// none and is saved in the format this code writes; and a file written by
// this code is, to a reader that ignores the fields it does not know (a
// decoder of the format 4 layout, jq), the ledger it was, marks and all.
func TestFileHistory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	old := `{"format":4,"version":9,"ledger":{"marks":{"pod/0000-uid-0001":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T10:00:00Z"}},"streaks":{"bound":2}}}`
	require.NoError(t, os.WriteFile(p, []byte(old), 0o600))
	f := New(p)
	l, v, err := f.Load(Ctx(t))
	require.NoError(t, err, "a ledger from before the record loads")
	assert.Equal(t, state.Version("9"), v)
	assert.Len(t, l.Marks, 1)
	assert.Empty(t, l.History)
	h, hv, err := f.LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, h)
	assert.Equal(t, v, hv)

	l.History = History(3)
	v, err = f.Save(Ctx(t), l, v)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	for _, r := range l.History {
		rb, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Contains(t, string(b), "\n      "+string(rb), "a record a line")
	}
	h, hv, err = New(p).LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, l.History, h)
	assert.Equal(t, v, hv)

	// A reader of the format 4 layout that ignores unknown fields.
	var lenient struct {
		Format  int `json:"format"`
		Version uint64
		Ledger  struct {
			Marks   map[string]fleet.Mark `json:"marks"`
			Streaks state.Streaks         `json:"streaks"`
		} `json:"ledger"`
	}
	require.NoError(t, json.Unmarshal(b, &lenient))
	assert.Equal(t, 5, lenient.Format, "a ledger with no reap-loop window is written as format 5")
	assert.Equal(t, uint64(10), lenient.Version)
	assert.Equal(t, l.Marks, lenient.Ledger.Marks)
	assert.Equal(t, l.Streaks, lenient.Ledger.Streaks)
}

// TestFileLoops: the reap-loop window is the ledger's "loops", a group a
// line; a format 5 file, written before it existed, loads with none and
// is saved in the format this code writes, which reads it back whole.
func TestFileLoops(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.json")
	old := `{"format":5,"version":4,"ledger":{"marks":{},"history":[{"at":"2026-03-14T09:00:00Z","verdict":"terminal","action":"delete-pod","result":"deleted"}]}}`
	require.NoError(t, os.WriteFile(p, []byte(old), 0o600))
	f := New(p)
	l, v, err := f.Load(Ctx(t))
	require.NoError(t, err, "a ledger from before the window loads")
	assert.Empty(t, l.Loops)
	assert.Len(t, l.History, 1)

	l.Loops = Loops(2, 3)
	v, err = f.Save(Ctx(t), l, v)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"format": 6`)
	for g, es := range l.Loops {
		eb, err := json.Marshal(es)
		require.NoError(t, err)
		gb, err := json.Marshal(g)
		require.NoError(t, err)
		assert.Contains(t, string(b), "\n      "+string(gb)+": "+string(eb), "a group a line")
	}
	got, gv, err := New(p).Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v, gv)
	assert.Equal(t, l, got)
}
