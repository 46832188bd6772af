// Package docgen keeps the references under docs/ that are made from the
// code in step with it: docs/configuration.md from internal/config's spec,
// docs/metrics.md from metrics.Families. The package that owns each table
// makes its document in memory in a test and hands it to Check, which fails
// when the committed file differs, naming the file and `make docs`; under
// `make docs` (the test flag -write-docs) it writes the file instead.
//
// Only tests import it; it imports nothing of the product's.
package docgen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var write = flag.Bool("write-docs", false, "write the generated documents under docs/ instead of checking them (make docs)")

// Check compares the document made from the code with the committed file
// at path (slash-separated, from the repository's root), or writes it
// there under -write-docs. from names what the document is made from, for
// the message.
func Check(t testing.TB, path, from string, made []byte) {
	t.Helper()
	file := filepath.Join(root(t), filepath.FromSlash(path))
	if *write {
		if err := os.WriteFile(file, made, 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		t.Logf("wrote %s from %s", path, from)
		return
	}
	committed, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		t.Fatalf("%s, made from %s, is not committed: run `make docs` and commit it", path, from)
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if bytes.Equal(committed, made) {
		return
	}
	line, was, now := firstDifference(string(committed), string(made))
	t.Fatalf("%s is not what %s makes of it: run `make docs` and commit the result (line %d is %s, and would be %s)", path, from, line, was, now)
}

// firstDifference is the first line at which two different texts differ,
// numbered from 1, and that line in each (quoted, or "nothing" past its
// end).
func firstDifference(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	line := func(ls []string, i int) string {
		if i >= len(ls) {
			return "nothing"
		}
		return strconv.Quote(ls[i])
	}
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	return i + 1, line(al, i), line(bl, i)
}

// root is the repository's root: the nearest directory up from the test's
// own that holds go.mod.
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's directory")
		}
		dir = parent
	}
}
