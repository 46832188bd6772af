// Package ranks holds the test that keeps the house's ranks: every import
// between the project's packages points down (or across one rank), and no
// package of the product imports the harness. The ranks are the table in
// docs/design.md; this test reads them from there, so the two cannot drift.
package ranks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/runner-reaper/runner-reaper"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// list runs go list -json over patterns from the repository's root.
func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root(t)
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", args)
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Join(dir, "..", "..")
}

// ranks reads the ranks table of docs/design.md: each row names a rank (a
// number, 0 at the top) and the packages that hold it, in backquotes.
func ranks(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(root(t), "docs", "design.md"))
	require.NoError(t, err)
	defer f.Close()
	out := map[string]int{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| rank |"):
			in = true
			continue
		case in && !strings.HasPrefix(line, "|"):
			in = false
		}
		if !in || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 4, "a ranks row: %q", line)
		var rank int
		_, err := fmt.Sscanf(strings.TrimSpace(cells[1]), "%d", &rank)
		require.NoError(t, err, "the rank of %q", line)
		for _, name := range backquoted(cells[3]) {
			out[module+"/"+name] = rank
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, "docs/design.md has a ranks table")
	return out
}

func backquoted(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "`")
		if i < 0 {
			return out
		}
		j := strings.Index(s[i+1:], "`")
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+1+j+1:]
	}
}

// harness reports whether a package is the harness's or holds no product
// code: test/, the demo, and packages of tests alone.
func harness(p pkg) bool {
	rel := strings.TrimPrefix(p.ImportPath, module+"/")
	return strings.HasPrefix(rel, "test/") || rel == "demo" || len(p.GoFiles) == 0
}

// Every product package has a rank, and every import between two of them
// points down or across.
func TestImportsPointDown(t *testing.T) {
	r := ranks(t)
	pkgs := list(t, "./...")
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.ImportPath] = true
	}
	for name := range r {
		assert.True(t, exists[name], "docs/design.md ranks %s, which is no package", name)
	}
	var upward []string
	for _, p := range pkgs {
		if harness(p) {
			continue
		}
		from, ok := r[p.ImportPath]
		if !assert.True(t, ok, "%s has no rank in docs/design.md's ranks table", p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := r[imp]
			if !ok {
				continue // reported as the imported package's own failure, or the harness (below)
			}
			if to < from {
				upward = append(upward, fmt.Sprintf("%s (%d) -> %s (%d)", strings.TrimPrefix(p.ImportPath, module+"/"), from, strings.TrimPrefix(imp, module+"/"), to))
			}
		}
	}
	sort.Strings(upward)
	t.Logf("%d arrow(s) point up", len(upward))
	assert.Empty(t, upward, "imports that point up")
}

// No product package imports the harness, and neither entry point links
// any of it.
func TestProductNeverImportsTheHarness(t *testing.T) {
	for _, p := range list(t, "./...") {
		if harness(p) {
			continue
		}
		for _, imp := range p.Imports {
			rel := strings.TrimPrefix(imp, module+"/")
			assert.False(t, strings.HasPrefix(imp, module+"/") && (strings.HasPrefix(rel, "test/") || rel == "demo"),
				"%s imports the harness: %s", p.ImportPath, imp)
		}
	}
	for _, p := range list(t, "-deps", "./functions/cli", "./functions/lambda") {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		assert.False(t, strings.HasPrefix(p.ImportPath, module+"/") && strings.HasPrefix(rel, "test/"),
			"an entry point links the harness: %s", p.ImportPath)
	}
}

// heavy reports whether a package is one of those that are each megabytes
// of code whose pages and start-up every sweep carries in its resident
// memory: every API group's clients, or client-go's fakes with server-side
// apply's merge code (package gentype links them); gRPC and the
// OpenTelemetry SDK, which the SDK's OTLP exporter linked (about 7 MiB
// resident; metrics/otlp sends OTLP's messages itself), and the
// collector's generated service package, which links gRPC again.
func heavy(path string) bool {
	for _, p := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/testing", "k8s.io/client-go/gentype"} {
		if path == p {
			return true
		}
	}
	for _, tree := range []string{"google.golang.org/grpc", "go.opentelemetry.io/otel", "go.opentelemetry.io/proto/otlp/collector"} {
		if path == tree || strings.HasPrefix(path, tree+"/") {
			return true
		}
	}
	return false
}

