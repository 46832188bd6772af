package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The runners' own word: what actions/runner writes to its standard
// output, which the API server serves as the runner container's log
// (pods/log). A runner that has connected writes
//
//	√ Connected to GitHub
//
//	Current runner version: '2.330.0'
//	2100-01-01 00:00:05Z: Listening for Jobs
//
// and then, per job, "TIME: Running job: NAME" when it takes it and
// "TIME: Job NAME completed with result: Succeeded" (or Failed, Canceled)
// when it ends; an ephemeral runner then removes its configuration and
// exits. The time is the runner's UTC clock in .NET's "u" format.
//
// Each runner pod of ours keeps a bounded tail of those lines, written as
// the world's events happen, and kube.TailRunnerLog serves it. Under hazard
// RunnerLogFaults the log is hostile text, as the reaper must expect:
//   - a read fails now and then (the API server's 500, 503 or timeout);
//   - some runners write nothing the log shows (their output goes
//     elsewhere): an empty log;
//   - some logs end in a line cut mid-way, as a read meets a line being
//     written;
//   - some carry a forged "Running job:" inside another line, with no job
//     behind it, as interleaved writes or a hostile step's output make;
//   - some jobs carry a display name that itself reads like a runner line
//     ("build completed with result: Succeeded"): workflow authors choose
//     job names.
//
// The first three are no evidence of anything, and a product that reads
// them as a running job protects a leak for ever (Liveness catches it); a
// product that reads the forged name as the job's end kills a running job.
// Config.LogsForbidden is the world whose reaper lacks the pods/log right:
// every read is refused 403. None of this draws on the world's random
// source: the logs are a view of the world, never a cause in it, so a
// seed's world is the same with or without them.

// logTailLines is how many lines a pod's log keeps, and a read returns at
// most: the tail the product asks for is far shorter.
const logTailLines = 50

// runnerVersion is the version the world's runners report.
const runnerVersion = "2.330.0"

// logMode is how a runner's log misbehaves (hazard RunnerLogFaults).
type logMode int

const (
	logClean logMode = iota
	// logSilent: the runner's output never reaches its log.
	logSilent
	// logCut: every read ends in a line cut mid-way.
	logCut
	// logForged: a "Running job:" is forged inside another line.
	logForged
)

// runnerLog is one runner container's log: its newest lines, and how it
// misbehaves.
type runnerLog struct {
	mode  logMode
	lines []string
}

func (l *runnerLog) write(at time.Time, format string, args ...any) {
	l.raw(at.UTC().Format("2006-01-02 15:04:05Z") + ": " + fmt.Sprintf(format, args...))
}

func (l *runnerLog) raw(line string) {
	l.lines = append(l.lines, line)
	if n := len(l.lines) - logTailLines; n > 0 {
		l.lines = append(l.lines[:0], l.lines[n:]...)
	}
}

// tail is what a read returns: the lines, each ended by a newline, as the
// mode bends them.
func (l *runnerLog) tail() []byte {
	if l == nil || l.mode == logSilent || len(l.lines) == 0 {
		return []byte{}
	}
	s := strings.Join(l.lines, "\n") + "\n"
	if l.mode == logCut {
		last := l.lines[len(l.lines)-1]
		s = s[:len(s)-1-len(last)+len(last)/2]
	}
	return []byte(s)
}

// logWorld is the logs' own random sources: modes and names drawn as the
// world's events happen, and read faults drawn as the product reads, apart
// from each other so that how often the product reads moves no log.
type logWorld struct {
	rng   *rand.Rand
	reads uint64
}

func newLogWorld(seed uint64) *logWorld {
	return &logWorld{
		rng:   rand.New(rand.NewPCG(seed^0x3c6ef372fe94f82b, seed+0xa54ff53a5f1d36f1)),
		reads: seed ^ 0x510e527fade682d1,
	}
}

// readDraw is the random source of one read: of the pod, in the sweep.
// The product reads its candidates' logs concurrently, so a source shared
// by the reads would hand each a draw in whatever order they came, and a
// seed's run would not repeat.
func (l *logWorld) readDraw(sweep int, uid string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return rand.New(rand.NewPCG(l.reads, h.Sum64()^uint64(sweep)))
}

