package runnerlog

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// The lines as the runner's listener writes them, with its "u" times.
const (
	listen  = "2026-01-01 10:00:00Z: Listening for Jobs\n"
	runA    = "2026-01-01 10:00:05Z: Running job: build\n"
	doneA   = "2026-01-01 10:03:12Z: Job build completed with result: Succeeded\n"
	runB    = "2026-01-01 10:04:00Z: Running job: test (ubuntu-latest, 3.12)\n"
	connect = "√ Connected to GitHub\n\nCurrent runner version: '2.330.0'\n"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail string
		want Word
	}{
		{"empty", "", Word{}},
		{"start-up only", connect, Word{}},
		{"listening", connect + listen, Word{Kind: Listening}},
		{"a job started", connect + listen + runA, Word{Kind: Running, Job: "build"}},
		{"a job completed", listen + runA + doneA, Word{Kind: Completed, Job: "build", Result: "Succeeded"}},
		{"a job started after the last completed", listen + runA + doneA + runB, Word{Kind: Running, Job: "test (ubuntu-latest, 3.12)"}},
		{"other lines after the word do not hide it", runA + "2026-01-01 10:01:00Z: Runner reconnected.\n" + connect, Word{Kind: Running, Job: "build"}},
		{"listening again after a restart", runA + listen, Word{Kind: Listening}},
		{"no time", "Running job: build\n", Word{Kind: Running, Job: "build"}},
		{"CRLF", strings.ReplaceAll(listen+runA, "\n", "\r\n"), Word{Kind: Running, Job: "build"}},
		{"every result the runner writes", "Job a completed with result: Canceled\n", Word{Kind: Completed, Job: "a", Result: "Canceled"}},
		{"a name holding the completion words", "Job x completed with result: Failed completed with result: Failed\n",
			Word{Kind: Completed, Job: "x completed with result: Failed", Result: "Failed"}},
		{"a name holding a colon", "Running job: deploy: prod\n", Word{Kind: Running, Job: "deploy: prod"}},

		// What the runner never writes says nothing.
		{"the last line without its newline is not read", runA + "2026-01-01 10:03:12Z: Job build completed with result: Succe", Word{Kind: Running, Job: "build"}},
		{"an unterminated word alone", "Running job: build", Word{}},
		{"a line forged in the middle of another", "step output 2026-01-01 10:03:12Z: Job build completed with result: Succeeded\n", Word{}},
		{"forged after a line's own text", runA + "echo Job build completed with result: Succeeded\n", Word{Kind: Running, Job: "build"}},
		{"a result the runner has not", runA + "Job build completed with result: Done\n", Word{Kind: Running, Job: "build"}},
		{"a result with more after it", runA + "Job build completed with result: Succeeded!\n", Word{Kind: Running, Job: "build"}},
		{"a completion naming no job", runA + "Job  completed with result: Succeeded\n", Word{Kind: Running, Job: "build"}},
		{"a job with no name", listen + "Running job: \n", Word{Kind: Listening}},
		{"another case", "running job: build\n", Word{}},
		{"leading space", " Running job: build\n", Word{}},
		{"a bad time is part of the line", "2026-13-01 10:00:00Z: Running job: build\n", Word{}},
		{"a time in another form", "2026-01-01T10:00:00Z: Running job: build\n", Word{}},
		{"listening with more", "Listening for Jobs now\n", Word{}},
		{"a carriage return inside the line", runA + "Job build completed with result: Succeeded\rRunning job: x\n", Word{Kind: Running, Job: "build"}},
		{"a completion of a job not started ends nothing", runA + "Job " + strings.Repeat("x", 1100) + " completed with result: Succeeded\n", Word{Kind: Running, Job: "build"}},
		{"a completion of another job does not end the running one", listen + runA + "Job test completed with result: Succeeded\n", Word{Kind: Running, Job: "build"}},
		{"a completion with a control character, of a job not in the tail", listen + "Job a\tb completed with result: Succeeded\n", Word{Kind: Listening}},

		// A job started and not ended protects, whatever came after it.
		{"a job still running under a later one's end", runA + runB + "Job test (ubuntu-latest, 3.12) completed with result: Failed\n",
			Word{Kind: Running, Job: "build"}},
		{"the same name run again after its end", runA + doneA + runA, Word{Kind: Running, Job: "build"}},
		{"every job ends at a restart", runA + runB + listen, Word{Kind: Listening}},
		{"a completion after a restart", runA + listen + "Job build completed with result: Succeeded\n", Word{Kind: Completed, Job: "build", Result: "Succeeded"}},

		// A running job's name may hold anything but a newline: a real
		// name dropped would let an older line win. It is escaped.
		{"a tab in the name", listen + "2026-01-01 10:00:05Z: Running job: a\tb\n", Word{Kind: Running, Job: `a\tb`}},
		{"its completion ends it", listen + "Running job: a\tb\n" + "Job a\tb completed with result: Succeeded\n", Word{Kind: Completed, Job: `a\tb`, Result: "Succeeded"}},
		{"an escape sequence in the name", listen + "Running job: \x1b[2Jbuild\n", Word{Kind: Running, Job: `\x1b[2Jbuild`}},
		{"a NUL", listen + "Running job: bu\x00ild\n", Word{Kind: Running, Job: `bu\x00ild`}},
		{"a DEL", listen + "Running job: bu\x7fild\n", Word{Kind: Running, Job: `bu\x7fild`}},
		{"invalid UTF-8", listen + "Running job: bu\xffild\n", Word{Kind: Running, Job: `bu\xffild`}},
		{"a name longer than a kilobyte", listen + "Running job: " + strings.Repeat("x", 1100) + "\n", Word{Kind: Running, Job: strings.Repeat("x", MaxName) + "…"}},
		{"and its completion", listen + "Running job: " + strings.Repeat("x", 1100) + "\nJob " + strings.Repeat("x", 1100) + " completed with result: Canceled\n",
			Word{Kind: Completed, Job: strings.Repeat("x", MaxName) + "…", Result: "Canceled"}},

		// What is kept is made safe.
		{"a bidirectional override in the name is escaped", "Running job: a\u202eb\n", Word{Kind: Running, Job: `a\u202eb`}},
		{"a C1 control in the name is escaped", "Running job: a\u009bb\n", Word{Kind: Running, Job: `a\u009bb`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Parse([]byte(tc.tail)))
		})
	}
}

