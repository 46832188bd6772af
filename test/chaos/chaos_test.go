package chaos

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	TuneGC()
	os.Exit(m.Run())
}

// controlRun is one run of the product as it is, made once.
type controlRun struct {
	once sync.Once
	st   *Stats
	err  error
}

// controls holds the control runs by Config: the rows and tests that
// share a world run it once.
var controls sync.Map

// control runs the product as it is in cfg's world, once per Config.
func control(cfg Config) (*Stats, error) {
	v, _ := controls.LoadOrStore(cfg, &controlRun{})
	c := v.(*controlRun)
	c.once.Do(func() { c.st, c.err = Run(cfg) })
	return c.st, c.err
}

func firstOf(st *Stats, inv Invariant) *Violation {
	for i := range st.Violations {
		if st.Violations[i].Invariant == inv {
			return &st.Violations[i]
		}
	}
	return nil
}

// Every invariant can fire: a product broken on purpose in the way each
// one guards against is caught by it.
func TestBrokenProductIsCaught(t *testing.T) {
	tests := []struct {
		name    string
		brk     Break
		hazards Hazard
		want    Invariant
		seed    uint64 // 7 when zero
	}{
		{"a reaper without bounds", NoBounds, AllHazards, Bounds, 0},
		// Without the pods/log right (LogsForbidden below), as the
		// guards that came before the runner's log must hold alone.
		{"a reaper that trusts busy:false", TrustBusyFalse, JobLag | OrphanStamp, JobKilled, 0},
		{"confirm-after of zero", ConfirmZero, InvalidateOne | NeverRegister, Unconfirmed, 0},
		// Seed 11: a racing runner whose pool writes the job annotation
		// changes its pod's resourceVersion, and the deferred delete's
		// precondition spares it; seed 7's racers all were such.
		{"pod deletes after all re-checks", DeferDeletes, RecheckRace | NeverRegister, JobKilled, 11},
		{"a lister that ignores namespace and selector", ListAllNamespaces, 0, WrongTarget, 0},
		{"an ownership rule every registration matches", GhostAll, OtherTeams, WrongTarget, 0},
		{"a failed list read as empty", SwallowListErrors, ListError, ExitStatus, 0},
		{"deletes that delete nothing", LyingDeletes, Crash, Liveness, 0},
		{"a list that loses runners, and no re-check", NoRecheck, 0, HealthyKilled, 0},
		{"confirmation on the reference clock alone, under a lying Date", OneClock, Skew | InvalidateOne | NeverRegister, Unconfirmed, 0},
		// ARC v0.27.6 retries the service's 404 for ever: a release that
		// releases nothing leaves the EphemeralRunner, its pod and its
		// JIT secret for good.
		{"a release of ARC's registration finalizer that releases nothing", ReleaseNothing, ARC | InvalidateOne | Crash, ARCLeakEnds, 0},
		{"a release that releases nothing, against the deleting bound", ReleaseNothing, ARC | InvalidateOne | Crash, StaysDeleting, 0},
		{"EphemeralRunner deletes held to the UID alone", DeleteByUIDOnly, ARC | KubeRace | Crash | InvalidateOne, NoopReported, 0},
		{"a reaper that takes an ARC runner's 422 for proof and releases", ReleaseOn422, ARC | JobLag | OrphanStamp, JobKilled, 6},
		// A list that takes a flipped busy for a moved list, and a moved
		// list for a broken one, skips a busy org sweep after sweep, and
		// its leaks wait.
		{"a list that compares bytes, not membership, in a busy org", ByteStrictRevalidation, busyWorld, Liveness, 0},
		// The product before it served moved lists: a busy org's list
		// moves under nearly every read, and was skipped as inconsistent.
		{"a list that skips a scope whose runners moved while it was read", SkipMoved, busyWorld, SkippedForMovement, 0},
		// GitHub lists a runner idle, or offline, while it runs
		// a job, and answers its DELETE 204. The product before the job
		// guard kills jobs the pool's annotation or ARC's status told of.
		{"the product before the job guard, under GitHub's lies", NoJobGuard, BusyLies | OrphanStamp | ARC, JobKilled, 0},
		// The runner-log guard costs a request per acting candidate; a
		// product that reads every pod it observes costs one a pod.
		{"a product that reads every pod's runner log", ReadEveryLog, RunnerLogFaults | InvalidateOne, LogReads, 0},
		// A runner's own log says it runs a job while GitHub lists it
		// offline: a product that reads the log and takes nothing from
		// it kills the job.
		{"a product deaf to the runner's log, under GitHub's lies", DeafLogReader, BusyLies | RunnerLogFaults, JobKilled, 0},
		// The product before never-started judged only pods whose
		// runner had started: the pods that never start stay.
		{"a product that lists only started pods", HideNeverStarted, StartFaults | InvalidateOne, NeverStartedCleaned, 0},
		// Never-started must leave a pod that is only slow to start: a
		// deadline shorter than the world's late starts kills them.
		{"a start deadline shorter than a late start", ShortStartDeadline, LateStart, HealthyKilled, 0},
		// A sweeper that finds no loop reports none, and spreads out
		// nothing: a broken template's churn takes the bound's room.
		{"a sweeper not told the loop policy, against the report", NoLoopDetection, StartFaults | InvalidateOne, LoopReported, 0},
		{"a sweeper not told the loop policy, against the back-off", NoLoopDetection, StartFaults | InvalidateOne | InvalidateScope | NeverRegister, LoopDelaysOthers, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each run is a world of its own
			seed := tt.seed
			if seed == 0 {
				seed = 7
			}
			cfg := Config{Seed: seed, Sweeps: 300, Hazards: tt.hazards}
			// The guards that came before the runner's log are shown
			// to fire where the log cannot be read: it would otherwise
			// spare what they are there to spare.
			cfg.LogsForbidden = tt.want == JobKilled && tt.brk != DeafLogReader
			// The product as it is, in the same world, is the control;
			// make unit (-short) leaves it to make test, which runs the
			// same worlds, to stay fast.
			if !testing.Short() {
				clean, err := control(cfg)
				require.NoError(t, err)
				require.Empty(t, clean.Violations, "the product as it is breaks no invariant in this world")
			}

			cfg.Break, cfg.StopOn = tt.brk, tt.want
			st, err := Run(cfg)
			require.NoError(t, err)
			v := firstOf(st, tt.want)
			require.NotNil(t, v, "invariant %q never fired; violations: %v", tt.want, st.Violations)
			t.Logf("caught at %s", v)
		})
	}
}

