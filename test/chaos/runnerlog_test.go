package chaos

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// A runner's line as actions/runner writes it: its UTC time in .NET's "u"
// format, then the message.
var (
	logListening = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Listening for Jobs$`)
	logRunning   = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Running job: (.+)$`)
	logCompleted = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Job (.+) completed with result: (Succeeded|Failed|Canceled)$`)
)

// strictJob reads a whole log strictly, line by line: the job the last
// "Running job" line names, unless a completion of that job follows it.
func strictJob(t *testing.T, log []byte) (string, bool) {
	t.Helper()
	require.True(t, bytes.HasSuffix(log, []byte("\n")), "a clean log ends its last line")
	job, running := "", false
	for _, line := range strings.Split(strings.TrimSuffix(string(log), "\n"), "\n") {
		if m := logRunning.FindStringSubmatch(line); m != nil {
			job, running = m[1], true
			continue
		}
		if m := logCompleted.FindStringSubmatch(line); m != nil && running && m[1] == job {
			running = false
		}
	}
	return job, running
}

// The world's runners write actions/runner's lines as their jobs start and
// end, and the chaos kube serves each pod's tail by namespace, name and
// UID; under hazard RunnerLogFaults some logs are empty, cut or forged and
// some reads fail, and LogsForbidden refuses every read.
func TestRunnerLogs(t *testing.T) {
	st := &Stats{TimeToClean: map[string][]int{}}
	w := newWorld(Config{Seed: 7, Hazards: RunnerLogFaults}, st)
	for i := 0; i < 60; i++ {
		w.step()
	}
	w.stack = append(w.stack, &sweepCtx{})
	k := kube{w: w}
	ctx := context.Background()

	modes := map[logMode]int{}
	var running, listening, failed int
	for _, p := range append([]*kpod(nil), w.pods...) {
		if !p.managed() || !strings.HasPrefix(p.name, ourPrefix) {
			continue
		}
		log, err := k.TailRunnerLog(ctx, p.view())
		if err != nil {
			require.True(t, apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err), "a transient failure: %v", err)
			failed++
			continue
		}
		modes[p.log.mode]++
		switch p.log.mode {
		case logSilent:
			require.Empty(t, log)
		case logCut:
			if len(log) > 0 {
				require.False(t, bytes.HasSuffix(log, []byte("\n")), "a cut log ends mid-line")
			}
		case logForged:
			require.Regexp(t, `Current runner version: '[0-9.]+'\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Running job: deploy`, string(log))
		case logClean:
			if p.regID == 0 && p.logJob == "" && !p.regReaped && p.removedAt.IsZero() {
				continue // not connected yet, or never
			}
			if len(log) == 0 {
				continue
			}
			lines := strings.Split(strings.TrimSuffix(string(log), "\n"), "\n")
			require.LessOrEqual(t, len(lines), logTailLines)
			job, isRunning := strictJob(t, log)
			require.Equal(t, p.logJob != "", isRunning, "the log of %s says a job runs exactly while one does: %q", p.key(), log)
			if isRunning {
				require.Equal(t, p.logJob, job)
				running++
			} else if logListening.MatchString(lines[len(lines)-1]) {
				listening++
			}
		}
	}
	require.Positive(t, running, "runners whose log says a job runs")
	require.Positive(t, listening, "runners whose log says they listen")
	require.Positive(t, modes[logClean])
	require.Positive(t, modes[logSilent]+modes[logCut]+modes[logForged], "hostile logs")
	require.Equal(t, st.Logs.Reads, w.top().logReads)
	require.Equal(t, failed, st.Logs.Failed)

	// A pod gone, or another under its name, is not found; the namespace
	// and selector are the product's to keep.
	gone := w.pods[len(w.pods)-1].view()
	gone.UID = "uid-other"
	_, err := k.TailRunnerLog(ctx, gone)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = k.TailRunnerLog(ctx, fleet.Pod{Namespace: nsRunners, Name: "no-such-pod", UID: "uid-none"})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.Empty(t, st.Violations)
	for _, p := range w.pods {
		if !p.managed() {
			_, _ = k.TailRunnerLog(ctx, p.view())
			break
		}
	}
	require.NotNil(t, firstOf(st, WrongTarget), "a read outside the namespace or selector is caught")

	w.cfg.LogsForbidden = true
	_, err = k.TailRunnerLog(ctx, w.pods[len(w.pods)-1].view())
	require.True(t, apierrors.IsForbidden(err), "%v", err)
}

// A job's end writes the runner's completion line with the result its exit
// says, and an ephemeral runner's removal of its configuration after it.
func TestRunnerLogJobEnd(t *testing.T) {
	tests := []struct {
		term fleet.Termination
		want string
	}{
		{fleet.Termination{ExitCode: 0}, "Succeeded"},
		{fleet.Termination{ExitCode: 1}, "Failed"},
		{fleet.Termination{ExitCode: 7}, "Failed"},
		{fleet.Termination{ExitCode: 143}, "Canceled"},
		{fleet.Termination{Signal: 15}, "Canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			w := newWorld(Config{Seed: 3}, &Stats{TimeToClean: map[string][]int{}})
			p := w.spawn("org:alpha")
			w.start(p, w.now)
			w.register(p)
			w.startJob(p, false)
			w.endJob(p, tt.term)
			lines := strings.Split(strings.TrimSuffix(string(p.log.tail()), "\n"), "\n")
			require.Len(t, lines, 8)
			require.Regexp(t, logListening, lines[3])
			require.Regexp(t, logRunning, lines[4])
			m := logCompleted.FindStringSubmatch(lines[5])
			require.NotNil(t, m, lines[5])
			require.Equal(t, []string{"build", tt.want}, m[1:])
			require.Equal(t, []string{"√ Removed .credentials", "√ Removed .runner"}, lines[6:])
			require.Empty(t, p.logJob)
		})
	}
}