// A tail that fills MaxBytes was cut at its end by limitBytes: its newest
// lines, the runner's latest word, are missing. A job started in the lines
// kept and not ended there still protects (a completion may be among the
// lines dropped, and the runner is only kept); anything else says nothing,
// since a job may have started in the lines dropped.
func TestParseCutTail(t *testing.T) {
	filler := strings.Repeat("2026-01-01 10:01:00Z: Runner reconnected.\n", MaxBytes/40)
	for _, tc := range []struct {
		name string
		head string
		want Word
	}{
		{"a job running", listen + runA, Word{Kind: Running, Job: "build", Cut: true}},
		{"listening", listen, Word{Cut: true}},
		{"a job completed", listen + runA + doneA, Word{Cut: true}},
		{"nothing", "", Word{Cut: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Parse([]byte((tc.head + filler)[:MaxBytes])))
		})
	}
	// The runner's worker trace copied to stdout (ACTIONS_RUNNER_PRINT_
	// LOG_TO_STDOUT) fills the tail with its own lines during a job.
	trace := strings.Repeat("[WORKER 2026-01-01 10:00:06Z INFO StepsRunner] Processing step: DisplayName='Run make test', ContinueOnError='False'\n", 200)
	assert.Equal(t, Word{Kind: Running, Job: "build", Cut: true}, Parse([]byte((listen + runA + trace)[:MaxBytes])))
	short := runA + filler[:MaxBytes-len(runA)-200]
	assert.Equal(t, Word{Kind: Running, Job: "build"}, Parse([]byte(short)), "a tail under the limit is read")
}

func TestNameIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxName) // two bytes each
	w := Parse([]byte("Running job: " + long + "\n"))
	assert.Equal(t, Running, w.Kind)
	assert.True(t, utf8.ValidString(w.Job))
	assert.True(t, strings.HasSuffix(w.Job, "…"))
	assert.LessOrEqual(t, len(w.Job), MaxName+len("…"))
	assert.Equal(t, strings.Repeat("é", MaxName/2)+"…", w.Job)
}

func TestKindWords(t *testing.T) {
	for k, want := range map[Kind]string{Silent: "silent", Listening: "listening", Running: "running", Completed: "completed"} {
		assert.Equal(t, want, k.String())
	}
	assert.True(t, Word{Kind: Running}.RunningJob())
	assert.False(t, Word{Kind: Completed}.RunningJob())
}

// Whatever the log holds, the word is bounded and safe to show, a cut
// tail says nothing, and only a line the runner could have written (whole,
// in one of its forms) can make it say a job runs.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", listen + runA, runA + doneA, "Running job: \x1b]0;x\x07\n", "Job a completed with result: Failed\r\n",
		"Running job: a\u202eb", strings.Repeat("Running job: x\n", 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tail []byte) {
		w := Parse(tail)
		assert.LessOrEqual(t, len(w.Job), 4*MaxName+len("…"), "the name is bounded (escaping at most quadruples a byte)")
		assert.True(t, safetext.Safe(w.Job), "the name is safe: %q", w.Job)
		if w.Cut {
			assert.Contains(t, []Kind{Silent, Running}, w.Kind, "a cut tail can only protect")
		}
		if w.Kind == Running {
			assert.Contains(t, string(tail), runningJob)
			assert.NotEmpty(t, w.Job)
		}
		if w.Kind == Completed {
			assert.True(t, results[w.Result])
		}
		if w.Kind == Silent {
			assert.Empty(t, w.Job)
		}
	})
}