// The same seed gives the same world, the same sweeps and the same figures.
func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 42, Sweeps: 150, Hazards: AllHazards}
	a, err := Run(cfg)
	require.NoError(t, err)
	b, err := Run(cfg)
	require.NoError(t, err)
	a.Duration, b.Duration = 0, 0
	require.Equal(t, a, b)
	require.Positive(t, a.Cleaned)
}

// Runs that once failed, each shrunk to its reproduction, and runs that
// exercise every hazard together. Each seed below found a fault in the
// simulation's own model of the truth while it was being built (a
// registration removed after it was seen offline, a ledger wipe before a
// stamp's leak opened, a mark delayed by a failed sweep); none found a
// product defect. A failure of `make chaos` prints its row.
var regressions = []Repro{
	{Seed: 1, Sweeps: 300, Hazards: "all"},
	{Seed: 4, Sweeps: 300, Hazards: "all"},
	{Seed: 5, Sweeps: 700, Hazards: "all"},
	{Seed: 1, Sweeps: 20, Hazards: "job-lag,kube-race,late-start,late-register,never-register,orphan-stamp,other-teams,overlap,wipe,delete-fault,refuse,pod-list-fault,node-loss,crash,others-delete"},
}

func TestRegressions(t *testing.T) {
	for _, r := range regressions {
		t.Run(r.String(), func(t *testing.T) {
			if testing.Short() && r.Sweeps >= 300 {
				t.Skip("a long reproduction; `make test` runs it")
			}
			hz, err := ParseHazards(r.Hazards)
			require.NoError(t, err)
			st, err := Run(Config{Seed: r.Seed, Sweeps: r.Sweeps, Hazards: hz})
			require.NoError(t, err)
			require.Empty(t, st.Violations)
			require.Zero(t, st.Wrongful)
		})
	}
}

