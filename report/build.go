package report

// Which build of runner-reaper is running, so that a sweep's summary line
// and `--version` can be tied to the commit that made the binary or image.
// The report is where an operator reads it, so it lives here. The Makefile
// and the image build set both with -ldflags -X; a plain `go build` leaves
// the defaults, which say so:
//
//	-X github.com/runner-reaper/runner-reaper/report.version=v1.2.3
//	-X github.com/runner-reaper/runner-reaper/report.revision=<git commit>
//
// They are variables only because the linker can set nothing else; nothing
// assigns them at run time.
var (
	version  = "dev"
	revision = "unknown"
)

// Version is the release this binary was built as, or "dev".
func Version() string { return version }

// Revision is the git commit this binary was built from, or "unknown".
func Revision() string { return revision }

// VersionLine is the one line `runner-reaper --version` prints.
func VersionLine() string { return "runner-reaper " + version + " (revision " + revision + ")" }