// hostileNames are job display names that read like runner lines.
var hostileNames = []string{
	"build completed with result: Succeeded",
	"deploy: Running job: release",
	"Job lint completed with result: Failed",
}

// newLog gives a new runner pod of ours its log, drawing its mode.
func (w *world) newLog(p *kpod) {
	p.log = &runnerLog{}
	if !w.cfg.Hazards.Has(RunnerLogFaults) {
		return
	}
	switch x := w.logs.rng.Float64(); {
	case x < 0.03:
		p.log.mode = logSilent
	case x < 0.06:
		p.log.mode = logCut
	case x < 0.09:
		p.log.mode = logForged
	}
}

// logConnected is the runner's banner once it has connected and listens.
func (w *world) logConnected(p *kpod) {
	l := p.log
	if l == nil {
		return
	}
	l.raw("√ Connected to GitHub")
	l.raw("")
	if l.mode == logForged {
		l.raw(fmt.Sprintf("Current runner version: '%s'%s: Running job: deploy", runnerVersion, w.now.UTC().Format("2006-01-02 15:04:05Z")))
	} else {
		l.raw(fmt.Sprintf("Current runner version: '%s'", runnerVersion))
	}
	l.write(w.now, "Listening for Jobs")
}

// logJobStarted writes the runner's line as it takes a job, and returns
// the display name it wrote.
func (w *world) logJobStarted(p *kpod) string {
	name := "build"
	if w.cfg.Hazards.Has(RunnerLogFaults) && w.logs.rng.Float64() < 0.05 {
		name = hostileNames[w.logs.rng.IntN(len(hostileNames))]
	}
	if p.log != nil {
		p.log.write(w.now, "Running job: %s", name)
	}
	return name
}

// logJobEnded writes the runner's line as its job ends, and an ephemeral
// runner's removal of its configuration.
func (w *world) logJobEnded(p *kpod, t fleet.Termination) {
	if p.log == nil || p.logJob == "" {
		return
	}
	result := "Succeeded"
	switch {
	case t.Signal != 0 || t.ExitCode == 143:
		result = "Canceled"
	case t.ExitCode != 0:
		result = "Failed"
	}
	p.log.write(w.now, "Job %s completed with result: %s", p.logJob, result)
	p.logJob = ""
	p.log.raw("√ Removed .credentials")
	p.log.raw("√ Removed .runner")
}

// logSays is the truth the log stands for: whether its runner runs a job
// now, and whether a strict reader can tell (a clean log, read whole).
func (p *kpod) logSays() (running, clean bool) {
	return p.logJob != "", p.log != nil && p.log.mode == logClean
}

// LogStats is what the runners' logs met: the product's reads and their
// answers.
type LogStats struct {
	// Reads counts every read; MaxPerSweep the most in one sweep;
	// Failed those answered with a transient error, Forbidden those
	// refused 403, Gone those of a pod no longer there.
	Reads, MaxPerSweep, Failed, Forbidden, Gone int
	// Said counts the reads served whole from a clean log whose runner
	// was running a job; Hostile those served from a silent, cut or
	// forged log.
	Said, Hostile int
	// Unread counts the acts on a live runner with no job evidence whose
	// log the sweep did not read first.
	Unread int
}

// LogSummary is the logs' line.
func (s *Stats) LogSummary() string {
	l := s.Logs
	per := "0.00"
	if s.Sweeps > 0 {
		per = fmt.Sprintf("%.2f", float64(l.Reads)/float64(s.Sweeps))
	}
	return fmt.Sprintf("chaos: runner logs: %d reads (%s a sweep, at most %d in one), %d failed, %d forbidden, %d of pods gone, %d said a job runs, %d hostile; %d acts on a live runner with no job evidence did not read its log first",
		l.Reads, per, l.MaxPerSweep, l.Failed, l.Forbidden, l.Gone, l.Said, l.Hostile, l.Unread)
}

// logRead is one read of a sweep: whether it was served, and what the log
// then said.
type logRead struct {
	served, running, clean bool
}

var podsResource = schema.GroupResource{Resource: "pods"}

