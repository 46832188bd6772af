// Package version says which build of runner-reaper is running, so that a
// sweep's summary line and `--version` can be tied to the commit that made
// the binary or image. The Makefile and the image build set both values with
// -ldflags -X; a plain `go build` leaves the defaults, which say so.
package version

// Set at link time: -X github.com/runner-reaper/runner-reaper/internal/version.version=v1.2.3
// and ...version.revision=<git commit>. They are variables only because the
// linker can set nothing else; nothing assigns them at run time.
var (
	version  = "dev"
	revision = "unknown"
)

// Version is the release this binary was built as, or "dev".
func Version() string { return version }

// Revision is the git commit this binary was built from, or "unknown".
func Revision() string { return revision }

// String is the one line `runner-reaper --version` prints.
func String() string { return "runner-reaper " + version + " (revision " + revision + ")" }