// A runner that registers and takes a job between
// its re-check by name and its pod's delete. The hazard strikes at the next
// GitHub call after the re-check; the reaper deletes the pod before any
// such call, so it loses no job, while the reaper of before (every pod
// delete after all candidates' GitHub calls) does.
func TestRecheckRace(t *testing.T) {
	cfg := Config{Seed: 3, Sweeps: 400, Hazards: RecheckRace | NeverRegister | InvalidateOne | LateRegister}
	st, err := Run(cfg)
	require.NoError(t, err)
	require.Empty(t, st.Violations)
	require.NotEmpty(t, st.TimeToClean["unregistered"], "the world has unregistered pods to re-check")

	cfg.Break = DeferDeletes
	old, err := Run(cfg)
	require.NoError(t, err)
	require.NotNil(t, firstOf(old, JobKilled), "violations: %v", old.Violations)
}

// A list that shifts left while it is read (a runner slides from page 2 to
// page 1 unseen, every count still agreeing). The hazard must happen, and
// no list that lost the runner that slid is taken as complete: the
// revalidation of the earlier pages sees the move, and the list is served
// as moved, for presence only (the exit status checks that the sweep
// completes, and SkippedForMovement that the scope is not skipped).
func TestShiftHazard(t *testing.T) {
	st, err := Run(Config{Seed: 11, Sweeps: 300, Hazards: Shift | OtherTeams | JobLag})
	require.NoError(t, err)
	require.Positive(t, st.Shifts, "runners slid from page 2 to page 1 during a list")
	require.Empty(t, st.Violations)
	require.Zero(t, st.Undetected, "lists taken as complete without the runner that slid")
	t.Logf("%d shifts, %d lists taken as complete, %d wrong marks", st.Shifts, st.Undetected, st.WrongMarks)
}

// busyWorld is the busy org's world of TestBusyOrg and of the rows of
// TestBrokenProductIsCaught that break a list in it.
const busyWorld = BusyOrg | JobLag | InvalidateOne | NeverRegister

// In a busy org of thousands of runners over more than 20 pages, runners
// join and leave while nearly every list is read, and jobs start and end
// on them. The product serves such a list as moved and judges the scope:
// it is skipped only where the world broke an answer, its absences are
// proven by look-ups by name, and its leaks are cleaned in the usual bound.
// The product that skipped a moved list (SkipMoved) and the byte-strict
// list (ByteStrictRevalidation) skip it on nearly every sweep: both are
// caught by SkippedForMovement from the first sweep, and their leaks wait
// past Liveness. The figures of all three are logged.
func TestBusyOrg(t *testing.T) {
	cfg := Config{Seed: 7, Sweeps: 300, Hazards: busyWorld}
	if testing.Short() {
		cfg.Sweeps = 100
	}
	st, err := control(cfg)
	require.NoError(t, err)
	t.Log(st.BusyOrgSummary())
	require.Empty(t, st.Violations)
	b := st.BusyOrg
	require.Equal(t, b.Sweeps, b.Listed, "the busy scope is listed every sweep")
	require.GreaterOrEqual(t, b.PagesMin, 20, "the busy org's list takes 20 pages or more")
	require.GreaterOrEqual(t, float64(b.Changes)/b.ReadTime.Seconds(), 2.0, "runners join or leave twice a second or more while the list is read")
	require.Greater(t, b.MovedReads, b.Sweeps*9/10, "runners join or leave under nearly every read")
	require.Greater(t, b.ServedMoved, b.Sweeps*9/10, "the list is served as moved")
	require.Equal(t, b.Sweeps, b.Judged, "no fault is injected: the scope is judged every sweep")
	require.Zero(t, b.ForMovement+b.ForFlags, "skipped for movement or flags")
	require.Positive(t, b.Flips, "jobs start and end while the list is read")
	require.Positive(t, b.Lookups, "absences acted on are proven by look-ups by name")
	require.NotEmpty(t, b.TimeToClean, "the busy org has leaks that rest on its list")

	for _, brk := range []Break{SkipMoved, ByteStrictRevalidation} {
		cfg.Break, cfg.StopOn = brk, Liveness
		old, err := Run(cfg)
		require.NoError(t, err)
		t.Logf("%s: %s", brk, old.BusyOrgSummary())
		ob := old.BusyOrg
		require.GreaterOrEqual(t, ob.ForMovement+ob.ForFlags, ob.Sweeps*9/10, "%s skips the busy org on nearly every sweep", brk)
		require.LessOrEqual(t, ob.Judged, ob.Sweeps/10)
		v := firstOf(old, SkippedForMovement)
		require.NotNil(t, v, "%s: violations: %v", brk, old.Violations)
		require.Zero(t, v.Sweep, "%s: caught in the first sweep", brk)
		require.NotNil(t, firstOf(old, Liveness), "%s: violations: %v", brk, old.Violations)
		require.Zero(t, old.Wrongful)
	}
}