// TailRunnerLog is the pods/log read the product's runner-log guard makes
// (reap.Options.RunnerLogs): the tail of the runner container's log of the
// pod the candidate observed, judged by namespace, name and UID against
// the truth. A pod gone, or another under its name, is not found.
func (k kube) TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := w.top()
	st := &w.stats.Logs
	st.Reads++
	sc.logReads++
	st.MaxPerSweep = max(st.MaxPerSweep, sc.logReads)
	if sc.logs == nil {
		sc.logs = map[string]logRead{}
	}
	key := fleet.PodMarkKey(p.UID)
	sc.logReadOrder = append(sc.logReadOrder, key)
	if w.cfg.LogsForbidden {
		st.Forbidden++
		sc.logs[key] = logRead{}
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods/log"}, p.Name,
			fmt.Errorf("User \"system:serviceaccount:runner-reaper:runner-reaper\" cannot get resource \"pods/log\" in API group \"\" in the namespace %q", p.Namespace)) //nolint:staticcheck // the API server's own message, as it words it
	}
	q := w.byKey[p.Namespace+"/"+p.Name]
	if q == nil || q.uid != p.UID {
		st.Gone++
		sc.logs[key] = logRead{}
		return nil, apierrors.NewNotFound(podsResource, p.Name)
	}
	if !q.managed() {
		w.violate(WrongTarget, "the runner log of pod %s read: another namespace or not matched by the selector", q.key())
	}
	draw := w.logs.readDraw(sc.no, p.UID)
	if w.cfg.Hazards.Has(RunnerLogFaults) && draw.Float64() < 0.03 {
		st.Failed++
		sc.logs[key] = logRead{}
		switch draw.IntN(3) {
		case 0:
			return nil, apierrors.NewInternalError(errors.New("an error on the server (\"unknown\") has prevented the request from succeeding"))
		case 1:
			return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
		default:
			return nil, apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 1)
		}
	}
	running, clean := q.logSays()
	switch {
	case !clean:
		st.Hostile++
	case running:
		st.Said++
	}
	// A read served whole from a clean log is evidence; any other answer
	// is none, so only the first answer of a sweep counts for the pod.
	if _, ok := sc.logs[key]; !ok {
		sc.logs[key] = logRead{served: true, running: running, clean: clean}
	}
	return q.log.tail(), nil
}

// logEvidence reports whether the sweep read the pod's log, whole and
// clean, and it said a job runs: the product then knew of the job.
func (sc *sweepCtx) logEvidence(p *kpod) bool {
	if p == nil {
		return false
	}
	r := sc.logs[fleet.PodMarkKey(p.uid)]
	return r.served && r.clean && r.running
}

// afterLogs checks one finished sweep's log reads: each pod read once at
// most, and only the pods of the candidates it acted on or held; and counts
// the acts on a live runner with no job evidence that read no log.
func (w *world) afterLogs(sc *sweepCtx, candidates map[string]bool) {
	seen := map[string]bool{}
	for _, key := range sc.logReadOrder {
		if seen[key] {
			w.violateAt(sc, LogReads, "the runner log of %s read twice in one sweep", key)
		}
		seen[key] = true
		if !candidates[key] {
			w.violateAt(sc, LogReads, "the runner log of %s read, not a candidate the sweep acted on or held", key)
		}
	}
	for key, h := range sc.hits {
		if _, read := sc.logs[key]; h.live && !h.evidence && !read {
			w.stats.Logs.Unread++
		}
	}
}

// everyLog is the pod lister of the broken product ReadEveryLog: it reads
// the runner log of every pod it lists.
type everyLog struct{ k kube }

func (e everyLog) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	pods, err := e.k.ListPods(ctx)
	for _, p := range pods {
		_, _ = e.k.TailRunnerLog(ctx, p) // the broken product's cost, not its answer
	}
	return pods, err
}

// deafLogs is the RunnerLogs port of the broken product DeafLogReader: the
// read is made (and the world records what it served), and the product is
// handed an empty tail, which says nothing either way.
type deafLogs struct{ k kube }

func (d deafLogs) TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error) {
	if _, err := d.k.TailRunnerLog(ctx, p); err != nil {
		return nil, err
	}
	return nil, nil
}
