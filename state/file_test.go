package state

import (
	"context"
	"encoding/json"
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

	"github.com/runner-reaper/runner-reaper/reconcile"
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
			f := NewFile(c.setup(t))
			_, err := f.Save(ctx(t), sample(), "")
			require.Error(t, err)
			assert.False(t, errorsIsConflict(err), "a broken file must not look like a lost race: %v", err)
			if c.name != "directory missing" {
				_, _, err = f.Load(ctx(t))
				require.Error(t, err)
				assert.False(t, errorsIsConflict(err))
			}
		})
	}
}

// TestFileLayout checks the file is readable JSON carrying its version
// counter, and that saves leave no temporary files behind.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ledger.json")
	f := NewFile(p)
	v1, err := f.Save(ctx(t), sample(), "")
	require.NoError(t, err)
	v2, err := f.Save(ctx(t), Ledger{Marks: marks(2)}, v1)
	require.NoError(t, err)
	assert.Equal(t, Version("1"), v1)
	assert.Equal(t, Version("2"), v2)

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
	_, err = NewFile(p).Save(short, sample(), "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errorsIsConflict(err))

	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_UN))
	_, err = NewFile(p).Save(ctx(t), sample(), "")
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
	k, m := mark(i)
	ledger := Ledger{Marks: marks(0)}
	ledger.Marks[k] = m
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := NewFile(parts[0]).Save(c, ledger, Version(parts[1]))
	switch {
	case err == nil:
		return saverWon
	case errorsIsConflict(err):
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
	v, err := NewFile(p).Save(ctx(t), sample(), "")
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

	got, gv, err := NewFile(p).Load(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, Version("2"), gv)
	k, m := mark(500 + won)
	assert.Equal(t, Ledger{Marks: map[string]reconcile.Mark{k: m}, Lists: map[string]reconcile.ListCache{}}, got)
}