// election is client-go's leader election, which links every API group's
// clients and client-go's fakes (its LeaseCandidate and its lock's
// constructors do), and the typed Lease client its lock is built on: what
// the long-running mode needs, and only it.
var election = []string{
	"k8s.io/client-go/tools/leaderelection",
	"k8s.io/client-go/tools/leaderelection/resourcelock",
	"k8s.io/client-go/kubernetes/typed/coordination/v1",
}

// The Lambda links none of the heavy packages, nor the long-running mode
// and its election: it sweeps once an invocation.
func TestLambdaLinksNoHeavyClients(t *testing.T) {
	for _, p := range list(t, "-deps", "./functions/lambda") {
		assert.False(t, heavy(p.ImportPath), "the Lambda links %s", p.ImportPath)
		assert.NotEqual(t, module+"/serve", p.ImportPath, "the Lambda links the long-running mode")
		assert.NotContains(t, election, p.ImportPath, "the Lambda links the leader election")
	}
}

// The CLI links the heavy packages only through the leader election of
// the long-running mode (`serve`), which client-go's leaderelection brings
// in whole, and which only package serve imports: without it, nothing of
// the CLI reaches them. The cost is in docs/design.md (What a sweep
// holds).
func TestCLILinksHeavyClientsOnlyThroughTheElection(t *testing.T) {
	pkgs := list(t, "-deps", "./functions/cli")
	imports := map[string][]string{}
	linked := map[string]bool{}
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
		linked[p.ImportPath] = true
	}
	for _, e := range election {
		require.True(t, linked[e], "the CLI links %s: this test's gate is not moot", e)
	}
	gate := map[string]bool{}
	for _, e := range election {
		gate[e] = true
	}
	// What the CLI reaches without passing through the election.
	seen := map[string]bool{}
	queue := []string{module + "/functions/cli"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] || gate[p] {
			continue
		}
		seen[p] = true
		assert.False(t, heavy(p), "the CLI links %s other than through the leader election", p)
		queue = append(queue, imports[p]...)
	}
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/") {
			continue
		}
		for _, imp := range p.Imports {
			if gate[imp] {
				assert.Equal(t, module+"/serve", p.ImportPath, "%s imports %s: only the long-running mode may", p.ImportPath, imp)
			}
		}
	}
}

// Both entry points turn the runtime's heap profiling off before the
// packages that allocate much have initialised (internal/noheapprofile):
// the binaries are built, and the runtime's trace of each package's
// initialisation (GODEBUG=inittrace=1) shows how much was allocated before
// the setting was made. Allocations are sampled every 512 KB on average,
// so under 64 KB few if any were sampled before it; the several megabytes
// that follow would each time have been. Building and linking both is
// most of this package's time, so `make unit` (-short) leaves it to `make
// test`.
func TestEntryPointsTurnHeapProfilingOffFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs both entry points; `make test` runs it")
	}
	const setting = module + "/internal/noheapprofile"
	dir := t.TempDir()
	for _, entry := range []struct{ pkg, tags string }{{"./functions/cli", ""}, {"./functions/lambda", "lambda.norpc"}} {
		t.Run(entry.pkg, func(t *testing.T) {
			bin := filepath.Join(dir, filepath.Base(entry.pkg))
			build := exec.Command("go", "build", "-tags", entry.tags, "-o", bin, entry.pkg)
			build.Dir = root(t)
			out, err := build.CombinedOutput()
			require.NoError(t, err, "%s", out)
			// The binary fails at its configuration (an empty
			// environment, no command): every package has initialised
			// by then.
			run := exec.Command(bin)
			run.Env = []string{"GODEBUG=inittrace=1"}
			var stderr bytes.Buffer
			run.Stderr = &stderr
			_ = run.Run()
			var before, total int64
			found := false
			for _, line := range strings.Split(stderr.String(), "\n") {
				// init PKG @T ms, D ms clock, BYTES bytes, N allocs
				f := strings.Fields(line)
				if len(f) < 10 || f[0] != "init" || f[8] != "bytes," {
					continue
				}
				var n int64
				_, err := fmt.Sscan(f[7], &n)
				require.NoError(t, err, "%q", line)
				if f[1] == setting {
					found, before = true, total
				}
				total += n
			}
			require.True(t, found, "%s does not initialise %s:\n%s", entry.pkg, setting, stderr.String())
			assert.Less(t, before, int64(64<<10), "bytes allocated before heap profiling was turned off")
			assert.Greater(t, total, int64(1<<20), "the initialisation it comes before allocates megabytes")
		})
	}
}
