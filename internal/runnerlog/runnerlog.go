// Package runnerlog reads what a GitHub Actions runner last said about its
// work, from the tail of its container's log: listening for jobs, running a
// job, or done with one. It is the runner's own word, for a runner of which
// nothing else says whether it holds a job.
//
// The runner's listener writes these lines to its standard output, each
// after a UTC time in .NET's "u" form:
//
//	2026-01-01 10:00:00Z: Listening for Jobs
//	2026-01-01 10:00:05Z: Running job: build
//	2026-01-01 10:03:12Z: Job build completed with result: Succeeded
//
// The log is hostile text: anything in the runner container can write to
// it, and a job's name is whatever the workflow's author wrote. Parse takes
// a line only when it is one of these forms from its first byte (the time
// optional) and whole (ended by a newline); anything else says nothing.
// How strict it is depends on which way a wrong reading errs. A "Running
// job" line only ever keeps a runner, so its name may hold any byte but a
// newline: a real job named with a tab, or a very long name, must not be
// dropped so that an older line wins. A completion only ever lets a runner
// go, so it must be exact: its result one of the runner's, nothing after
// it, and its name one the runner started. The jobs are tracked by name: a
// completion ends only the job it names, and a job started and not ended
// protects the runner whatever came after it. The name kept for the
// report is cut to MaxName bytes and escaped (package safetext). What a
// forger can gain is bounded by what the reaper does with the word: a
// forged "Running job" keeps a leak a little longer, and a forged
// completion can only end the forger's own runner, which could end itself.
package runnerlog

