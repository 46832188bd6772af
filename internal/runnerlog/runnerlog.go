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
// optional), whole (ended by a newline), short, and free of control
// characters; anything else says nothing. The job name it keeps is cut to
// MaxName bytes and escaped (package safetext). What a forger can gain is
// bounded by what the reaper does with the word: a forged "Running job"
// keeps a leak a little longer, and a forged completion can only end the
// forger's own runner, which could end itself.
package runnerlog

import (
	"bytes"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// The bounds of a read. The runner writes a line when it starts listening,
// when a job starts and when it ends (and a few about its connection), so
// its latest word is among its last lines; a job's own output goes to
// GitHub, not here. TailLines is enough lines for that word to survive a
// flurry of reconnection notices; MaxBytes is a line of about 320 bytes
// for each of them, which the runner's lines never come near, and small
// enough that a log of huge lines costs one small read. A log whose tail
// fills MaxBytes was cut by the API server (limitBytes keeps the start of
// the tail and drops its end, the newest lines), so it is not read at all.
const (
	TailLines = 50
	MaxBytes  = 16 << 10
)

// maxLine is the longest line Parse considers: the runner's own are under
// a hundred bytes plus the job's name.
const maxLine = 1024

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
	// dropped, so it says nothing (Kind is Silent).
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

// Parse reads the tail of a runner's log and returns its latest word: the
// last line, in order, that is one of the runner's. A line not ended by a
// newline is the end of a tail the API server cut, or one still being
// written, and is not read.
func Parse(tail []byte) Word {
	if len(tail) >= MaxBytes {
		return Word{Cut: true}
	}
	var w Word
	for len(tail) > 0 {
		i := bytes.IndexByte(tail, '\n')
		if i < 0 {
			break
		}
		line := tail[:i]
		tail = tail[i+1:]
		if got, ok := parseLine(line); ok {
			w = got
		}
	}
	return w
}

// parseLine reads one line, without its newline.
func parseLine(b []byte) (Word, bool) {
	b = bytes.TrimSuffix(b, []byte{'\r'})
	if len(b) == 0 || len(b) > maxLine || !utf8.Valid(b) || hasControl(b) {
		return Word{}, false
	}
	s := string(b)
	if len(s) > len(stampForm)+2 && s[len(stampForm):len(stampForm)+2] == ": " {
		if _, err := time.Parse(stampForm, s[:len(stampForm)]); err == nil {
			s = s[len(stampForm)+2:]
		}
	}
	switch {
	case s == listening:
		return Word{Kind: Listening}, true
	case strings.HasPrefix(s, runningJob):
		name := s[len(runningJob):]
		if name == "" {
			return Word{}, false
		}
		return Word{Kind: Running, Job: bound(name)}, true
	case strings.HasPrefix(s, jobPrefix):
		// The name may itself hold the words; the result is what follows
		// their last occurrence, and must be one of the runner's.
		i := strings.LastIndex(s, completedMid)
		if i < len(jobPrefix) {
			return Word{}, false
		}
		name, result := s[len(jobPrefix):i], s[i+len(completedMid):]
		if name == "" || !results[result] {
			return Word{}, false
		}
		return Word{Kind: Completed, Job: bound(name), Result: result}, true
	}
	return Word{}, false
}

// hasControl reports whether b holds a C0 control character or DEL: the
// runner writes none in these lines, and a line that holds one is not its.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// bound cuts a job's name to MaxName bytes at a rune's edge, marking the
// cut with "…", and escapes what is left.
func bound(name string) string {
	if len(name) > MaxName {
		cut := MaxName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "…"
	}
	return safetext.String(name)
}