// A list that contradicts itself (a page listing a runner twice) is skipped
// as inconsistent: ExitStatus wants the sweep degraded, and the skip,
// which the injected fault explains, is no SkippedForMovement.
func TestRepeatPage(t *testing.T) {
	st, err := Run(Config{Seed: 3, Sweeps: 300, Hazards: RepeatPage | OtherTeams | InvalidateOne})
	require.NoError(t, err)
	require.Empty(t, st.Violations)
	require.Positive(t, st.Repeats, "lists met a page that lists a runner twice")
	t.Logf("%d lists met a page that lists a runner twice", st.Repeats)
}

// GitHub lies about runners running jobs (hazard BusyLies).
// The job guard asks GitHub about the job a runner's evidence names, so no
// job with evidence is killed, and the guard protects some; a job killed
// where nothing told of it (a bare pod without the pool's annotation) is
// measured, not a violation. The product before the guard, in the same
// world, kills jobs that had evidence.
func TestBusyLies(t *testing.T) {
	cfg := Config{Seed: 7, Sweeps: 300, Hazards: BusyLies | JobLag | OrphanStamp | ARC | InvalidateOne}
	st, err := Run(cfg)
	require.NoError(t, err)
	t.Log(st.JobSummary())
	require.Empty(t, st.Violations)
	js := st.JobKills
	require.Positive(t, js.Lied, "GitHub lied about some jobs")
	require.Positive(t, js.WithEvidence, "some jobs had evidence")
	require.Less(t, js.WithEvidence, js.Jobs, "some had none")
	require.Zero(t, Sum(js.Evidence)+Sum(js.SaidBusy), "jobs killed that the reaper could know of")
	require.Positive(t, js.Protected, "the guard protected a runner GitHub lied about")
	require.Zero(t, js.Unchecked, "a job check failed in a world without GitHub faults")
	require.Greater(t, Sum(js.Blind), Sum(js.BlindRunning), "some acts on runners with no job evidence hit an idle runner")
	require.Equal(t, Sum(js.NoEvidence), Sum(js.BlindRunning), "each job killed with no evidence is an act on a runner running a job with no evidence, and only those")

	// Before the runner-log guard, GitHub's lies killed jobs nothing
	// else told of; the runner's own log tells of most of them.
	cfg.Break = NoLogGuard
	bare, err := Run(cfg)
	require.NoError(t, err)
	t.Log(bare.JobSummary())
	require.Empty(t, bare.Violations, "measured, not a violation")
	require.Positive(t, Sum(bare.JobKills.NoEvidence), "without the runner's log, GitHub's lies kill jobs nothing told of")
	require.Less(t, Sum(js.NoEvidence), Sum(bare.JobKills.NoEvidence), "the runner's log spares jobs GitHub lied about")

	// The product before the job guard had no runner-log guard either.
	cfg.Break, cfg.LogsForbidden = NoJobGuard, true
	old, err := Run(cfg)
	require.NoError(t, err)
	t.Log(old.JobSummary())
	require.Positive(t, Sum(old.JobKills.Evidence), "the product before the guard kills jobs with evidence")
	require.Zero(t, old.JobKills.Protected)
	v := firstOf(old, JobKilled)
	require.NotNil(t, v, "violations: %v", old.Violations)
	require.Equal(t, Sum(old.JobKills.Evidence)+Sum(old.JobKills.SaidBusy), old.Wrongful, "every wrongful kill is one with evidence or after GitHub said busy")
}

// The chaos command's -break names every Break, and reads each back.
func TestBreakNames(t *testing.T) {
	require.Len(t, breakNames, int(breakEnd))
	for b := None; b < breakEnd; b++ {
		got, err := ParseBreak(b.String())
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	_, err := ParseBreak("no-such-break")
	require.Error(t, err)
}