import (
	"bytes"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// The bounds of a read. The runner writes a line when it starts listening,
// when a job starts and when it ends (and a few about its connection), so
// its latest word is among its last lines; a job's own output goes to
// GitHub, not here (unless ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT copies the
// worker's trace here too, which can push the word out of the tail).
// TailLines is enough lines for that word to survive a flurry of
// reconnection notices; MaxBytes is a line of about 320 bytes for each of
// them, which the runner's lines never come near, and small enough that a
// log of huge lines costs one small read. A log whose tail fills MaxBytes
// was cut by the API server (limitBytes keeps the start of the tail and
// drops its end, the newest lines): what its whole lines say can only
// protect the runner, never let it go (see Parse).
const (
	TailLines = 50
	MaxBytes  = 16 << 10
)

// MaxName is the most of a job's name Parse keeps, in bytes, before it is
// escaped: enough for a matrix job's name, and a bound on what a line can
// put into the report.
const MaxName = 200

// Kind is what the runner last said.
type Kind uint8

const (
	// Silent: no line of the tail says anything either way (or the tail
	// could not be trusted to hold the latest word).
	Silent Kind = iota
	// Listening: the runner started and waits for a job.
	Listening
	// Running: the runner started a job and has not said it ended.
	Running
	// Completed: the runner said its job ended.
	Completed
)

// String is the kind's word in the report.
func (k Kind) String() string {
	switch k {
	case Listening:
		return "listening"
	case Running:
		return "running"
	case Completed:
		return "completed"
	default:
		return "silent"
	}
}

// Word is the runner's latest word about its work.
type Word struct {
	Kind Kind
	// Job is the job's name for Running and Completed, cut to MaxName and
	// escaped: safe to show.
	Job string
	// Result is the job's result for Completed (Succeeded, Failed,
	// Canceled, ...).
	Result string
	// Cut is true when the tail filled MaxBytes: its newest lines were
	// dropped, so only a job started in the lines kept and not ended there
	// counts (Kind Running); anything else it says is Silent.
	Cut bool
}

// RunningJob reports whether the runner said it is running a job.
func (w Word) RunningJob() bool { return w.Kind == Running }

// results are the runner's TaskResult names, the only words a completion
// line may end with. Anything else is not the runner's line.
var results = map[string]bool{
	"Succeeded": true, "SucceededWithIssues": true, "Failed": true,
	"Canceled": true, "Skipped": true, "Abandoned": true,
}

const (
	listening    = "Listening for Jobs"
	runningJob   = "Running job: "
	jobPrefix    = "Job "
	completedMid = " completed with result: "
	// stampForm is .NET's "u" format, which the runner writes its times in.
	stampForm = "2006-01-02 15:04:05Z"
)

// Parse reads the tail of a runner's log and returns its latest word: a
// job it started and has not said it ended (the latest such, by name),
// or else the last line, in order, that is one of the runner's. "Listening
// for Jobs" is a start: no job runs across it. A line not ended by a
// newline is the end of a tail the API server cut, or one still being
// written, and is not read.
func Parse(tail []byte) Word {
	cut := len(tail) >= MaxBytes
	if cut {
		tail = tail[:MaxBytes]
	}
	var p parser
	for len(tail) > 0 {
		i := bytes.IndexByte(tail, '\n')
		if i < 0 {
			break
		}
		p.line(bytes.TrimSuffix(tail[:i], []byte{'\r'}))
		tail = tail[i+1:]
	}
	w := p.word()
	if cut && w.Kind != Running {
		// The newest lines are gone: a listening or a completion kept
		// may be followed by a job that is running now.
		return Word{Cut: true}
	}
	w.Cut = cut
	return w
}

// parser is Parse's state: the jobs started and not ended, by raw name,
// and the last word that was not a running job.
type parser struct {
	running []string // in the order they started
	last    Word
}

func (p *parser) word() Word {
	if n := len(p.running); n > 0 {
		return Word{Kind: Running, Job: bound(p.running[n-1])}
	}
	return p.last
}

// line reads one line, without its newline.
func (p *parser) line(b []byte) {
	if len(b) == 0 {
		return
	}
	s := string(b)
	if len(s) > len(stampForm)+2 && s[len(stampForm):len(stampForm)+2] == ": " {
		if _, err := time.Parse(stampForm, s[:len(stampForm)]); err == nil {
			s = s[len(stampForm)+2:]
		}
	}
	switch {
	case s == listening:
		p.running = p.running[:0]
		p.last = Word{Kind: Listening}
	case strings.HasPrefix(s, runningJob):
		// Lenient: any byte but a newline is a name, bounded and
		// escaped when it is shown.
		name := s[len(runningJob):]
		if name == "" {
			return
		}
		p.running = slices.DeleteFunc(p.running, func(n string) bool { return n == name })
		p.running = append(p.running, name)
	case strings.HasPrefix(s, jobPrefix):
		// The name may itself hold the words; the result is what follows
		// their last occurrence (no result holds them), and must be one
		// of the runner's, with nothing after it.
		i := strings.LastIndex(s, completedMid)
		if i < len(jobPrefix) {
			return
		}
		name, result := s[len(jobPrefix):i], s[i+len(completedMid):]
		if name == "" || !results[result] {
			return
		}
		if k := slices.Index(p.running, name); k >= 0 {
			// Exactly the name of a job started: it ends that job,
			// and no other.
			p.running = slices.Delete(p.running, k, k+1)
			p.last = Word{Kind: Completed, Job: bound(name), Result: result}
			return
		}
		if len(p.running) == 0 && utf8.ValidString(name) && !hasControl(name) {
			// A job started before the tail began: the word, for the
			// report; it ends nothing.
			p.last = Word{Kind: Completed, Job: bound(name), Result: result}
		}
	}
}

// hasControl reports whether s holds a C0 control character or DEL: the
// runner writes none in its own words, and a completion of a job the tail
// does not show starting that holds one is not taken.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// bound cuts a job's name to MaxName bytes, at a rune's edge where the
// name is UTF-8, marking the cut with "…", and escapes what is left.
func bound(name string) string {
	if len(name) > MaxName {
		cut := MaxName
		for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(name[cut]); back++ {
			cut--
		}
		name = name[:cut] + "…"
	}
	return safetext.String(name)
}
